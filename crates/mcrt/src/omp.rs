//! The OpenMP-like adaptor (McRT §2.5): parallel regions run by teams of McRT threads,
//! worksharing loops (static, dynamic, guided), reductions, `single`, `master`, barriers,
//! and true nested parallelism: a region inside a region makes a team of its own ("it
//! creates as many McRT threads as specified by any nested parallelism construct, which
//! then get scheduled on the logical processors").
//!
//! Read top to bottom:
//! 1. **Regions** ([`parallel`]): the encountering thread spawns `n - 1` helpers with a
//!    scoped spawn (closures may borrow its stack: it joins them before returning), opens
//!    the team's gate, runs as thread 0, and joins.
//! 2. **Worksharing** ([`Ctx`]): every thread counts the constructs it meets; construct
//!    `s` uses slot `s % SLOTS` of the team, which is recycled for `s + SLOTS` only once
//!    every thread has left `s` (so `nowait` constructs may overlap safely).
//! 3. **Schedules** ([`Schedule`]) and the one-call helpers ([`parallel_for`],
//!    [`parallel_for_reduce`]).

use crate::context;
use crate::predicate::Op;
use crate::sync::{self, MutexKind};
use crate::thread::{yield_until, JoinHandle};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::TypeId;
use core::cell::Cell;
use core::ops::Range;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Worksharing constructs a team may have in flight at once (threads may run ahead of
/// each other by `nowait` constructs); a thread further ahead waits for the slot.
const SLOTS: usize = 8;

/// How a worksharing loop's iterations are dealt to the team (OpenMP's `schedule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// `schedule(static)`: one contiguous block per thread, sizes differing by one at most.
    Static,
    /// `schedule(static, c)`: chunks of `c` dealt round robin by thread number.
    StaticChunk(usize),
    /// `schedule(dynamic, c)`: each thread takes the next chunk of `c` when it is free.
    Dynamic(usize),
    /// `schedule(guided, c)`: as dynamic, with chunks of the remaining iterations over
    /// the team size, never below `c`.
    Guided(usize),
}

/// `Slot::kind`: which construct the team's threads met (0: none yet).
const KIND_STATIC: u32 = 1;
const KIND_DYNAMIC: u32 = 2;
const KIND_GUIDED: u32 = 3;
const KIND_SINGLE: u32 = 4;
const KIND_REDUCE: u32 = 5;

/// The shared state of one worksharing construct.
struct Slot {
    /// The construct number this slot serves now.
    tag: AtomicU32,
    /// The construct's kind, set by the first thread in (a mismatch is a program error).
    kind: AtomicU32,
    /// Threads that have not left the construct yet.
    left: AtomicU32,
    /// Dynamic and guided: the next iteration not handed out (from the range's start).
    next: AtomicUsize,
    /// Single: 1 once a thread has taken it.
    claimed: AtomicU32,
    /// Reduce: threads that have published their value.
    arrived: AtomicU32,
    /// Reduce: each thread's `Contribution`, by thread number.
    values: Vec<AtomicUsize>,
}

/// A thread's value in a reduction, on its own stack until everyone has read it.
struct Contribution {
    ty: TypeId,
    value: *const (),
}

/// A team: its size, its gate, its barrier and its worksharing slots.
struct Team {
    /// The team's size (set before the gate opens).
    n: AtomicUsize,
    /// 1 once the team is complete and its members may start.
    gate: AtomicU32,
    /// The paper's barrier (§2.2), for the team's size: reset only before the gate opens.
    barrier: sync::Barrier,
    slots: Vec<Slot>,
}

impl Team {
    fn new(capacity: usize) -> Team {
        let slots = (0..SLOTS)
            .map(|i| Slot {
                tag: AtomicU32::new(i as u32),
                kind: AtomicU32::new(0),
                left: AtomicU32::new(0),
                next: AtomicUsize::new(0),
                claimed: AtomicU32::new(0),
                arrived: AtomicU32::new(0),
                values: (0..capacity).map(|_| AtomicUsize::new(0)).collect(),
            })
            .collect();
        Team {
            n: AtomicUsize::new(0),
            gate: AtomicU32::new(0),
            barrier: sync::Barrier::new(1),
            slots,
        }
    }

