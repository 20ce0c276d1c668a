/work/main/user/target/x86_64-unknown-none/release/deps/fault-3146684631675a54.d: programs/src/bin/fault.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libfault-3146684631675a54.rmeta: programs/src/bin/fault.rs Cargo.toml

programs/src/bin/fault.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
