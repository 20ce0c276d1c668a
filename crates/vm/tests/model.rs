//! Property test of the `vm` crate on the simulated machine (`sim`) against a simple
//! model: segments are vectors of values, a range is a map from page to (segment, page,
//! rights) plus, for a root, the slots spliced into it. Random sequences of system calls
//! (segment alloc, `ar_set_seg`, `ar_set_ar` of a slot into roots, plain and
//! copy-on-write copies, resizes, dropped handles, contexts started and ended) and of
//! stores and loads through the contexts' TLBs and page tables, some with other work
//! injected in the middle of their page fault (as another core would do it). After every
//! step:
//! - every load sees the model's value, and an access is refused exactly when the model
//!   has no mapping allowing it;
//! - every segment holds the model's values, so a copy never changes after it is made,
//!   whoever writes the original (Corey §4.3);
//! - every translation a context can use without a fault (its TLB, or its tables) shows
//!   the model's value and lets a store through only where the model allows one;
//! - no frame was freed while an entry mapped it, and no translation reached a freed one;
//!
//! and when every handle and context is gone, every frame and object is freed.

mod sim;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use addrrange::{ArError, Perms};
use proptest::prelude::*;
use sim::{Ptr, Refused, Sim, GRAN, P, ROOT_SLOTS};

/// Pages in a slot, and in a root.
const SLOT_PAGES: u64 = GRAN / P;
const ROOT_PAGES: u64 = ROOT_SLOTS * SLOT_PAGES;

/// One step. Objects and contexts are picked by index among those of the right kind
/// (modulo their number; the step does nothing if there is none).
#[derive(Clone, Debug)]
enum Op {
    Segment {
        pages: u64,
    },
    Root,
    Slot,
    SetSeg {
        ar: usize,
        seg: usize,
        page: u64,
        first: u64,
        pages: u64,
        write: bool,
    },
    SetAr {
        root: usize,
        slot_no: u64,
        slot: usize,
        write: bool,
    },
    Copy {
        seg: usize,
        cow: bool,
    },
    Resize {
        seg: usize,
        pages: u64,
    },
    Drop {
        handle: usize,
    },
    Run {
        root: usize,
    },
    End {
        context: usize,
    },
    /// A store (or a load) at `page` (with `anywhere`), else at the `page`-th page the
    /// context's root maps, with `work` injected before the n-th lock its fault takes,
    /// if it faults (an edit `near` it edits the range and page the access goes to).
    Access {
        context: usize,
        page: u64,
        anywhere: bool,
        store: bool,
        work: Option<Work>,
    },
}

/// Work injected in an access's fault: before the n-th lock, `op`, aimed at the access's
/// page if `near`.
#[derive(Clone, Debug)]
struct Work {
    after: u32,
    op: Box<Op>,
    near: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Segment,
    Root,
    Slot,
}

/// A range in the model.
#[derive(Default)]
struct Range {
    /// Page → (segment id, page in it, rights).
    pages: BTreeMap<u64, (u64, u64, Perms)>,
    /// Slot number → (slot range id, rights of the splice); roots only.
    splices: BTreeMap<u64, (u64, Perms)>,
}

/// The test's side: the program's handles (its share), its contexts, and the model.
#[derive(Default)]
struct World {
    handles: Vec<(Kind, Ptr)>,
    /// Running contexts: (sim index, root id).
    contexts: Vec<(usize, u64)>,
    segs: BTreeMap<u64, Vec<u64>>,
    ranges: BTreeMap<u64, Range>,
    next_value: u64,
    failures: Vec<String>,
}

impl World {
    fn pick(&self, kind: Kind, i: usize) -> Option<Ptr> {
        let of_kind: Vec<&Ptr> =
            self.handles.iter().filter(|(k, _)| *k == kind).map(|(_, p)| p).collect();
        (!of_kind.is_empty()).then(|| of_kind[i % of_kind.len()].clone())
    }

    /// `op` aimed at `page` of the root `root`: an `ar_set_seg` there (in the slot, if the
    /// root splices one there), or an `ar_set_ar` of its slot.
    fn near(&self, op: &Op, root: u64, page: u64) -> Op {
        let index = |kind, id| {
            let mut of_kind = self.handles.iter().filter(|(k, _)| *k == kind);
            of_kind.position(|(_, p)| p.id == id)
        };
        let slot_no = page / SLOT_PAGES;
        let splice = self.ranges[&root].splices.get(&slot_no).map(|&(id, _)| id);
        match (op.clone(), splice.and_then(|id| index(Kind::Slot, id)), index(Kind::Root, root)) {
            (Op::SetSeg { seg, first, pages, write, .. }, Some(slot), _) => {
                Op::SetSeg { ar: 2 * slot + 1, seg, page: page % SLOT_PAGES, first, pages, write }
            }
            (Op::SetSeg { seg, first, pages, write, .. }, None, Some(root)) => {
                Op::SetSeg { ar: 2 * root, seg, page, first, pages, write }
            }
            (Op::SetAr { slot, write, .. }, _, Some(root)) => {
                Op::SetAr { root, slot_no, slot, write }
            }
            (op, _, _) => op,
        }
    }

