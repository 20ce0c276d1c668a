/work/main/user/target/x86_64-unknown-none/release/deps/hello-deed5461f533fe3e.d: programs/src/bin/hello.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libhello-deed5461f533fe3e.rmeta: programs/src/bin/hello.rs Cargo.toml

programs/src/bin/hello.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
