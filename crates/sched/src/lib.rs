//! Scheduling policy for Atoll's per-core schedulers, hardware-neutral and tested on the
//! host: what AMPS (Li et al., SC'07, §2) decides, without the mechanism that carries the
//! decisions out (the kernel's threads, context switches and migration messages).
//!
//! Read top to bottom:
//! 1. [`power`]: a core's scaled computing power `P` from its measured speed (§2.2);
//! 2. [`load`]: a core's scaled load `L = queue length / P`, compared exactly, and the
//!    [`LoadTable`] replica each core balances from (no core reads another's run queue);
//! 3. [`policy`]: initial placement and pull-balancing, for AMPS (faster-core-first,
//!    §2.3) and for the symmetric baseline (Linux 2.6's rule, blind to power);
//! 4. [`numa`]: per-thread, per-node resident-set counters, the allocation-phase
//!    heuristic and the three running-thread migration policies (§2.4);
//! 5. [`runqueue`]: one core's round-robin run queue with a time slice;
//! 6. [`wait`]: one core's queues of threads waiting on a user word (`wait`/`wake`);
//! 7. [`thread`]: what the two state machines below need of a thread ([`Thread`]);
//! 8. [`message`]: the scheduler's messages between cores, each kind declared once with
//!    its payload and tag ([`protocol::messages!`]);
//! 9. [`inbox`]: one core's scheduler inbox (messages from other cores, filed) and what
//!    reading it decides: a pure state machine, inbox in, actions out;
//! 10. [`turn`]: the choice for the thread about to be switched in (run, end, or move).
//!
//! All arithmetic is in integers (the kernel does not use the FPU): powers are in
//! thousandths, and scaled loads are compared by cross-multiplication.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod inbox;
pub mod load;
pub mod message;
pub mod numa;
pub mod policy;
pub mod power;
pub mod runqueue;
pub mod thread;
pub mod turn;
pub mod wait;

pub use inbox::{Action, Here, Inbox, Refused};
pub use load::{CoreLoad, LoadTable, ScaledLoad};
pub use message::{Message, Note, Report};
pub use numa::{NumaPolicy, ResidentSet};
pub use policy::{Move, Policy};
pub use power::{Power, POWER_ONE};
pub use runqueue::RunQueue;
pub use thread::Thread;
pub use turn::{choose, Choice};
pub use wait::{WaitKey, WaitQueues, JOIN_SPACE, SLEEP_SPACE};
