//! Property test of `Objects` against a model reference-counted graph: random sequences of
//! the Figure 5 operations on two share sets (two pcores) plus kernel references. After
//! every step: each live object's count equals its number of holders in the model; the
//! objects freed are exactly those the model says lost their last holder, each once and
//! never again; the access check agrees with the model; ids are fresh and carry the core;
//! errors are the ones the documented checks predict.

use objects::{Freed, ObjError, ObjName, ObjRef, ObjectId, ObjectKind, Objects, ShareSet};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const CORE: u16 = 3;
const SETS: usize = 2;
const KINDS: [ObjectKind; 4] =
    [ObjectKind::Segment, ObjectKind::AddressRange, ObjectKind::Pcore, ObjectKind::Device];

/// Indices (`usize`) pick from the ids seen so far, modulo their count.
#[derive(Clone, Debug)]
enum Op {
    ShareAlloc { set: usize, parent: usize },
    Alloc { set: usize, parent: usize, kind: usize },
    AddObj { set: usize, share: usize, from: usize, obj: usize },
    DelObj { set: usize, share: usize, obj: usize },
    SelfDrop { set: usize, share: usize },
    SetAddShare { set: usize, share: usize, obj: usize },
    SetCopy { from: usize, share: usize },
    Halt { set: usize },
    KernelRef { obj: usize },
    KernelDrop { obj: usize },
    GetName { set: usize, share: usize, obj: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..SETS;
    let i = any::<usize>;
    prop_oneof![
        3 => (s.clone(), i()).prop_map(|(set, parent)| Op::ShareAlloc { set, parent }),
        3 => (s.clone(), i(), 0..KINDS.len())
            .prop_map(|(set, parent, kind)| Op::Alloc { set, parent, kind }),
        8 => (s.clone(), i(), i(), i())
            .prop_map(|(set, share, from, obj)| Op::AddObj { set, share, from, obj }),
        3 => (s.clone(), i(), i()).prop_map(|(set, share, obj)| Op::DelObj { set, share, obj }),
        1 => (s.clone(), i()).prop_map(|(set, share)| Op::SelfDrop { set, share }),
        4 => (s.clone(), i(), i())
            .prop_map(|(set, share, obj)| Op::SetAddShare { set, share, obj }),
        2 => (s.clone(), i()).prop_map(|(from, share)| Op::SetCopy { from, share }),
        1 => s.clone().prop_map(|set| Op::Halt { set }),
        2 => i().prop_map(|obj| Op::KernelRef { obj }),
        2 => i().prop_map(|obj| Op::KernelDrop { obj }),
        1 => (s, i(), i()).prop_map(|(set, share, obj)| Op::GetName { set, share, obj }),
    ]
}

/// The reference-counted graph: who holds what.
#[derive(Default)]
struct Model {
    kind: BTreeMap<ObjectId, ObjectKind>,
    contents: BTreeMap<ObjectId, BTreeSet<ObjectId>>,
    sets: [BTreeSet<ObjectId>; SETS],
    kernel: BTreeMap<ObjectId, u32>,
    /// Payload tag of each live non-share.
    tag: BTreeMap<ObjectId, u32>,
    freed: BTreeSet<ObjectId>,
}

impl Model {
    fn holders(&self, id: ObjectId) -> u32 {
        let shares = self.contents.values().filter(|c| c.contains(&id)).count();
        let sets = self.sets.iter().filter(|s| s.contains(&id)).count();
        (shares + sets) as u32 + self.kernel.get(&id).copied().unwrap_or(0)
    }

    /// Frees every object left with no holder, until none is; returns them.
    fn collect(&mut self) -> BTreeSet<ObjectId> {
        let mut gone = BTreeSet::new();
        loop {
            let dead: Vec<_> =
                self.kind.keys().copied().filter(|&id| self.holders(id) == 0).collect();
            if dead.is_empty() {
                return gone;
            }
            for id in dead {
                self.kind.remove(&id);
                self.contents.remove(&id);
                self.tag.remove(&id);
                gone.insert(id);
            }
        }
    }