    /// Sizes the team at `n` members and lets them start.
    fn open(&self, n: usize) {
        self.n.store(n, Ordering::Relaxed);
        for s in &self.slots {
            s.left.store(n as u32, Ordering::Relaxed);
        }
        // The gate is still shut, so no member reaches the barrier yet; the gate's Release
        // store publishes the reset.
        self.barrier.reset(n as u32);
        self.gate.store(1, Ordering::Release);
        crate::notify_all();
    }

    fn barrier(&self) -> &sync::Barrier {
        &self.barrier
    }
}

/// A thread's view of its team inside a region (`omp_get_thread_num` and friends, and
/// the constructs). Each member has its own; it cannot leave its thread.
pub struct Ctx<'t> {
    team: &'t Team,
    num: usize,
    n: usize,
    level: usize,
    /// Worksharing constructs this thread has met.
    seq: Cell<u32>,
}

/// Aborts the process if a panic unwinds out of a region while its helpers may still run
/// on the encountering thread's stack (a panic in a destructor during unwinding aborts).
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        panic!("mcrt::omp: a panic left a parallel region while its team ran");
    }
}

/// Spawns a McRT thread running `f`, which may borrow data that lives for `'a` only. The
/// caller joins the returned handle before `'a` ends, on every path (including unwinding:
/// `region`'s guard aborts instead), as `context::scoped_body` asks.
fn spawn_scoped<'a>(f: impl FnOnce() + Send + 'a) -> Result<JoinHandle<()>, crate::Error> {
    crate::spawn(context::scoped_body(Box::new(f)))
}

/// `#pragma omp parallel num_threads(n)`: runs `f` on a team of `n` McRT threads (0: one
/// per logical processor); the caller is thread 0 and the others are new threads. Returns
/// when all have (the region's implied barrier). If McRT runs out of memory for threads
/// the team is smaller, as OpenMP allows. Call it inside a region for a nested team.
pub fn parallel<F: Fn(&Ctx<'_>) + Sync>(n: usize, f: F) {
    region(1, n, &f)
}

fn region<F: Fn(&Ctx<'_>) + Sync>(level: usize, n: usize, f: &F) {
    let want = if n == 0 { crate::processors() } else { n };
    let team = Team::new(want);
    let guard = AbortOnUnwind;
    let mut helpers = Vec::with_capacity(want - 1);
    for num in 1..want {
        let team = &team;
        // Every helper is joined below, before `team` and `f` go; a panic here cannot
        // unwind past that point (`guard` aborts instead).
        match spawn_scoped(move || member(team, f, num, level)) {
            Ok(h) => helpers.push(h),
            Err(_) => break,
        }
    }
    team.open(helpers.len() + 1);
    member(&team, f, 0, level);
    for h in helpers {
        h.join();
    }
    core::mem::forget(guard);
}

/// A member's body: waits for the team to be complete, then runs `f` as thread `num`.
fn member<F: Fn(&Ctx<'_>) + Sync>(team: &Team, f: &F, num: usize, level: usize) {
    yield_until(&team.gate, Op::Eq, 1);
    let n = team.n.load(Ordering::Relaxed);
    f(&Ctx { team, num, n, level, seq: Cell::new(0) });
}

