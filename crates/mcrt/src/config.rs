//! The scheduler's configuration (McRT §2.2): P logical processors, Q task queues, and the
//! mapping between them: which queues each processor snoops, in order, and where the
//! threads it creates go. Chosen at start-up ([`Config`], parsed from words such as
//! `stealing p=4 lock=ticket`).

use alloc::vec::Vec;

/// How a queue's lock is taken (McRT §3.2.3, Figure 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLock {
    /// Test-and-test-and-set (`locks::TtsLock`).
    Tts,
    /// FIFO tickets (`locks::TicketLock`).
    Ticket,
}

/// Whether a thread switch keeps each thread's FPU control state (MXCSR and the x87
/// control word, which the System V ABI makes callee-saved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpuControl {
    /// The default (issue M15): `Shared` for as long as no thread has called the setter,
    /// [`crate::fpu::set_control`], so nobody can have changed the words; the setter's first
    /// call turns the runtime to `Saved` for good (`crate::fpu` says why that is safe).
    Auto,
    /// Each thread keeps its own (`mcrt::context::switch`): a switch reads both words.
    Saved,
    /// All threads share one (`mcrt::context::switch_sharing_fpu`), as coroutine libraries
    /// such as `corosensei` do: a thread that changes rounding or exception masks must put
    /// them back before it yields or blocks (a new thread's first run loads the defaults).
    /// Reading MXCSR (`stmxcsr`) alone costs more than the rest of a switch on some x86
    /// cores (2.8 ns on the EPYC this was measured on, against 1.1 ns for the switch;
    /// `make bench-host`, `mcrt_micro`).
    Shared,
}

/// A named mapping of processors to queues (§2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// One queue every processor snoops (Q = 1).
    Single,
    /// Processor-local queues: each processor snoops only its own, and a thread goes to its
    /// creator's queue (so it keeps the creator's processor: affinity-preserving).
    Local,
    /// Work sharing: processor-local queues, new threads dealt round robin over all.
    Sharing,
    /// Work stealing: new threads go to the creator's queue; an idle processor takes
    /// from any other queue.
    Stealing,
    /// Restricted stealing: as `Stealing`, but only from the neighbouring processors'
    /// queues (p − 1 and p + 1).
    Neighbour,
}

impl Policy {
    /// Every policy, in the order the benchmarks run them.
    pub const ALL: [Policy; 5] =
        [Policy::Single, Policy::Local, Policy::Sharing, Policy::Stealing, Policy::Neighbour];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Single => "single",
            Policy::Local => "local",
            Policy::Sharing => "sharing",
            Policy::Stealing => "stealing",
            Policy::Neighbour => "neighbour",
        }
    }

    /// The policy named `word`.
    pub fn parse(word: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == word)
    }
}

/// The whole mapping: processor `p` snoops `snoop[p]` in order (the first is its home
/// queue) and puts the threads it creates in one of `spawn_to[p]` (round robin over it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Logical processors (P).
    pub processors: usize,
    /// Task queues (Q).
    pub queues: usize,
    /// Per processor: the queues it takes threads from, in the order it tries them.
    pub snoop: Vec<Vec<usize>>,
    /// Per processor: the queues its new threads go to (dealt round robin).
    pub spawn_to: Vec<Vec<usize>>,
    /// How the queues' locks are taken.
    pub lock: QueueLock,
    /// The policy this mapping came from (for reports), if any.
    pub policy: Option<Policy>,
    /// Whether switches keep each thread's FPU control state (default: `Auto`, they do
    /// once a thread has changed it through [`crate::fpu::set_control`]).
    pub fpu: FpuControl,
}

impl Config {
    /// The mapping `policy` gives `processors` processors (at least one).
    pub fn new(policy: Policy, processors: usize) -> Config {
        let p = processors.max(1);
        let all: Vec<usize> = (0..p).collect();
        let (queues, snoop, spawn_to): (usize, Vec<Vec<usize>>, Vec<Vec<usize>>) = match policy {
            Policy::Single => (
                1,
                (0..p).map(|_| alloc::vec![0]).collect(),
                (0..p).map(|_| alloc::vec![0]).collect(),
            ),
            Policy::Local => (
                p,
                (0..p).map(|i| alloc::vec![i]).collect(),
                (0..p).map(|i| alloc::vec![i]).collect(),
            ),
            Policy::Sharing => {
                (p, (0..p).map(|i| alloc::vec![i]).collect(), (0..p).map(|_| all.clone()).collect())
            }
            Policy::Stealing => (
                p,
                // Own queue first, then the others from the next one round.
                (0..p).map(|i| (0..p).map(|k| (i + k) % p).collect()).collect(),
                (0..p).map(|i| alloc::vec![i]).collect(),
            ),
            Policy::Neighbour => (
                p,
                (0..p)
                    .map(|i| {
                        let mut v = alloc::vec![i];
                        for n in [(i + 1) % p, (i + p - 1) % p] {
                            if !v.contains(&n) {
                                v.push(n);
                            }
                        }
                        v
                    })
                    .collect(),
                (0..p).map(|i| alloc::vec![i]).collect(),
            ),
        };
        Config {
            processors: p,
            queues,
            snoop,
            spawn_to,
            lock: QueueLock::Tts,
            policy: Some(policy),
            fpu: FpuControl::Auto,
        }
    }

