/work/main/user/target/x86_64-unknown-none/release/deps/cowtest-b10df9d4924b055f.d: programs/src/bin/cowtest.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libcowtest-b10df9d4924b055f.rmeta: programs/src/bin/cowtest.rs Cargo.toml

programs/src/bin/cowtest.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
