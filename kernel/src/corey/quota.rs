//! Each program's kernel-memory quota (issue M14): a quarter of its core's memory,
//! clamped, or a share chosen at boot (`kquota=`).

use super::PAGE;
use crate::mem::frames;
use crate::param::{QUOTA_MAX_BYTES, QUOTA_MIN_BYTES};
use crate::percpu::this_core;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};
use objects::{Census, Quota};

/// Live kernel-memory quotas (one per program, kept until the last thing it made goes),
/// by the core that made them: the balance check sees every program's memory come back.
pub(super) static QUOTAS: [Census; crate::percpu::MAX_CORES] =
    [const { Census::per_core(super::CENSUS_CORES) }; crate::percpu::MAX_CORES];

/// Live program quotas made on `core`.
pub fn live_quotas(core: usize) -> usize {
    QUOTAS.get(core).map_or(0, |c| c.live())
}

/// A new program's kernel-memory quota (issue M14): a quarter of its core's memory,
/// within [`QUOTA_MIN_BYTES`] and [`QUOTA_MAX_BYTES`], so one program cannot take all of
/// it from the others there; the core's reserve ([`room`]) is checked besides.
/// `kquota=PERCENT` chose it as that share of the core's memory, with no upper bound;
/// `kquota=off`, none (only the core's reserve limits a program).
pub fn new_quota() -> Arc<Quota> {
    let (_, total) = frames::counts_here();
    let me = this_core().index;
    let bytes = match QUOTA_PERCENT.load(Ordering::Relaxed) {
        0 => (total * PAGE / 4).clamp(QUOTA_MIN_BYTES, QUOTA_MAX_BYTES),
        QUOTA_OFF => u64::MAX,
        percent => (total * PAGE / 100 * percent).max(QUOTA_MIN_BYTES),
    };
    Quota::new(bytes, QUOTAS.get(me))
}

/// The share of its core's memory a program's quota is, in percent, if `kquota=` chose
/// one (0: the default, a quarter within the bounds; [`QUOTA_OFF`]: no quota).
pub(super) static QUOTA_PERCENT: AtomicU64 = AtomicU64::new(0);

/// [`QUOTA_PERCENT`] for `kquota=off`.
pub(super) const QUOTA_OFF: u64 = u64::MAX;

/// Sets every later program's kernel-memory quota to `percent` (1-100) of its core's
/// memory, or to none for `None` (`kquota=` at boot; `off` lets one program reach the
/// core's reserve, as the reserve's own test needs, and shows what the quota prevents).
pub fn choose_quota_percent(percent: Option<u64>) {
    let word = percent.map_or(QUOTA_OFF, |p| p.clamp(1, 100));
    QUOTA_PERCENT.store(word, Ordering::Relaxed);
}