    fn add(&mut self, kind: Kind, ptr: Ptr) {
        if kind != Kind::Segment {
            self.ranges.insert(ptr.id, Range::default());
        }
        self.handles.push((kind, ptr));
    }

    /// What `page` of the root `root` maps to: (segment, page in it, rights).
    fn resolve(&self, root: u64, page: u64) -> Option<(u64, u64, Perms)> {
        let r = &self.ranges[&root];
        let slot_no = page / SLOT_PAGES;
        match r.splices.get(&slot_no) {
            Some(&(slot, splice)) => {
                let (seg, index, perms) = *self.ranges[&slot].pages.get(&(page % SLOT_PAGES))?;
                Some((seg, index, perms.intersect(splice)))
            }
            None => r.pages.get(&page).copied(),
        }
    }

    /// The segment page an access at `page` of `root` reaches, if the mappings allow it.
    fn target(&self, root: u64, page: u64, store: bool) -> Option<(u64, u64)> {
        let (seg, index, perms) = self.resolve(root, page)?;
        ((!store || perms.write) && (index as usize) < self.segs[&seg].len())
            .then_some((seg, index))
    }

    /// `ar_set_seg` in the model: the result `AddressRange` gives, and its effect.
    fn set_seg(&mut self, ar: u64, (seg, first): (u64, u64), page: u64, pages: u64, perms: Perms) {
        let r = self.ranges.get_mut(&ar).unwrap();
        for p in page..page + pages {
            r.pages.insert(p, (seg, first + p - page, perms));
        }
        r.splices
            .retain(|&n, _| n * SLOT_PAGES + SLOT_PAGES <= page || n * SLOT_PAGES >= page + pages);
    }

    fn set_seg_result(&self, ar: u64, page: u64, pages: u64, span: u64) -> Result<(), ArError> {
        if page + pages > span {
            return Err(ArError::OutOfSpan);
        }
        let cut = |&n: &u64| {
            let (start, end) = (n * SLOT_PAGES, n * SLOT_PAGES + SLOT_PAGES);
            start < page + pages && page < end && !(page <= start && end <= page + pages)
        };
        match self.ranges[&ar].splices.keys().any(cut) {
            true => Err(ArError::SplitsRange),
            false => Ok(()),
        }
    }
}

fn perms(write: bool) -> Perms {
    if write {
        Perms::RW
    } else {
        Perms::R
    }
}

/// Applies `op` to the machine and the model; a mismatch is recorded in the world.
fn apply(sim: &Sim, world: &Arc<Mutex<World>>, op: &Op) {
    let mut w = world.lock().unwrap();
    match *op {
        Op::Segment { pages } => {
            let seg = sim.segment(pages);
            w.segs.insert(seg.id, vec![0; pages as usize]);
            w.add(Kind::Segment, seg);
        }
        Op::Root => w.add(Kind::Root, sim.root()),
        Op::Slot => w.add(Kind::Slot, sim.slot()),
        Op::SetSeg { .. } => set_seg(sim, world, w, op),
        Op::SetAr { root, slot_no, slot, write } => {
            let (Some(root), Some(slot)) = (w.pick(Kind::Root, root), w.pick(Kind::Slot, slot))
            else {
                return;
            };
            drop(w);
            let got = sim.set_ar(&root, slot_no * GRAN, &slot, perms(write));
            let mut w = world.lock().unwrap();
            match got {
                Ok(()) => {
                    let r = w.ranges.get_mut(&root.id).unwrap();
                    r.pages.retain(|p, _| p / SLOT_PAGES != slot_no);
                    r.splices.insert(slot_no, (slot.id, perms(write)));
                }
                Err(e) => w.failures.push(format!("{op:?}: {e:?}")),
            }
        }
        Op::Copy { seg, cow } => {
            let Some(seg) = w.pick(Kind::Segment, seg) else { return };
            drop(w);
            let copy = if cow { sim.copy_cow(&seg) } else { sim.copy_plain(&seg) };
            let mut w = world.lock().unwrap();
            let values = w.segs[&seg.id].clone();
            w.segs.insert(copy.id, values);
            w.add(Kind::Segment, copy);
        }
        Op::Resize { seg, pages } => {
            let Some(seg) = w.pick(Kind::Segment, seg) else { return };
            w.segs.get_mut(&seg.id).unwrap().resize(pages as usize, 0);
            drop(w);
            sim.resize(&seg, pages);
        }
        Op::Drop { handle } => {
            if !w.handles.is_empty() {
                let i = handle % w.handles.len();
                let gone = w.handles.remove(i);
                drop(w);
                drop(gone);
            }
        }
        Op::Run { root } => {
            if let Some(root) = w.pick(Kind::Root, root) {
                let context = sim.run(&root);
                w.contexts.push((context, root.id));
            }
        }
        Op::End { context } => {
            if !w.contexts.is_empty() {
                let i = context % w.contexts.len();
                let (context, _) = w.contexts.remove(i);
                sim.end(context);
            }
        }
        Op::Access { .. } => access(sim, world, w, op),
    }
}

