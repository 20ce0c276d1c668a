/work/main/user/target/x86_64-unknown-none/release/deps/spin-269c2c476536912d.d: programs/src/bin/spin.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libspin-269c2c476536912d.rmeta: programs/src/bin/spin.rs Cargo.toml

programs/src/bin/spin.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
