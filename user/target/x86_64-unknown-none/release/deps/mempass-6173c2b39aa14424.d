/work/main/user/target/x86_64-unknown-none/release/deps/mempass-6173c2b39aa14424.d: programs/src/bin/mempass.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libmempass-6173c2b39aa14424.rmeta: programs/src/bin/mempass.rs Cargo.toml

programs/src/bin/mempass.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
