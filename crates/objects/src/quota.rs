//! A program's kernel-memory quota (issue M14): every call that grows kernel memory on a
//! program's behalf — a new object, a share's table as it grows, a segment's page map,
//! an address range's mappings — takes a [`Charge`] against its [`Quota`]
//! first, and is refused when the quota is spent. The charge lives in what it paid for
//! (the object, the table, the segment, the range) and is given back when that goes, on whichever core and
//! whenever, so a quota counts exactly the kernel memory its program's calls hold now.
//!
//! The core's own reserve is checked besides (the kernel's `room`): the quota keeps one
//! program from taking all of its core's kernel memory from the others; the reserve keeps
//! all of them together from taking the kernel's last frames.
//!
//! What grows an object is charged to the object's maker, whoever calls: a program that
//! hands out a share or range lets others grow it at its own cost, as Corey's shares give
//! others the objects themselves (Corey §3.3).

use crate::{Census, CensusToken, ObjError};
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

/// One program's kernel memory: bytes charged now, and the most it may hold.
#[derive(Debug)]
pub struct Quota {
    used: AtomicU64,
    limit: u64,
    /// Counts the quota live in its creating core's census of quotas, so a test can see
    /// every program's kernel memory come back (a quota goes with its last charge).
    _live: Option<CensusToken>,
}

impl Quota {
    /// A quota of `limit` bytes, counted live in `census` while it lives (if given).
    pub fn new(limit: u64, census: Option<&'static Census>) -> Arc<Quota> {
        Arc::new(Quota { used: AtomicU64::new(0), limit, _live: census.map(CensusToken::count) })
    }

    /// Bytes charged now.
    pub fn used(&self) -> u64 {
        // Relaxed: a statistic; the limit is enforced by the compare-exchange in `take`.
        self.used.load(Ordering::Relaxed)
    }

    /// The most it may hold.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Takes `bytes` more, or refuses with [`ObjError::QuotaExceeded`] (nothing taken).
    fn take(&self, bytes: u64) -> Result<(), ObjError> {
        // Relaxed: the counter itself is the only thing published; `fetch_update` makes
        // concurrent takes from several cores sum correctly and never pass the limit.
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .map(|_| ())
            .map_err(|_| ObjError::QuotaExceeded)
    }

    /// Gives `bytes` back.
    fn give(&self, bytes: u64) {
        // A charge gives back exactly what it took, so this cannot go below zero.
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// A charge of `bytes` against this quota, or [`ObjError::QuotaExceeded`].
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, ObjError> {
        self.take(bytes)?;
        Ok(Charge { quota: self.clone(), bytes: AtomicU64::new(bytes) })
    }
}

/// Bytes taken from a [`Quota`], given back when dropped. Kept in what it paid for.
#[derive(Debug)]
pub struct Charge {
    quota: Arc<Quota>,
    bytes: AtomicU64,
}

impl Charge {
    /// The bytes it holds now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The quota it is taken from.
    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    /// Makes it hold `bytes`: growing takes the difference from the quota (or refuses
    /// with [`ObjError::QuotaExceeded`], holding what it held); shrinking gives it back.
    /// Callers resize one charge under the lock of what it pays for (a segment's, a
    /// range's), so two resizes of it never interleave.
    pub fn resize(&self, bytes: u64) -> Result<(), ObjError> {
        let held = self.bytes();
        if bytes > held {
            self.quota.take(bytes - held)?;
        } else {
            self.quota.give(held - bytes);
        }
        self.bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.quota.give(*self.bytes.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn charges_stop_at_the_limit_and_come_back_when_dropped() {
        let q = Quota::new(100, None);
        let a = q.charge(60).unwrap();
        assert_eq!(q.charge(41).unwrap_err(), ObjError::QuotaExceeded);
        let b = q.charge(40).unwrap();
        assert_eq!(q.used(), 100);
        drop(a);
        assert_eq!(q.used(), 40);
        drop(b);
        assert_eq!(q.used(), 0);
    }

    #[test]
    fn a_refused_resize_keeps_what_it_held() {
        let q = Quota::new(100, None);
        let c = q.charge(10).unwrap();
        let _other = q.charge(80).unwrap();
        assert_eq!(c.resize(30).unwrap_err(), ObjError::QuotaExceeded);
        assert_eq!((c.bytes(), q.used()), (10, 90));
        c.resize(20).unwrap();
        assert_eq!(q.used(), 100);
        c.resize(0).unwrap();
        assert_eq!(q.used(), 80);
    }

    #[test]
    fn a_huge_charge_does_not_wrap() {
        let q = Quota::new(u64::MAX, None);
        let _a = q.charge(u64::MAX - 1).unwrap();
        assert_eq!(q.charge(2).unwrap_err(), ObjError::QuotaExceeded);
    }

    #[test]
    fn the_census_counts_a_quota_until_its_last_charge_goes() {
        static CENSUS: Census = Census::new();
        let q = Quota::new(10, Some(&CENSUS));
        let c = q.charge(1).unwrap();
        drop(q);
        assert_eq!(CENSUS.live(), 1);
        drop(c);
        assert_eq!(CENSUS.live(), 0);
    }

    #[test]
    fn charges_from_many_threads_never_pass_the_limit() {
        extern crate std;
        let q = Quota::new(1000, None);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..2000u64 {
                        match q.charge(1 + i % 7) {
                            Ok(c) => held.push(c),
                            Err(_) => {
                                assert!(q.used() <= 1000);
                                held.clear();
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(q.used(), 0);
    }
}
