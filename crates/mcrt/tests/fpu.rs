//! Hosted tests of the FPU control words across switches under the default
//! `FpuControl::Auto` (issue M15): the sharing switch until a thread calls
//! `mcrt::fpu::set_control`, the saving switch after.

use mcrt::fpu::{self, FpuWords, INITIAL};
use mcrt::hosted::LinuxHost;
use mcrt::{Config, FpuControl, Policy};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Rounding toward zero, in MXCSR and in the x87 control word.
const TRUNC: FpuWords = FpuWords { mxcsr: 0x1F80 | 0x6000, x87: 0x037F | 0x0C00 };

/// The words with rounding mode `rc` (0..4) in both units.
fn rounding(rc: u32) -> FpuWords {
    FpuWords { mxcsr: 0x1F80 | (rc << 13), x87: 0x037F | ((rc as u16) << 10) }
}

#[test]
fn auto_is_the_default_and_starts_sharing() {
    assert_eq!(Config::new(Policy::Stealing, 2).fpu, FpuControl::Auto);
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Local, 1), &host, || {
        (fpu::kept_per_thread(), fpu::control() == INITIAL)
    });
    assert_eq!(r, Ok((false, true)));
    let saved = Config::new(Policy::Local, 1).with_fpu(FpuControl::Saved);
    assert_eq!(mcrt::run(saved, &host, fpu::kept_per_thread), Ok(true));
}

/// On one processor: b yields before anyone calls the setter (the sharing switch
/// suspends it); a then sets rounding toward zero through the setter and yields to b (the
/// saving switch resumes b). b must see the initial words, not a's; a must keep its own
/// across its yields. Returns (flipped before b yielded, b saw the initial words, a kept
/// its words, flipped after a's call).
#[test]
fn the_setter_flips_to_saving_and_a_thread_suspended_before_gets_the_initial_words() {
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Local, 1), &host, || {
        // Queue order (one FIFO queue): b, then a.
        let b = mcrt::spawn(|| {
            let flipped = fpu::kept_per_thread();
            mcrt::yield_now(); // to a, by the sharing switch
            (flipped, fpu::control() == INITIAL)
        })
        .unwrap();
        let a = mcrt::spawn(|| {
            fpu::set_control(TRUNC).unwrap();
            let flipped = fpu::kept_per_thread();
            mcrt::yield_now(); // to b, by the saving switch
            mcrt::yield_now();
            let held = fpu::control() == TRUNC;
            fpu::set_control(INITIAL).unwrap();
            (held, flipped)
        })
        .unwrap();
        let (b_flipped, b_initial) = b.join().unwrap();
        let (a_held, a_flipped) = a.join().unwrap();
        (b_flipped, b_initial, a_held, a_flipped)
    });
    assert_eq!(r, Ok((false, true, true, true)));
}

/// Threads on two processors (work stealing, so they move) yield 300 times each, checking
/// their words after every yield; every fourth sets its own rounding mode through the
/// setter at a different point, while the others go on with the initial words: each sees
/// only its own. Returns the threads whose words changed under them.
#[test]
fn words_stay_per_thread_across_a_flip_on_two_processors() {
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Stealing, 2), &host, || {
        let bad = Arc::new(AtomicU32::new(0));
        let hs: Vec<_> = (0..16u32)
            .map(|i| {
                let bad = bad.clone();
                mcrt::spawn(move || {
                    let mut want = INITIAL;
                    for round in 0..300 {
                        if i % 4 == 1 && round == 20 * (i + 1) {
                            want = rounding(1 + i % 3);
                            fpu::set_control(want).unwrap();
                        }
                        mcrt::yield_now();
                        if fpu::control() != want {
                            bad.fetch_or(1 << i, Ordering::Relaxed);
                        }
                    }
                    fpu::set_control(INITIAL).unwrap();
                })
                .unwrap()
            })
            .collect();
        for h in hs {
            h.join();
        }
        (bad.load(Ordering::Relaxed), fpu::kept_per_thread())
    });
    assert_eq!(r, Ok((0, true)));
}

#[test]
fn an_mxcsr_with_reserved_bits_is_refused() {
    let bad = FpuWords { mxcsr: 0x1_1F80, x87: 0x037F };
    assert_eq!(fpu::set_control(bad), Err(mcrt::Error::InvalidArgument));
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Local, 1), &host, move || {
        (fpu::set_control(bad), fpu::kept_per_thread(), fpu::control() == INITIAL)
    });
    assert_eq!(r, Ok((Err(mcrt::Error::InvalidArgument), false, true)));
}
