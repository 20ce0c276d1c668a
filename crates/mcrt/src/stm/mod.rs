//! Software transactional memory (McRT §2.4, McRT-STM [37]). (Being written.)

use crate::runtime::Task;

/// The scheduler's call when a thread with a transaction is switched in again (§2.4: it
/// marks itself active, then checks whether it was aborted while it had yielded).
pub(crate) fn on_resume(_t: &Task) {}
