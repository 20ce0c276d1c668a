//! `registers`: preemption and migration keep every integer and SSE register.

use super::{joined_ok, Check};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::thread::{self};
use libatoll::{cores_online, println};

/// Runs `iterations` rounds of a mix of integer (r12–r15) and SSE (xmm0–xmm7) additions
/// seeded by `seed`, all in registers inside one assembly block (a preemption or
/// migration in the middle must keep them); returns the folded result.
fn register_loop(seed: u64, iterations: u64) -> u64 {
    let out: u64;
    // SAFETY: only registers are used; xmm0–xmm7 are not used by this program's own code
    // (it is built without SSE), r12–r15 are declared clobbered.
    unsafe {
        core::arch::asm!(
            "mov r12, {seed}",
            "lea r13, [r12 + 1]",
            "lea r14, [r12 + 2]",
            "lea r15, [r12 + 3]",
            "movq xmm0, r12", "movq xmm1, r13", "movq xmm2, r14", "movq xmm3, r15",
            "movq xmm4, r12", "movq xmm5, r13", "movq xmm6, r14", "movq xmm7, r15",
            "2:",
            "paddq xmm0, xmm1", "paddq xmm1, xmm2", "paddq xmm2, xmm3", "paddq xmm3, xmm4",
            "paddq xmm4, xmm5", "paddq xmm5, xmm6", "paddq xmm6, xmm7", "paddq xmm7, xmm0",
            "add r12, r13", "add r13, r14", "add r14, r15", "add r15, r12",
            "dec {n}",
            "jnz 2b",
            "movq {out}, xmm0",
            "movq {t}, xmm1", "xor {out}, {t}", "movq {t}, xmm2", "add {out}, {t}",
            "movq {t}, xmm3", "xor {out}, {t}", "movq {t}, xmm4", "add {out}, {t}",
            "movq {t}, xmm5", "xor {out}, {t}", "movq {t}, xmm6", "add {out}, {t}",
            "movq {t}, xmm7", "xor {out}, {t}",
            "add {out}, r12", "xor {out}, r13", "add {out}, r14", "xor {out}, r15",
            seed = in(reg) seed,
            n = inout(reg) iterations.max(1) => _,
            out = out(reg) out,
            t = out(reg) _,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            options(nostack),
        );
    }
    out
}

/// What [`register_loop`] computes, in ordinary code.
fn register_model(seed: u64, iterations: u64) -> u64 {
    let mut r = [seed, seed + 1, seed + 2, seed + 3];
    let mut x = [seed, seed + 1, seed + 2, seed + 3, seed, seed + 1, seed + 2, seed + 3];
    for _ in 0..iterations.max(1) {
        for i in 0..7 {
            x[i] = x[i].wrapping_add(x[i + 1]);
        }
        x[7] = x[7].wrapping_add(x[0]);
        r[0] = r[0].wrapping_add(r[1]);
        r[1] = r[1].wrapping_add(r[2]);
        r[2] = r[2].wrapping_add(r[3]);
        r[3] = r[3].wrapping_add(r[0]);
    }
    let mut out = x[0];
    for (i, v) in x.iter().enumerate().skip(1) {
        out = if i % 2 == 1 { out ^ v } else { out.wrapping_add(*v) };
    }
    out = out.wrapping_add(r[0]) ^ r[1];
    out = out.wrapping_add(r[2]) ^ r[3];
    out
}

pub(crate) fn registers() -> Check {
    let cores = cores_online();
    let n = 2 * cores;
    let iterations = 3_000_000;
    let done = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for i in 0..n {
        let (done, ok) = (done.clone(), ok.clone());
        let seed = 0x1234_5678 * (i as u64 + 1);
        let t = thread::spawn(move || {
            let mut good = true;
            for _ in 0..4 {
                good &= register_loop(seed, iterations) == register_model(seed, iterations);
            }
            if good {
                ok.fetch_add(1, Ordering::AcqRel);
            }
            done.fetch_add(1, Ordering::AcqRel);
            0
        })
        .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    // Move them around while they run: each to the next core, again and again.
    let mut moves = 0u64;
    let mut round = 0usize;
    while done.load(Ordering::Acquire) < n as u64 && cores > 1 {
        for (i, t) in threads.iter().enumerate() {
            let core = (i + round) % cores;
            if t.set_affinity(1 << core).is_ok() {
                moves += 1;
            }
        }
        round += 1;
        let _ = thread::sleep_us(5_000);
    }
    let mut migrations = 0;
    for t in threads {
        migrations += t.stat().map(|s| s.migrations).unwrap_or(0);
        joined_ok(t)?;
    }
    if ok.load(Ordering::Acquire) != n as u64 {
        return Err("a register loop's result changed: registers or FPU state lost");
    }
    if cores > 1 && moves > 0 && migrations == 0 {
        return Err("threads were moved but none migrated");
    }
    println!("threadtest: registers: {n} threads, {moves} affinity moves, {migrations} migrations");
    Ok(())
}
