//! Layer 7 test of the NAS Parallel Benchmarks on Atoll (issue 24 item 7; Multikernel
//! §5.3, Figure 9): `npb` runs every kernel at class S on McRT, one processor per core,
//! and each passes NPB's own verification; bad arguments are refused with a reason.

use super::balance::balanced;
use super::skip;
use crate::kernel_test;
use crate::thread::ExitStatus;
use crate::user;
use alloc::format;
use alloc::string::String;

kernel_test!(NPB, "user.npb_kernels_verify", 2, Shared, kernels_verify);

/// A run's time limit: class S takes seconds under TCG (EP, the longest, about 4 s at
/// 2 cores on 2 host CPUs).
const NPB_LIMIT_US: u64 = 120_000_000;
/// Free frames each core needs (24 MiB: FT's class S grids are 10.5 MiB, CG's matrix a
/// few, McRT's stacks); a VM with less (64 MiB over 16 cores) skips the test.
const NEEDS_FRAMES: u64 = 6144;

/// `npb K S --cores 0-(k-1)` for each kernel K, with k the online cores up to 2: each
/// exits 0 with NPB's verdict `Verification = SUCCESSFUL` and a `verified` record of 1
/// from Atoll on k cores; an unknown kernel or class, or bad options, exit 2 with a line
/// saying what is wrong; every core's frames, heap bytes and objects balance after.
fn kernels_verify() -> Result<(), String> {
    let k = crate::smp::online_cores().len().min(2);
    let short = crate::percpu::all_cores().take(k).find(|c| c.free_frames() < NEEDS_FRAMES);
    if let Some(c) = short {
        let free = c.free_frames() * 4;
        return skip(format!("core {} has {free} KiB free; npb needs 24 MiB a core", c.index));
    }
    balanced(|| {
        for (bad, why) in [
            ("", "no kernel"),
            ("bt S", "unknown kernel"),
            ("ep Q", "unknown class"),
            ("ep S W", "unexpected"),
            ("cg S --cores 0-99", "--cores"),
            ("mg S --repeat 0", "--repeat"),
            ("ft S --boot a/b", "--boot"),
        ] {
            let (status, text) = run("npb", bad)?;
            if status != ExitStatus::Exited(2) || !text.contains(why) {
                return Err(format!("npb {bad}: ended {status:?}: {}", last_line(&text)));
            }
        }
        let cores = format!("--cores 0-{}", k - 1);
        for kernel in ["ep", "is", "cg", "mg", "ft"] {
            let args = format!("{kernel} S {cores}");
            let (status, text) = run("npb", &args)?;
            if status != ExitStatus::Exited(0) || !text.contains("Verification = SUCCESSFUL") {
                return Err(format!("npb {args}: ended {status:?}: {}", last_line(&text)));
            }
            let verified = text
                .lines()
                .filter(|l| l.starts_with(record::MARKER))
                .find(|l| record::field(l, "metric") == Some("verified"))
                .ok_or_else(|| format!("npb {args}: no verified record"))?;
            let want = format!("{k}");
            if record::field(verified, "value") != Some("1")
                || record::field(verified, "cores") != Some(want.as_str())
                || record::field(verified, "system") != Some("atoll")
            {
                return Err(format!("npb {args}: `{verified}`: not verified by atoll on {k}"));
            }
        }
        Ok(())
    })
}

/// Runs `name args` here, capturing what it prints.
fn run(name: &str, args: &str) -> Result<(ExitStatus, String), String> {
    user::run_capturing(name, args, NPB_LIMIT_US)
        .map_err(|e| format!("{name} {args}: could not run: {e:?}"))
}

/// The last line of `text` (or a note that there was none).
fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or("(no output)")
}
