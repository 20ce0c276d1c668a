//! The allocator (McRT §2.3). (Being written.)

use crate::runtime::Task;

/// The scheduler's callback when a thread that allocated ends.
pub(crate) fn on_thread_exit(_t: &Task) {}