/// [`Op::SetSeg`]: maps pages of a segment into a root or slot range, on both.
fn set_seg(sim: &Sim, world: &Arc<Mutex<World>>, w: MutexGuard<'_, World>, op: &Op) {
    let Op::SetSeg { ar, seg, page, first, pages, write } = *op else { return };
    let kind = if ar % 2 == 0 { Kind::Root } else { Kind::Slot };
    let (Some(range), Some(seg)) = (w.pick(kind, ar / 2), w.pick(Kind::Segment, seg)) else {
        return;
    };
    let span = if kind == Kind::Root { ROOT_PAGES } else { SLOT_PAGES };
    let page = page % span;
    let want = w.set_seg_result(range.id, page, pages, span);
    drop(w); // the edit may free objects: no world lock held meanwhile
    let got = sim.set_seg(&range, page * P, &seg, first, pages, perms(write));
    let mut w = world.lock().unwrap();
    if got != want {
        w.failures.push(format!("{op:?}: got {got:?}, the model says {want:?}"));
    } else if got.is_ok() {
        w.set_seg(range.id, (seg.id, first), page, pages, perms(write));
    }
}

/// [`Op::Access`]: a read or store by a context, with work injected while it faults; the
/// outcome must agree with the model.
fn access(sim: &Sim, world: &Arc<Mutex<World>>, mut w: MutexGuard<'_, World>, op: &Op) {
    let Op::Access { context, page, anywhere, store, ref work } = *op else { return };
    if w.contexts.is_empty() {
        return;
    }
    let (context, root) = w.contexts[context % w.contexts.len()];
    let mapped: Vec<u64> = (0..ROOT_PAGES).filter(|&p| w.resolve(root, p).is_some()).collect();
    let page = match anywhere || mapped.is_empty() {
        true => page % ROOT_PAGES,
        false => mapped[page as usize % mapped.len()],
    };
    w.next_value += 1;
    let value = w.next_value;
    let refused_before = w.target(root, page, store).is_none();
    let work = work.as_ref().map(|Work { after, op, near }| {
        (*after, if *near { w.near(op, root, page) } else { (**op).clone() })
    });
    drop(w);
    if let Some((after, work)) = work {
        let world = world.clone();
        sim.interfere(after, move |sim| apply(sim, &world, &work));
    }
    let got = match store {
        true => sim.write(context, page * P, value).map(|()| value),
        false => sim.read(context, page * P),
    };
    let mut w = world.lock().unwrap();
    // A refusal is decided when the fault looks the mapping up, which may be before
    // the injected work; an access that succeeds does so after it.
    if got != Err(Refused) || !refused_before {
        access_agrees(&mut w, op, root, page, store.then_some(value), got);
    }
    drop(w);
    sim.flush_pending(); // work the access never got to runs after it
}

/// Checks an access's outcome against the model, and applies a store to it.
fn access_agrees(
    w: &mut World,
    op: &Op,
    root: u64,
    page: u64,
    store: Option<u64>,
    got: Result<u64, Refused>,
) {
    let target = w.target(root, page, store.is_some());
    let want = match (target, store) {
        (None, _) => Err(Refused),
        (Some((seg, index)), Some(value)) => {
            w.segs.get_mut(&seg).unwrap()[index as usize] = value;
            Ok(value)
        }
        (Some((seg, index)), None) => Ok(w.segs[&seg][index as usize]),
    };
    if got != want {
        w.failures.push(format!("{op:?}: got {got:?}, the model says {want:?}"));
    }
}

