/work/main/user/target/x86_64-unknown-none/release/deps/nullsys-bfc376b3fa5a9411.d: programs/src/bin/nullsys.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libnullsys-bfc376b3fa5a9411.rmeta: programs/src/bin/nullsys.rs Cargo.toml

programs/src/bin/nullsys.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
