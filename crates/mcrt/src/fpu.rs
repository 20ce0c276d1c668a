//! The FPU control words (MXCSR and the x87 control word: rounding, exception masks) and
//! the one sanctioned way to change them, [`set_control`] (issue M15).
//!
//! The System V ABI makes both words callee-saved, so a switch between cooperative threads
//! (McRT §2) should keep each thread's own. Reading MXCSR (`stmxcsr`) costs more than the
//! rest of a switch on some x86 cores, and almost no code changes it: so under the default
//! [`crate::FpuControl::Auto`] the runtime switches with the sharing switch
//! ([`crate::context::switch_sharing_fpu`]) for as long as it can prove that no thread has
//! changed them, that is until a thread calls [`set_control`]; that call flips the runtime
//! to the saving switch ([`crate::context::switch`]) for good.
//!
//! Why the flip needs nothing from the other processors (one relaxed flag): until its
//! thread calls the setter, every context a sharing switch suspends holds the initial
//! words ([`INITIAL`]: every thread starts with them and nobody changed them), and a
//! saving switch that resumes such a context loads them (see `switch_sharing_fpu`). The
//! thread that called the setter sees its own store of the flag on any processor it
//! moves to (a move goes through a queue's lock), so it is only ever suspended by the
//! saving switch; other processors may read the flag late and share a little longer,
//! which is harmless, as their contexts still hold the initial words. `tests/loom_fpu.rs`
//! model-checks these rules with the flag read relaxed.

use core::sync::atomic::Ordering;

// The words and the initial ones are the context switch's (it keeps them, and starts
// every thread with them); they are this module's public face too.
pub use crate::context::{FpuWords, INITIAL};

/// The calling thread's control words.
pub fn control() -> FpuWords {
    let (mxcsr, x87) = crate::context::fpu_control();
    FpuWords { mxcsr, x87 }
}

/// Sets the calling thread's control words: the only way a McRT thread may change them
/// and keep them across its switches. Inside a runtime configured with
/// [`crate::FpuControl::Auto`] (the default), the first call flips the runtime to the
/// switch that keeps each thread's words, before the words change (the module's doc says
/// why that is enough); with `Saved` they are kept anyway; with `Shared` the caller must
/// put the initial words back before it yields or blocks. Outside a runtime it only sets
/// the system thread's words. An MXCSR with reserved bits set is `InvalidArgument` (and
/// nothing changes).
pub fn set_control(words: FpuWords) -> Result<(), crate::Error> {
    if words.mxcsr >> 16 != 0 {
        return Err(crate::Error::InvalidArgument);
    }
    if crate::in_runtime() {
        let rt = crate::runtime::shared();
        if rt.config.fpu == crate::FpuControl::Auto {
            // Relaxed: see the module's doc; this thread's next switch reads it after.
            rt.fpu_saving.store(true, Ordering::Relaxed);
        }
    }
    crate::context::set_fpu_control(words.mxcsr, words.x87);
    Ok(())
}

/// True when the running runtime's switches keep each thread's control words now
/// (`Saved`, or `Auto` after a thread called [`set_control`]).
pub fn kept_per_thread() -> bool {
    crate::runtime::shared().fpu_saving.load(Ordering::Relaxed)
}