    /// Scheduling domains (§2.2): domain k is `sizes[k]` consecutive processors sharing one
    /// queue (queue k) that only they snoop; their threads go to it. A thread moves to
    /// another domain with [`crate::switch_to_queue`].
    pub fn domains(sizes: &[usize]) -> Config {
        let mut snoop = Vec::new();
        for (k, &n) in sizes.iter().enumerate() {
            for _ in 0..n.max(1) {
                snoop.push(alloc::vec![k]);
            }
        }
        let spawn_to = snoop.clone();
        Config {
            processors: snoop.len().max(1),
            queues: sizes.len().max(1),
            snoop: if snoop.is_empty() { alloc::vec![alloc::vec![0]] } else { snoop },
            spawn_to: if spawn_to.is_empty() { alloc::vec![alloc::vec![0]] } else { spawn_to },
            lock: QueueLock::Tts,
            policy: None,
            fpu: FpuControl::Auto,
        }
    }

    /// The same mapping with queue locks taken as `lock`.
    pub fn with_lock(mut self, lock: QueueLock) -> Config {
        self.lock = lock;
        self
    }

    /// The same mapping with switches keeping the FPU control state as `fpu` says.
    pub fn with_fpu(mut self, fpu: FpuControl) -> Config {
        self.fpu = fpu;
        self
    }

    /// Parses words such as `stealing p=4 lock=ticket fpu=shared` (policy, then options;
    /// defaults: `stealing`, `default_processors`, `lock=tts`, `fpu=auto`).
    pub fn parse(text: &str, default_processors: usize) -> Result<Config, &'static str> {
        let mut policy = Policy::Stealing;
        let mut p = default_processors;
        let mut lock = QueueLock::Tts;
        let mut fpu = FpuControl::Auto;
        for word in text.split_whitespace() {
            if let Some(n) = word.strip_prefix("p=") {
                p = n.parse().map_err(|_| "p= wants a number")?;
                if p == 0 || p > 1024 {
                    return Err("p= wants 1..1024");
                }
            } else if let Some(l) = word.strip_prefix("lock=") {
                lock = match l {
                    "tts" => QueueLock::Tts,
                    "ticket" => QueueLock::Ticket,
                    _ => return Err("lock= wants tts or ticket"),
                };
            } else if let Some(f) = word.strip_prefix("fpu=") {
                fpu = match f {
                    "auto" => FpuControl::Auto,
                    "saved" => FpuControl::Saved,
                    "shared" => FpuControl::Shared,
                    _ => return Err("fpu= wants auto, saved or shared"),
                };
            } else {
                policy = Policy::parse(word)
                    .ok_or("unknown policy (single, local, sharing, stealing, neighbour)")?;
            }
        }
        Ok(Config::new(policy, p).with_lock(lock).with_fpu(fpu))
    }

    /// Checks the mapping: every queue index is below Q, every processor snoops at least
    /// one queue and spawns to at least one.
    pub fn check(&self) -> Result<(), &'static str> {
        let ok = |v: &Vec<usize>| !v.is_empty() && v.iter().all(|&q| q < self.queues);
        if self.processors == 0
            || self.snoop.len() != self.processors
            || self.spawn_to.len() != self.processors
        {
            return Err("one snoop list and one spawn list per processor");
        }
        if !self.snoop.iter().all(ok) || !self.spawn_to.iter().all(ok) {
            return Err("a processor names no queue, or a queue past Q");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_gives_a_valid_mapping() {
        for policy in Policy::ALL {
            for p in 1..9 {
                let c = Config::new(policy, p);
                assert_eq!(c.check(), Ok(()), "{policy:?} at {p}");
                assert_eq!(Policy::parse(policy.name()), Some(policy));
            }
        }
    }

    #[test]
    fn neighbour_stealing_snoops_only_adjacent_queues() {
        let c = Config::new(Policy::Neighbour, 5);
        assert_eq!(c.snoop[0], [0, 1, 4]);
        assert_eq!(c.snoop[2], [2, 3, 1]);
        assert_eq!(Config::new(Policy::Neighbour, 2).snoop[1], [1, 0]);
    }

    #[test]
    fn domains_share_one_queue_each() {
        let c = Config::domains(&[2, 1]);
        assert_eq!(c.processors, 3);
        assert_eq!(c.queues, 2);
        assert_eq!(c.snoop, [alloc::vec![0], alloc::vec![0], alloc::vec![1]]);
        assert_eq!(c.check(), Ok(()));
    }

    #[test]
    fn parse_reads_policy_processors_and_lock() {
        let c = Config::parse("sharing p=3 lock=ticket", 1).unwrap();
        assert_eq!((c.policy, c.processors, c.lock), (Some(Policy::Sharing), 3, QueueLock::Ticket));
        assert!(Config::parse("p=0", 1).is_err());
        assert!(Config::parse("bogus", 1).is_err());
        assert!(Config::parse("lock=mcs", 1).is_err());
        assert_eq!(Config::parse("local", 1).unwrap().fpu, FpuControl::Auto);
        assert_eq!(Config::parse("local fpu=saved", 1).unwrap().fpu, FpuControl::Saved);
        assert_eq!(Config::parse("local fpu=shared", 1).unwrap().fpu, FpuControl::Shared);
        assert!(Config::parse("fpu=none", 1).is_err());
    }
}
