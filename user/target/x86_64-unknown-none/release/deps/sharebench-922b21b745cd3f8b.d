/work/main/user/target/x86_64-unknown-none/release/deps/sharebench-922b21b745cd3f8b.d: programs/src/bin/sharebench.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libsharebench-922b21b745cd3f8b.rmeta: programs/src/bin/sharebench.rs Cargo.toml

programs/src/bin/sharebench.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