impl Ctx<'_> {
    /// `omp_get_thread_num`: this thread's number in its team (the encountering one is 0).
    pub fn thread_num(&self) -> usize {
        self.num
    }

    /// `omp_get_num_threads`: the team's size.
    pub fn num_threads(&self) -> usize {
        self.n
    }

    /// `omp_get_level`: how many regions enclose this point (1 in an outermost region;
    /// nested regions made with [`Ctx::parallel`] count).
    pub fn level(&self) -> usize {
        self.level
    }

    /// A nested region: a new team of `n` McRT threads, this thread its thread 0.
    pub fn parallel<F: Fn(&Ctx<'_>) + Sync>(&self, n: usize, f: F) {
        region(self.level + 1, n, &f)
    }

    /// `#pragma omp barrier`: waits until every thread of the team has come.
    pub fn barrier(&self) {
        self.team.barrier().wait();
    }

    /// `#pragma omp master`: runs `f` on thread 0 only (no barrier).
    pub fn master<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        (self.num == 0).then(f)
    }

    /// `#pragma omp single`: the first thread to come runs `f` (and gets `Some`); all
    /// wait at the implied barrier after it.
    pub fn single<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let r = self.single_nowait(f);
        self.barrier();
        r
    }

    /// `#pragma omp single nowait`: as [`Ctx::single`] without the barrier.
    pub fn single_nowait<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let (slot, s) = self.enter(KIND_SINGLE);
        let mine = slot.claimed.swap(1, Ordering::AcqRel) == 0;
        let r = mine.then(f);
        self.leave(slot, s);
        r
    }

    /// `#pragma omp for schedule(...)`: runs `body` for this thread's share of `range`;
    /// the team's shares cover each iteration exactly once. Ends at a barrier.
    pub fn for_each(&self, range: Range<usize>, schedule: Schedule, body: impl FnMut(usize)) {
        self.for_each_nowait(range, schedule, body);
        self.barrier();
    }

    /// `#pragma omp for nowait`: as [`Ctx::for_each`] without the barrier.
    pub fn for_each_nowait(
        &self,
        range: Range<usize>,
        schedule: Schedule,
        mut body: impl FnMut(usize),
    ) {
        let kind = match schedule {
            Schedule::Static | Schedule::StaticChunk(_) => KIND_STATIC,
            Schedule::Dynamic(_) => KIND_DYNAMIC,
            Schedule::Guided(_) => KIND_GUIDED,
        };
        let (slot, s) = self.enter(kind);
        let (start, len, n, t) = (range.start, range.len(), self.n, self.num);
        match schedule {
            Schedule::Static => {
                let (base, extra) = (len / n, len % n);
                let lo = t * base + t.min(extra);
                let hi = lo + base + usize::from(t < extra);
                (lo..hi).for_each(|i| body(start + i));
            }
            Schedule::StaticChunk(c) => {
                let c = c.max(1);
                let mut lo = t.saturating_mul(c);
                while lo < len {
                    (lo..len.min(lo.saturating_add(c))).for_each(|i| body(start + i));
                    lo = lo.saturating_add(n.saturating_mul(c));
                }
            }
            Schedule::Dynamic(c) => {
                let c = c.max(1);
                loop {
                    let lo = slot.next.fetch_add(c, Ordering::Relaxed);
                    if lo >= len {
                        break;
                    }
                    (lo..len.min(lo.saturating_add(c))).for_each(|i| body(start + i));
                }
            }
            Schedule::Guided(c) => {
                let c = c.max(1);
                let mut lo = slot.next.load(Ordering::Relaxed);
                while lo < len {
                    let size = (len - lo).div_ceil(n).max(c).min(len - lo);
                    match slot.next.compare_exchange_weak(
                        lo,
                        lo + size,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            (lo..lo + size).for_each(|i| body(start + i));
                            lo = slot.next.load(Ordering::Relaxed);
                        }
                        Err(now) => lo = now,
                    }
                }
            }
        }
        self.leave(slot, s);
    }

    /// `reduction(op: x)` on a loop: folds this thread's share of `range` into its copy
    /// of `identity`, then combines the team's copies (see [`Ctx::reduce`]); every thread
    /// gets the result. `identity` must be neutral for `combine`.
    pub fn for_reduce<T: Clone + Sync + 'static>(
        &self,
        range: Range<usize>,
        schedule: Schedule,
        identity: T,
        mut fold: impl FnMut(T, usize) -> T,
        combine: impl Fn(T, T) -> T,
    ) -> T {
        let mut acc = Some(identity);
        self.for_each_nowait(range, schedule, |i| {
            if let Some(a) = acc.take() {
                acc = Some(fold(a, i));
            }
        });
        match acc {
            Some(a) => self.reduce(a, combine),
            None => unreachable!("mcrt::omp: the accumulator is put back after each fold"),
        }
    }

    /// A reduction across the team: every thread brings `value`, and every thread gets
    /// `op` folded over the values in thread-number order (the same result everywhere,
    /// even for floating point). Acts as a barrier.
    ///
    /// # Panics
    /// When the team's threads meet different constructs or value types here.
    pub fn reduce<T: Clone + Sync + 'static>(&self, value: T, op: impl Fn(T, T) -> T) -> T {
        let (slot, s) = self.enter(KIND_REDUCE);
        let mine = Contribution { ty: TypeId::of::<T>(), value: &value as *const T as *const () };
        slot.values[self.num].store(&mine as *const Contribution as usize, Ordering::Relaxed);
        let n = self.n as u32;
        if slot.arrived.fetch_add(1, Ordering::AcqRel) + 1 == n {
            crate::notify_all();
        }
        yield_until(&slot.arrived, Op::Eq, n);
        let mut acc: Option<T> = None;
        for v in &slot.values[..self.n] {
            // Every member stored its contribution before its `arrived` increment (a
            // release sequence we acquired), and keeps it alive until the slot is
            // recycled, which is after we `leave` below.
            let c: &Contribution = context::lent(v.load(Ordering::Relaxed) as *const _);
            assert!(c.ty == TypeId::of::<T>(), "mcrt::omp: a reduction met different types");
            // The type checked just above; shared reads only (`T: Sync`).
            let x = context::lent(c.value as *const T).clone();
            acc = Some(match acc {
                None => x,
                Some(a) => op(a, x),
            });
        }
        self.leave(slot, s);
        // Our `value` must outlive every member's reading of it.
        yield_until(&slot.tag, Op::Ne, s);
        drop(value);
        match acc {
            Some(a) => a,
            None => unreachable!("mcrt::omp: a team has at least one thread"),
        }
    }

    /// Enters this thread's next worksharing construct: waits for its slot to serve it.
    fn enter(&self, kind: u32) -> (&Slot, u32) {
        let s = self.seq.get();
        self.seq.set(s.wrapping_add(1));
        let slot = &self.team.slots[s as usize % SLOTS];
        yield_until(&slot.tag, Op::Eq, s);
        if let Err(other) = slot.kind.compare_exchange(0, kind, Ordering::AcqRel, Ordering::Acquire)
        {
            assert_eq!(other, kind, "mcrt::omp: a team's threads met different constructs");
        }
        (slot, s)
    }

    /// Leaves construct `s`: the last thread out resets the slot for construct `s + SLOTS`.
    fn leave(&self, slot: &Slot, s: u32) {
        if slot.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            slot.kind.store(0, Ordering::Relaxed);
            slot.next.store(0, Ordering::Relaxed);
            slot.claimed.store(0, Ordering::Relaxed);
            slot.arrived.store(0, Ordering::Relaxed);
            slot.left.store(self.n as u32, Ordering::Relaxed);
            slot.tag.store(s.wrapping_add(SLOTS as u32), Ordering::Release);
            crate::notify_all();
        }
    }
}

/// `#pragma omp parallel for num_threads(n) schedule(...)`: runs `body` once for each
/// iteration of `range` on a team of `n`.
pub fn parallel_for(
    n: usize,
    range: Range<usize>,
    schedule: Schedule,
    body: impl Fn(usize) + Sync,
) {
    parallel(n, |ctx| ctx.for_each_nowait(range.clone(), schedule, &body));
}

/// `#pragma omp parallel for reduction(...)`: folds every iteration of `range` on a team
/// of `n` (see [`Ctx::for_reduce`]) and returns the combined value.
pub fn parallel_for_reduce<T: Clone + Send + Sync + 'static>(
    n: usize,
    range: Range<usize>,
    schedule: Schedule,
    identity: T,
    fold: impl Fn(T, usize) -> T + Sync,
    combine: impl Fn(T, T) -> T + Sync,
) -> T {
    let out = sync::Mutex::new(MutexKind::Tts, None);
    parallel(n, |ctx| {
        let r = ctx.for_reduce(range.clone(), schedule, identity.clone(), &fold, &combine);
        ctx.master(|| *out.lock() = Some(r));
    });
    match out.into_inner() {
        Some(r) => r,
        None => unreachable!("mcrt::omp: thread 0 always runs"),
    }
}
