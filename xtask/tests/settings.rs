//! Commands that take no settings must not refuse settings meant for another command:
//! `make bench CORES=1,2` runs `cargo xtask deps` first with `CORES=1,2` in the
//! environment (a list, as `bench` takes it), and that used to stop it with "CORES must be
//! a number".

use std::process::Command;

#[test]
fn help_and_deps_ignore_a_core_list() {
    for command in ["help", "deps"] {
        let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg(command)
            .env("CORES", "1,2")
            .env("REPEAT", "x")
            .output()
            .expect("xtask runs");
        assert!(
            out.status.success(),
            "`xtask {command}` with CORES=1,2 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn run_still_refuses_a_bad_core_count() {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("run")
        .env("CORES", "1,2")
        .output()
        .expect("xtask runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CORES must be a number"));
}