/// Every translation a context can use without a fault (its TLB, or its tables) shows the
/// model's value, and lets a store through only where the model allows one.
fn translations_agree(sim: &Sim, w: &World) -> Result<(), String> {
    for &(context, root) in &w.contexts {
        for page in 0..ROOT_PAGES {
            let Some((value, write)) = sim.peek(context, page * P) else { continue };
            let want = w.target(root, page, write).map(|(seg, index)| w.segs[&seg][index as usize]);
            if want != Some(value) {
                let how = if write { "writable" } else { "readable" };
                return Err(format!(
                    "context {context} page {page}: {how} with {value}, the model says {want:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Every segment the machine still has holds the model's values.
fn segments_agree(sim: &Sim, w: &World) -> Result<(), String> {
    for seg in sim.segments() {
        let got = sim.contents(&seg);
        if got != w.segs[&seg.id] {
            return Err(format!(
                "segment {} holds {got:?}, the model {:?}",
                seg.id, w.segs[&seg.id]
            ));
        }
    }
    Ok(())
}

/// Mostly at a mapped page: an access elsewhere is refused without much to see.
fn anywhere() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.2)
}

/// Steps other work can do in the middle of a fault (not starting or ending contexts).
fn work() -> impl Strategy<Value = Op> {
    let i = || 0..8usize;
    prop_oneof![
        1 => (1..=6u64).prop_map(|pages| Op::Segment { pages }),
        3 => (i(), i(), 0..ROOT_PAGES, 0..6u64, 1..=5u64, any::<bool>()).prop_map(
            |(ar, seg, page, first, pages, write)| Op::SetSeg { ar, seg, page, first, pages, write }
        ),
        2 => (i(), 0..ROOT_SLOTS, i(), any::<bool>())
            .prop_map(|(root, slot_no, slot, write)| Op::SetAr { root, slot_no, slot, write }),
        2 => (i(), any::<bool>()).prop_map(|(seg, cow)| Op::Copy { seg, cow }),
        1 => (i(), 0..=6u64).prop_map(|(seg, pages)| Op::Resize { seg, pages }),
        1 => i().prop_map(|handle| Op::Drop { handle }),
        4 => (i(), 0..ROOT_PAGES, anywhere(), any::<bool>()).prop_map(
            |(context, page, anywhere, store)| Op::Access {
                context,
                page,
                anywhere,
                store,
                work: None
            }
        ),
    ]
}

/// Any step: the above, contexts coming and going, and accesses with injected work.
fn op() -> impl Strategy<Value = Op> {
    let i = || 0..8usize;
    prop_oneof![
        6 => work(),
        1 => Just(Op::Root),
        1 => Just(Op::Slot),
        1 => i().prop_map(|root| Op::Run { root }),
        1 => i().prop_map(|context| Op::End { context }),
        4 => (i(), 0..ROOT_PAGES, anywhere(), any::<bool>(), 1..7u32, work(), any::<bool>())
            .prop_map(|(context, page, anywhere, store, after, op, near)| Op::Access {
                context,
                page,
                anywhere,
                store,
                work: Some(Work { after, op: Box::new(op), near }),
            }),
    ]
}

/// Runs `ops` after a start of two roots and a slot, two segments mapped (one in both
/// roots, read-write and read-only, one in the slot, which both roots splice, read-write
/// and read-only), and a context on each root; checks after every step and at the end.
fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let sim = Sim::new();
    let world = Arc::new(Mutex::new(World::default()));
    let seg = |ar, seg, pages| Op::SetSeg { ar, seg, page: 0, first: 0, pages, write: true };
    let splice = |root, write| Op::SetAr { root, slot_no: 1, slot: 0, write };
    let start = [Op::Root, Op::Root, Op::Slot, Op::Segment { pages: 4 }, Op::Segment { pages: 2 }];
    let shared = Op::SetSeg { ar: 2, seg: 0, page: 8, first: 0, pages: 4, write: false };
    let start = start.into_iter().chain([seg(0, 0, 4), shared, seg(1, 1, 2), splice(0, true)]);
    let start = start.chain([splice(1, false), Op::Run { root: 0 }, Op::Run { root: 1 }]);
    for (step, op) in start.collect::<Vec<_>>().iter().chain(ops).enumerate() {
        apply(&sim, &world, op);
        let w = world.lock().unwrap();
        prop_assert!(w.failures.is_empty(), "step {}: {:?}", step, w.failures);
        prop_assert!(sim.violations().is_empty(), "step {}: {:?}", step, sim.violations());
        segments_agree(&sim, &w).map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
        translations_agree(&sim, &w)
            .map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
    }
    let (handles, contexts) = {
        let mut w = world.lock().unwrap();
        (std::mem::take(&mut w.handles), std::mem::take(&mut w.contexts))
    };
    drop(handles);
    for (context, _) in contexts {
        sim.end(context);
    }
    prop_assert!(sim.violations().is_empty(), "at the end: {:?}", sim.violations());
    prop_assert_eq!(sim.live_objects(), 0, "objects left at the end");
    prop_assert_eq!(sim.live_frames(), 0, "frames left at the end");
    Ok(())
}

/// Cases per run (about a second); `PROPTEST_CASES=n` asks for a longer search.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]
    #[test]
    fn memory_matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops)?;
    }
}
