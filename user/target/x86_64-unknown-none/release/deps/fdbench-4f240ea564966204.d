/work/main/user/target/x86_64-unknown-none/release/deps/fdbench-4f240ea564966204.d: programs/src/bin/fdbench.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libfdbench-4f240ea564966204.rmeta: programs/src/bin/fdbench.rs Cargo.toml

programs/src/bin/fdbench.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
