//! Where a new thread starts and which core an idle or ticking core pulls a thread from:
//! AMPS (§2.2–§2.3) and the symmetric baseline it is measured against.
//!
//! Balancing is pull-based, as in Linux and the paper: a core that goes idle, or whose
//! tick says it is time, asks [`Policy::pull_from`] which core to pull one thread from,
//! using its own [`LoadTable`] replica. The answer is only a request: the source core
//! decides (it alone knows its run queue; two pullers cannot both take the same thread).
//!
//! # AMPS
//! - **Placement** (§2.3.2): the core with the least scaled load *after* the new thread.
//!   On a tie the paper's rule ("choose the faster core") and its Figure 2b disagree: with
//!   one core of `P = 4` running three threads and idle cores of `P = 1`, the fourth thread
//!   ties (`4/4 = 1/1`), and the figure sends it to a slow core "because otherwise four
//!   threads would share the faster core", so the three keep running 4/3 times faster.
//!   Atoll follows the figure: on a tie the core whose load is lower *now* wins, so the
//!   threads already on a core are not slowed for no gain. (Two cores tied both before and
//!   after have the same power, so the paper's "faster core" tie-break can never apply
//!   after this one; the last tie-break is the lower core index, for repeatability.)
//! - **Pulling** (§2.2, §2.3.2): the sources are tried from the busiest down (largest scaled
//!   load first; on equal `L` the slower core counts as busier). A core pulls one thread
//!   from the first source where the move would not leave the puller's `L` above the
//!   source's `L` before the move, and either the two are out of balance (`Ls - Ld > 1`) or
//!   the puller is faster (a thread moves to a faster, under-used core: faster-core-first).
//!   (Linux, and the paper's patch to it, try only the busiest group; trying the next ones
//!   too means no slower core keeps a thread that a faster core could take within the rule.) A move may empty its source
//!   and may take the source's running thread (subject to the NUMA policy, [`crate::numa`]).
//!
//! # Symmetric (the baseline, Linux 2.6's rule)
//! Blind to power: place on the shortest run queue; pull from the longest queue when it
//! holds at least two threads more than the puller's, taking only a waiting thread (never
//! the running one, so never emptying the source).

use alloc::vec::Vec;

use crate::load::{LoadTable, ScaledLoad};

/// Which scheduler (`sched=amps|symmetric` on the kernel command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// AMPS: asymmetry-aware balancing and faster-core-first placement.
    Amps,
    /// The baseline: queue lengths only, blind to power.
    Symmetric,
}

/// A pull the balancer asks for: one thread from `from` to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The source core.
    pub from: usize,
    /// The puller.
    pub to: usize,
    /// Whether the source's running thread may be taken (when it has no waiting thread
    /// the puller may run). The NUMA policy may still refuse it.
    pub may_take_running: bool,
}