    fn is_share(&self, id: ObjectId) -> bool {
        self.kind.get(&id) == Some(&ObjectKind::Share)
    }

    fn resolve(&self, set: usize, r: ObjRef) -> Result<ObjectId, ObjError> {
        if !self.sets[set].contains(&r.share) {
            Err(ObjError::NotInShareSet)
        } else if !self.contents[&r.share].contains(&r.object) {
            Err(ObjError::NotInShare)
        } else {
            Ok(r.object)
        }
    }

    fn held(&self, set: usize, share: ObjectId) -> Result<(), ObjError> {
        match self.sets[set].contains(&share) {
            true => Ok(()),
            false => Err(ObjError::NotInShareSet),
        }
    }

    fn reaches(&self, from: ObjectId, target: ObjectId) -> bool {
        let mut work = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(s) = work.pop() {
            if s == target {
                return true;
            }
            if seen.insert(s) {
                work.extend(self.contents[&s].iter().filter(|&&i| self.is_share(i)));
            }
        }
        false
    }
}

struct Run {
    o: Objects<u32>,
    sets: [ShareSet; SETS],
    m: Model,
    known: Vec<ObjectId>,
    tags: u32,
}

impl Run {
    fn new() -> Run {
        let mut run = Run {
            o: Objects::new(CORE),
            sets: Default::default(),
            m: Model::default(),
            // Never-valid and foreign ids are always among the candidates.
            known: vec![ObjectId(0), ObjectId((7 << 48) | 1)],
            tags: 0,
        };
        for set in 0..SETS {
            run.new_root(set);
        }
        run
    }

    fn pick(&self, i: usize) -> ObjectId {
        self.known[i % self.known.len()]
    }

    /// Mostly (7 in 8) a share of `set` (so operations get past the access check), else any id.
    fn share_of(&self, set: usize, i: usize) -> ObjectId {
        let members: Vec<_> = self.m.sets[set].iter().copied().collect();
        if i.is_multiple_of(8) || members.is_empty() {
            return self.pick(i / 8);
        }
        members[i / 8 % members.len()]
    }

    /// Mostly (7 in 8) an id in `share`, else any id.
    fn obj_in(&self, share: ObjectId, i: usize) -> ObjectId {
        let members: Vec<_> = self.m.contents.get(&share).into_iter().flatten().copied().collect();
        if i.is_multiple_of(8) || members.is_empty() {
            return self.pick(i / 8);
        }
        members[i / 8 % members.len()]
    }

    /// Checks a freshly issued id and records it.
    fn fresh(&mut self, id: ObjectId, kind: ObjectKind) {
        assert!(!self.known.contains(&id), "id {id:?} issued twice");
        assert_eq!(id.core(), CORE);
        assert!(id.is_valid());
        self.known.push(id);
        self.m.kind.insert(id, kind);
        if kind == ObjectKind::Share {
            self.m.contents.insert(id, BTreeSet::new());
        }
    }

    fn new_root(&mut self, set: usize) {
        let id = self.o.root_share(&mut self.sets[set], ObjName::default()).unwrap();
        self.fresh(id, ObjectKind::Share);
        self.m.sets[set].insert(id);
    }

