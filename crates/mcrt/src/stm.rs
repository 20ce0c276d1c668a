//! Software transactional memory (McRT §2.4). (Being written.)

use crate::runtime::Task;

/// The scheduler's call when a thread with a transaction is switched in again.
pub(crate) fn on_resume(_t: &Task) {}
