/work/main/user/target/x86_64-unknown-none/release/deps/init-298e1ab29c3f885a.d: programs/src/bin/init.rs Cargo.toml

/work/main/user/target/x86_64-unknown-none/release/deps/libinit-298e1ab29c3f885a.rmeta: programs/src/bin/init.rs Cargo.toml

programs/src/bin/init.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
