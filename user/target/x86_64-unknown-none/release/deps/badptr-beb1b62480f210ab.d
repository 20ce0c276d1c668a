/work/main/user/target/x86_64-unknown-none/release/deps/badptr-beb1b62480f210ab.d: programs/src/bin/badptr.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libbadptr-beb1b62480f210ab.rmeta: programs/src/bin/badptr.rs Cargo.toml

programs/src/bin/badptr.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