    /// Checks what an operation freed against what the model frees now.
    fn freed(&mut self, got: Result<Vec<Freed<u32>>, ObjError>, want: Result<(), ObjError>) {
        let got = match (got, want) {
            (Ok(got), Ok(())) => got,
            (got, want) => return assert_eq!(got.map(|_| ()), want),
        };
        let tags = self.m.tag.clone();
        let want = self.m.collect();
        let ids: BTreeSet<_> = got.iter().map(|f| f.id).collect();
        assert_eq!(ids.len(), got.len(), "an object freed twice in one call");
        assert_eq!(ids, want);
        for f in &got {
            assert!(self.m.freed.insert(f.id), "{:?} freed again", f.id);
            assert_eq!(f.payload, tags.get(&f.id).copied());
        }
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::ShareAlloc { set, parent } => {
                let parent = self.share_of(set, parent);
                let got = self.o.share_alloc(&self.sets[set], parent, ObjName::default());
                match (got, self.m.held(set, parent)) {
                    (Ok(id), Ok(())) => {
                        self.fresh(id, ObjectKind::Share);
                        self.m.contents.get_mut(&parent).unwrap().insert(id);
                    }
                    (got, want) => assert_eq!(got.map(|_| ()), want),
                }
            }
            Op::Alloc { set, parent, kind } => {
                let (parent, kind) = (self.share_of(set, parent), KINDS[kind]);
                self.tags += 1;
                let got =
                    self.o.alloc(&self.sets[set], parent, kind, ObjName::default(), self.tags);
                match (got, self.m.held(set, parent)) {
                    (Ok(id), Ok(())) => {
                        self.fresh(id, kind);
                        self.m.tag.insert(id, self.tags);
                        self.m.contents.get_mut(&parent).unwrap().insert(id);
                    }
                    (Err((e, p)), Err(want)) => assert_eq!((e, p), (want, self.tags)),
                    (got, want) => panic!("alloc: got {got:?}, model says {want:?}"),
                }
            }
            Op::AddObj { set, share, from, obj } => {
                // Mostly between two different shares of the set.
                let from = self.share_of(set, from);
                let mut to = self.share_of(set, share);
                if to == from && !share.is_multiple_of(16) {
                    to = self.share_of(set, share.wrapping_add(8));
                }
                let share = to;
                let r = ObjRef { share: from, object: self.obj_in(from, obj) };
                let want = self.m.held(set, share).and_then(|()| {
                    let id = self.m.resolve(set, r)?;
                    if self.m.contents[&share].contains(&id) {
                        Err(ObjError::AlreadyPresent)
                    } else if self.m.is_share(id) && self.m.reaches(id, share) {
                        Err(ObjError::ShareCycle)
                    } else {
                        Ok(id)
                    }
                });
                assert_eq!(self.o.share_addobj(&self.sets[set], share, r), want.map(|_| ()));
                if let Ok(id) = want {
                    self.m.contents.get_mut(&share).unwrap().insert(id);
                }
            }
            Op::DelObj { set, share, obj } => {
                let share = self.share_of(set, share);
                let r = ObjRef { share, object: self.obj_in(share, obj) };
                let want = self.m.resolve(set, r);
                if want.is_ok() {
                    self.m.contents.get_mut(&r.share).unwrap().remove(&r.object);
                }
                let got = self.o.share_delobj(&self.sets[set], r);
                self.freed(got, want.map(|_| ()));
            }
            Op::SelfDrop { set, share } => {
                let share = self.share_of(set, share);
                let want = self.m.held(set, share);
                if want.is_ok() {
                    self.m.sets[set].remove(&share);
                }
                let got = self.o.self_drop(&mut self.sets[set], share);
                self.freed(got, want);
                if self.sets[set].is_empty() {
                    self.new_root(set); // a new pcore in place of the one that can name nothing
                }
            }
            Op::SetAddShare { set, share, obj } => {
                let share = self.share_of(set, share);
                let r = ObjRef { share, object: self.obj_in(share, obj) };
                let want = self.m.resolve(set, r).and_then(|id| {
                    if !self.m.is_share(id) {
                        Err(ObjError::WrongKind)
                    } else if self.m.sets[set].contains(&id) {
                        Err(ObjError::AlreadyPresent)
                    } else {
                        Ok(id)
                    }
                });
                assert_eq!(self.o.set_add_share(&mut self.sets[set], r), want);
                if let Ok(id) = want {
                    self.m.sets[set].insert(id);
                }
            }
            Op::SetCopy { from, share } => {
                let (to, share) = ((from + 1) % SETS, self.share_of(from, share));
                let want = self.m.held(from, share).and_then(|()| {
                    match self.m.sets[to].contains(&share) {
                        true => Err(ObjError::AlreadyPresent),
                        false => Ok(()),
                    }
                });
                let [a, b] = &mut self.sets;
                let (src, dst) = if from == 0 { (&*a, b) } else { (&*b, a) };
                assert_eq!(self.o.set_copy_share(src, share, dst), want);
                if want.is_ok() {
                    self.m.sets[to].insert(share);
                }
            }
            Op::Halt { set } => {
                self.m.sets[set].clear();
                let got = self.o.release_set(std::mem::take(&mut self.sets[set]));
                self.freed(Ok(got), Ok(()));
                self.new_root(set);
            }
            Op::KernelRef { obj } => {
                let id = self.pick(obj);
                let live = self.m.kind.contains_key(&id);
                let want = if live { Ok(()) } else { Err(ObjError::NoSuchObject) };
                assert_eq!(self.o.add_ref(id), want);
                if live {
                    *self.m.kernel.entry(id).or_default() += 1;
                }
            }
            Op::KernelDrop { obj } => {
                // The kernel gives back only references it took.
                let held: Vec<_> = self.m.kernel.keys().copied().collect();
                if held.is_empty() {
                    return;
                }
                let id = held[obj % held.len()];
                let n = self.m.kernel.get_mut(&id).unwrap();
                *n -= 1;
                if *n == 0 {
                    self.m.kernel.remove(&id);
                }
                let got = self.o.drop_ref(id);
                self.freed(got, Ok(()));
            }
            Op::GetName { set, share, obj } => {
                let share = self.share_of(set, share);
                let r = ObjRef { share, object: self.obj_in(share, obj) };
                let got = self.o.obj_get_name(&self.sets[set], r);
                let want = self.m.resolve(set, r);
                assert_eq!(
                    got.map(|i| (i.id, i.kind, i.refcount)),
                    want.map(|id| (id, self.m.kind[&id], self.m.holders(id)))
                );
            }
        }
    }