impl Policy {
    /// Parses `amps` or `symmetric`.
    pub fn parse(word: &str) -> Option<Policy> {
        match word {
            "amps" => Some(Policy::Amps),
            "symmetric" => Some(Policy::Symmetric),
            _ => None,
        }
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Amps => "amps",
            Policy::Symmetric => "symmetric",
        }
    }

    /// The core a new thread should start on, among the online cores `allowed` accepts;
    /// `None` if there is none.
    pub fn place(self, table: &LoadTable, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let candidates = table.cores().iter().enumerate().filter(|(i, c)| c.online && allowed(*i));
        let mut best: Option<(usize, ScaledLoad)> = None;
        for (i, c) in candidates {
            let now = c.load();
            let better = match best {
                None => true,
                Some((_, b)) => match self {
                    Policy::Amps => {
                        // Least L after the thread; then least L now (Figure 2b).
                        let after = now.plus_one().cmp_load(b.plus_one());
                        after.is_lt() || (after.is_eq() && now.cmp_load(b).is_lt())
                    }
                    Policy::Symmetric => now.length < b.length,
                },
            };
            if better {
                best = Some((i, now));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The core `me` should pull one thread from, if any, by `me`'s replica `table`.
    pub fn pull_from(self, table: &LoadTable, me: usize) -> Option<Move> {
        let mine = table.get(me).filter(|c| c.online)?;
        let d = mine.load();
        let others = table.cores().iter().enumerate().filter(|(i, c)| *i != me && c.online);
        match self {
            Policy::Amps => {
                // Sources from the busiest down: largest L first; on equal L the slower
                // core first (§3); then the lower index. The first the rules allow wins.
                let mut sources: Vec<(usize, ScaledLoad)> =
                    others.filter(|(_, c)| c.length > 0).map(|(i, c)| (i, c.load())).collect();
                sources.sort_by(|(i, a), (j, b)| {
                    b.cmp_load(*a).then(a.power.cmp(&b.power)).then(i.cmp(j))
                });
                sources.into_iter().find_map(|(from, s)| {
                    // Never leave the puller above the source's load before the move
                    // (§2.3.2); move only to restore balance or onto a faster core.
                    let within = !d.plus_one().cmp_load(s).is_gt();
                    let unbalanced = s.exceeds_by_more_than_one(d);
                    let faster = d.power > s.power;
                    (within && (unbalanced || faster)).then_some(Move {
                        from,
                        to: me,
                        may_take_running: true,
                    })
                })
            }
            Policy::Symmetric => {
                let mut longest: Option<(usize, u64)> = None;
                for (i, c) in others {
                    if longest.is_none_or(|(_, n)| c.length > n) {
                        longest = Some((i, c.length));
                    }
                }
                let (from, n) = longest?;
                (n >= d.length + 2).then_some(Move { from, to: me, may_take_running: false })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::Power;

    fn table(powers: &[u64], lengths: &[u64]) -> LoadTable {
        let powers: alloc::vec::Vec<Power> = powers.iter().map(|&p| Power(p)).collect();
        let mut t = LoadTable::new(&powers, &[]);
        for (i, &n) in lengths.iter().enumerate() {
            t.set_length(i, n);
        }
        t
    }

    /// Places `n` threads one after another; returns the final lengths.
    fn place_all(policy: Policy, t: &mut LoadTable, n: usize) -> alloc::vec::Vec<u64> {
        for _ in 0..n {
            let core = policy.place(t, |_| true).unwrap();
            let length = t.get(core).unwrap().length;
            t.set_length(core, length + 1);
        }
        t.cores().iter().map(|c| c.length).collect()
    }

    #[test]
    fn figure_2b_three_threads_on_the_fast_core_then_a_slow_one() {
        let mut t = table(&[4000, 1000, 1000, 1000], &[0, 0, 0, 0]);
        assert_eq!(place_all(Policy::Amps, &mut t, 3), [3, 0, 0, 0]);
        // The tie (4/4 = 1/1) goes to a slow core, as the figure shows.
        assert_eq!(place_all(Policy::Amps, &mut t, 1), [3, 1, 0, 0]);
        assert_eq!(place_all(Policy::Amps, &mut t, 2), [3, 1, 1, 1]);
        assert_eq!(place_all(Policy::Amps, &mut t, 1), [4, 1, 1, 1]);
    }

    #[test]
    fn symmetric_placement_is_blind_to_power() {
        let mut t = table(&[4000, 1000, 1000, 1000], &[0, 0, 0, 0]);
        assert_eq!(place_all(Policy::Symmetric, &mut t, 4), [1, 1, 1, 1]);
    }

    #[test]
    fn placement_respects_affinity_and_offline_cores() {
        let mut t = table(&[4000, 1000], &[0, 0]);
        assert_eq!(Policy::Amps.place(&t, |c| c == 1), Some(1));
        t.set_online(1, false);
        assert_eq!(Policy::Amps.place(&t, |c| c == 1), None);
    }

    #[test]
    fn figure_2a_an_idle_fast_core_pulls_the_slow_cores_threads() {
        // A fast core (P = 4) idle, three slow ones with one thread each: balanced by
        // definition, yet each thread runs faster on the fast core (§2.3.1).
        let mut t = table(&[4000, 1000, 1000, 1000], &[0, 1, 1, 1]);
        assert!(t.balanced());
        for _ in 0..3 {
            let m = Policy::Amps.pull_from(&t, 0).unwrap();
            assert!(m.may_take_running, "the move empties its source");
            let (from, to) = (m.from, m.to);
            t.set_length(from, t.get(from).unwrap().length - 1);
            t.set_length(to, t.get(to).unwrap().length + 1);
        }
        assert_eq!(
            t.cores().iter().map(|c| c.length).collect::<alloc::vec::Vec<_>>(),
            [3, 0, 0, 0]
        );
        // Now no slow core pulls back (it would be above the fast core's 3/4).
        for me in 1..4 {
            assert_eq!(Policy::Amps.pull_from(&t, me), None);
        }
        // The symmetric baseline leaves them where they were.
        let t = table(&[4000, 1000, 1000, 1000], &[0, 1, 1, 1]);
        assert_eq!(Policy::Symmetric.pull_from(&t, 0), None);
    }

    #[test]
    fn on_equal_load_the_slower_core_is_busier() {
        // Core 1 (P = 2, 2 threads) and core 2 (P = 1, 1 thread) both have L = 1.
        let t = table(&[4000, 2000, 1000], &[0, 2, 1]);
        assert_eq!(Policy::Amps.pull_from(&t, 0).map(|m| m.from), Some(2));
    }

    #[test]
    fn no_move_leaves_the_puller_above_the_source() {
        // Figure 1's balance: the fast core would go to 5/2 > 2.
        let t = table(&[2000, 1000, 1000, 1000], &[4, 2, 2, 2]);
        for me in 0..4 {
            assert_eq!(Policy::Amps.pull_from(&t, me), None, "core {me}");
        }
    }

    #[test]
    fn symmetric_pulls_waiting_threads_from_a_queue_two_longer() {
        let t = table(&[1000, 1000], &[3, 1]);
        assert_eq!(
            Policy::Symmetric.pull_from(&t, 1),
            Some(Move { from: 0, to: 1, may_take_running: false })
        );
        let t = table(&[1000, 1000], &[2, 1]);
        assert_eq!(Policy::Symmetric.pull_from(&t, 1), None);
    }

    #[test]
    fn names_round_trip() {
        for p in [Policy::Amps, Policy::Symmetric] {
            assert_eq!(Policy::parse(p.name()), Some(p));
        }
        assert_eq!(Policy::parse("fifo"), None);
    }
}
