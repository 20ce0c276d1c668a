//! Synchronization (McRT §2, [38]): every primitive blocks by predicate yield
//! ([`crate::yield_until`]), so a waiting thread gives its processor to others and is
//! scheduled back only when what it waits for holds. Each releases with a store, then
//! [`crate::notify`] so that parked processors look again.

pub mod barrier;
pub mod condvar;
pub mod mutex;
pub mod rwlock;
pub mod semaphore;

pub use barrier::Barrier;
pub use condvar::Condvar;
pub use mutex::{Mutex, MutexGuard, MutexKind, RawMutex};
pub use rwlock::RwLock;
pub use semaphore::Semaphore;

/// Tries a few times before yielding: a lock held for a few instructions is often free
/// again sooner than a switch takes.
pub(crate) const SPIN_TRIES: u32 = 64;