    /// The whole state against the model.
    fn check(&self) {
        assert_eq!(self.o.len(), self.m.kind.len());
        for (&id, &kind) in &self.m.kind {
            assert_eq!(self.o.kind(id), Some(kind));
            assert_eq!(self.o.refcount(id), Some(self.m.holders(id)), "count of {id:?}");
            if let Some(c) = self.m.contents.get(&id) {
                assert!(self.o.share(id).unwrap().iter().eq(c.iter().copied()));
            } else {
                assert_eq!(self.o.payload(id), self.m.tag.get(&id));
            }
        }
        for id in &self.m.freed {
            assert_eq!(self.o.kind(*id), None);
        }
        for set in 0..SETS {
            assert!(self.sets[set].iter().eq(self.m.sets[set].iter().copied()));
            // Every share in the set, and a few that are not, against every id seen.
            let others = [self.known[0], self.known[1], self.known[self.known.len() - 1]];
            for share in self.m.sets[set].iter().chain(&others).copied() {
                for &object in &self.known {
                    let r = ObjRef { share, object };
                    assert_eq!(self.o.resolve(&self.sets[set], r), self.m.resolve(set, r));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn objects_match_the_refcount_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut run = Run::new();
        run.check();
        for op in ops {
            run.step(op);
            run.check();
        }
        // Everything goes when every holder does.
        let mut freed = Vec::new();
        for (id, n) in std::mem::take(&mut run.m.kernel) {
            for _ in 0..n {
                freed.extend(run.o.drop_ref(id).unwrap());
            }
        }
        for set in 0..SETS {
            freed.extend(run.o.release_set(std::mem::take(&mut run.sets[set])));
        }
        prop_assert!(run.o.is_empty());
        let ids: BTreeSet<_> = freed.iter().map(|f| f.id).collect();
        prop_assert_eq!(ids.len(), freed.len());
        prop_assert!(ids.is_disjoint(&run.m.freed));
    }
}
