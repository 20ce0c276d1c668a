//! Kernel cores and syscall devices (issue M12, Corey §3.2, §4.4), and two IP stacks
//! joined by URPC (Multikernel Table 4): user programs that need no NIC, so every run of
//! two cores or more has them.

use super::balance::balanced;
use super::user::expect;
use crate::kernel_test;
use crate::thread::ExitStatus;
use crate::user;
use alloc::format;
use alloc::string::String;

kernel_test!(KCORES, "user.kernel_cores_serve_syscall_devices", 2, Shared, kernel_cores_serve);
kernel_test!(LOOPBACK, "user.loopback_stacks_over_urpc", 2, Shared, loopback_over_urpc);

/// `kcoretest` (issue M12, Corey §3.2, §4.4): a kernel core on another core serves null
/// calls through a syscall device, pipelined too; every bad argument of the new calls
/// gets its error; a stopped kernel core fails calls with `TimedOut`, not a hang. A
/// kernel core whose program ended without stopping it stops by itself: its core's pcore
/// can be named again (`claim`). Frames, heap bytes and objects balance on every core.
fn kernel_cores_serve() -> Result<(), String> {
    balanced(|| {
        expect("kcoretest", "junk", ExitStatus::Exited(2))?;
        expect("kcoretest", "", ExitStatus::Exited(0))?;
        expect("kcoretest", "leave", ExitStatus::Exited(0))?;
        expect("kcoretest", "claim", ExitStatus::Exited(0))
    })
}

/// `loopback` (Multikernel Table 4): 500 UDP packets from a smoltcp stack on one core to
/// one on another, joined by URPC channels, all received (exit 0) with a result line;
/// bad arguments get the usage (exit 2).
fn loopback_over_urpc() -> Result<(), String> {
    balanced(|| {
        for bad in ["0", "99", "x", "--cores", "--cores 0,0", "--cores 0-2"] {
            expect("loopback", bad, ExitStatus::Exited(2))?;
        }
        let (status, text) = user::run_capturing("loopback", "500", 60_000_000)
            .map_err(|e| format!("loopback: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(0) || !text.contains("\"experiment\":\"loopback\"") {
            return Err(format!("loopback ended {status:?}: {text}"));
        }
        Ok(())
    })
}
