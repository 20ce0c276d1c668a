/work/main/user/target/x86_64-unknown-none/release/deps/urpc-912ec2d74b65c02b.d: /work/main/crates/urpc/src/lib.rs /work/main/crates/urpc/src/channel.rs /work/main/crates/urpc/src/message.rs /work/main/crates/urpc/src/reassemble.rs

/work/main/user/target/x86_64-unknown-none/release/deps/liburpc-912ec2d74b65c02b.rmeta: /work/main/crates/urpc/src/lib.rs /work/main/crates/urpc/src/channel.rs /work/main/crates/urpc/src/message.rs /work/main/crates/urpc/src/reassemble.rs

/work/main/crates/urpc/src/lib.rs:
/work/main/crates/urpc/src/channel.rs:
/work/main/crates/urpc/src/message.rs:
/work/main/crates/urpc/src/reassemble.rs:
