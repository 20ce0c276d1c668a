/work/main/user/target/x86_64-unknown-none/release/deps/pcoretest-e390284a4e8a219d.d: programs/src/bin/pcoretest.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libpcoretest-e390284a4e8a219d.rmeta: programs/src/bin/pcoretest.rs Cargo.toml

programs/src/bin/pcoretest.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
