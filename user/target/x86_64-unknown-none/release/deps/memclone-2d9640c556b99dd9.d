/work/main/user/target/x86_64-unknown-none/release/deps/memclone-2d9640c556b99dd9.d: programs/src/bin/memclone.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libmemclone-2d9640c556b99dd9.rmeta: programs/src/bin/memclone.rs Cargo.toml

programs/src/bin/memclone.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
