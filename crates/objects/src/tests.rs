//! Host tests of the object model: access control, reference counts (objects are freed
//! exactly when their last holder lets go: the census returns to zero), cycles, and two
//! threads using one shared share at once.

use super::*;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};
use proptest::prelude::*;

extern crate std;

/// A payload that counts its own drops and may hold other objects (like a range).
struct Probe {
    drops: &'static AtomicUsize,
    held: Vec<ObjPtr<Probe>>,
}

impl Payload for Probe {
    fn take_held(&mut self) -> Vec<ObjPtr<Probe>> {
        core::mem::take(&mut self.held)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

struct World {
    census: &'static Census,
    drops: &'static AtomicUsize,
    creator: Creator,
}

fn world(core: u16) -> World {
    let census = leak(Census::new());
    World { census, drops: leak(AtomicUsize::new(0)), creator: Creator::new(core, census) }
}

fn name() -> ObjName {
    ObjName::new(b"t").unwrap()
}

impl World {
    fn probe(&self) -> Probe {
        Probe { drops: self.drops, held: Vec::new() }
    }
    fn set(&mut self, core: usize) -> ShareSet<Probe> {
        ShareSet::new(core, &mut self.creator, Quota::new(u64::MAX, None)).unwrap()
    }
}

fn r(share: ObjectId, object: ObjectId) -> ObjRef {
    ObjRef { share, object }
}

#[test]
fn objects_are_named_only_through_the_set() {
    let mut w = world(1);
    let mut a = w.set(0);
    let root = a.root_id();
    let p = w.probe();
    let seg = a.alloc(&mut w.creator, root, ObjectKind::Segment, name(), p).unwrap();
    assert_eq!(seg.core(), 1);
    assert!(a.lookup(r(root, seg), ObjectKind::Segment).is_ok());
    assert_eq!(a.lookup(r(root, seg), ObjectKind::Pcore).err(), Some(ObjError::WrongKind));
    // Another pcore's set cannot name a's root share, nor guess its way in.
    let b = w.set(1);
    assert_eq!(b.resolve(r(root, seg)).err(), Some(ObjError::NotInShareSet));
    assert_eq!(b.resolve(r(b.root_id(), seg)).err(), Some(ObjError::NotInShare));
    // Through a shared share it can, once that share is in its set.
    let shared = a.share_alloc(&mut w.creator, root, name()).unwrap();
    assert_eq!(a.share_addobj(shared, r(root, seg)).err(), Some(ObjError::NotInShareSet));
    a.add_share(r(root, shared)).unwrap();
    a.share_addobj(shared, r(root, seg)).unwrap();
    let mut b = b;
    let ptr = a.resolve(r(root, shared)).unwrap();
    b.add_share_ptr(ptr).unwrap();
    assert!(b.lookup(r(shared, seg), ObjectKind::Segment).is_ok());
    assert_eq!(a.obj_get_name(r(root, seg)).unwrap().refcount, 2);
    drop(a);
    drop(b);
    assert_eq!(w.census.live(), 0);
    assert_eq!(w.drops.load(Ordering::Relaxed), 1);
}

#[test]
fn last_reference_frees_and_only_then() {
    let mut w = world(0);
    let mut a = w.set(0);
    let root = a.root_id();
    let p = w.probe();
    let seg = a.alloc(&mut w.creator, root, ObjectKind::Segment, name(), p).unwrap();
    let s1 = a.share_alloc(&mut w.creator, root, name()).unwrap();
    a.add_share(r(root, s1)).unwrap();
    a.share_addobj(s1, r(root, seg)).unwrap();
    a.share_delobj(r(root, seg)).unwrap();
    assert_eq!(w.drops.load(Ordering::Relaxed), 0, "s1 still holds it");
    assert_eq!(a.share_delobj(r(root, seg)).err(), Some(ObjError::NotInShare));
    a.share_delobj(r(root, s1)).unwrap();
    assert_eq!(w.drops.load(Ordering::Relaxed), 0, "the set still holds the share");
    a.self_drop(s1).unwrap();
    assert_eq!(w.drops.load(Ordering::Relaxed), 1, "the share went and took it along");
    assert_eq!(w.census.live(), 0);
}

#[test]
fn shares_cannot_form_cycles_and_root_is_private() {
    let mut w = world(0);
    let mut a = w.set(0);
    let root = a.root_id();
    let s1 = a.share_alloc(&mut w.creator, root, name()).unwrap();
    let s2 = a.share_alloc(&mut w.creator, root, name()).unwrap();
    let p1 = a.resolve(r(root, s1)).unwrap();
    a.add_share_ptr(p1).unwrap();
    a.share_addobj(s1, r(root, s2)).unwrap(); // s2 in s1
    let p2 = a.resolve(r(root, s2)).unwrap();
    a.add_share_ptr(p2).unwrap();
    assert_eq!(a.share_addobj(s2, r(root, s1)).err(), Some(ObjError::ShareCycle));
    assert_eq!(a.share_addobj(s1, r(root, s1)).err(), Some(ObjError::ShareCycle));
    assert_eq!(a.share_addobj(s1, r(root, s2)).err(), Some(ObjError::AlreadyPresent));
    assert_eq!(a.self_drop(root).err(), Some(ObjError::RootShare));
    assert_eq!(a.shared_share(root).err(), Some(ObjError::RootShare));
    a.self_drop(s1).unwrap();
    assert_eq!(a.self_drop(s1).err(), Some(ObjError::NotInShareSet));
    drop(a);
    assert_eq!(w.census.live(), 0);
}

#[test]
fn a_long_chain_is_freed_without_recursion() {
    let mut w = world(0);
    let mut a = w.set(0);
    let root = a.root_id();
    // 100,000 payloads each holding the next: recursion would overflow the test stack.
    let mut prev: Option<ObjPtr<Probe>> = None;
    for _ in 0..100_000 {
        let mut p = w.probe();
        p.held.extend(prev.take());
        let ptr = w.creator.make(ObjectKind::AddressRange, name(), Body::Kernel(p), None).unwrap();
        prev = Some(ptr);
    }
    let head = prev.unwrap();
    let id = head.id();
    release(alloc::vec![head]);
    assert_eq!(w.census.live(), 0);
    assert_eq!(w.drops.load(Ordering::Relaxed), 100_000);
    let _ = (id, &mut a, root);
}

#[test]
fn two_cores_add_and_remove_in_one_shared_share() {
    let mut w = world(0);
    let mut a = w.set(0);
    let root = a.root_id();
    let shared = a.share_alloc(&mut w.creator, root, name()).unwrap();
    let table_ptr = a.resolve(r(root, shared)).unwrap();
    let mut handles = Vec::new();
    for core in 0..2usize {
        let table_ptr = table_ptr.clone();
        let census = w.census;
        let drops = w.drops;
        handles.push(std::thread::spawn(move || {
            let mut creator = Creator::new(core as u16 + 1, census);
            let mut set: ShareSet<Probe> =
                ShareSet::new(core, &mut creator, Quota::new(u64::MAX, None)).unwrap();
            let root = set.root_id();
            set.add_share_ptr(table_ptr).unwrap();
            for _ in 0..2000 {
                let p = Probe { drops, held: Vec::new() };
                let seg = set.alloc(&mut creator, root, ObjectKind::Segment, name(), p).unwrap();
                set.share_addobj(shared, r(root, seg)).unwrap();
                set.share_delobj(r(root, seg)).unwrap();
                assert!(set.lookup(r(shared, seg), ObjectKind::Segment).is_ok());
                set.share_delobj(r(shared, seg)).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(table_ptr.share().unwrap().len(0), 0);
    drop(table_ptr);
    drop(a);
    assert_eq!(w.census.live(), 0);
    assert_eq!(w.drops.load(Ordering::Relaxed), 4000);
}

#[test]
fn a_descriptor_is_another_id_for_the_same_object() {
    let mut w = world(2);
    let mut a = w.set(0);
    let root = a.root_id();
    let p = w.probe();
    let seg = a.alloc(&mut w.creator, root, ObjectKind::Segment, name(), p).unwrap();
    let fd = a.share_dupobj(&mut w.creator, root, r(root, seg)).unwrap();
    assert_ne!(fd, seg);
    assert_eq!(fd.core(), 2);
    // One object, two entries: two references, and the descriptor counts in the census.
    assert!(Arc::ptr_eq(&a.resolve(r(root, fd)).unwrap(), &a.resolve(r(root, seg)).unwrap()));
    let info = a.obj_get_name(r(root, fd)).unwrap();
    assert_eq!((info.id, info.kind, info.refcount), (seg, ObjectKind::Segment, 2));
    assert_eq!(w.census.live(), 2);
    // A descriptor of a descriptor names the same object; closing the original keeps it.
    let fd2 = a.share_dupobj(&mut w.creator, root, r(root, fd)).unwrap();
    a.share_delobj(r(root, seg)).unwrap();
    assert_eq!(a.resolve(r(root, seg)).err(), Some(ObjError::NotInShare));
    assert_eq!(a.lookup(r(root, fd2), ObjectKind::Segment).unwrap().id(), seg);
    assert_eq!(w.drops.load(Ordering::Relaxed), 0);
    a.share_delobj(r(root, fd)).unwrap();
    assert_eq!(a.share_delobj(r(root, fd)).err(), Some(ObjError::NotInShare));
    assert_eq!((w.census.live(), w.drops.load(Ordering::Relaxed)), (2, 0));
    // The last entry goes: the object is freed and the census is back to zero.
    a.share_delobj(r(root, fd2)).unwrap();
    assert_eq!((w.census.live(), w.drops.load(Ordering::Relaxed)), (0, 1));
}

#[test]
fn descriptors_in_shared_shares_and_their_refusals() {
    let mut w = world(4);
    let mut a = w.set(0);
    let root = a.root_id();
    let p = w.probe();
    let seg = a.alloc(&mut w.creator, root, ObjectKind::Segment, name(), p).unwrap();
    let table = a.share_alloc(&mut w.creator, root, name()).unwrap();
    // Not yet in the set; then a descriptor of a root-share object in the shared table.
    let dup = |a: &mut ShareSet<Probe>, c: &mut Creator, s, o| a.share_dupobj(c, s, o);
    assert_eq!(dup(&mut a, &mut w.creator, table, r(root, seg)), Err(ObjError::NotInShareSet));
    a.add_share(r(root, table)).unwrap();
    let fd = dup(&mut a, &mut w.creator, table, r(root, seg)).unwrap();
    assert_eq!(a.lookup(r(table, fd), ObjectKind::Segment).unwrap().id(), seg);
    // Shares cannot be duplicated; unknown objects and shares are refused; nothing leaks.
    let live = w.census.live();
    assert_eq!(dup(&mut a, &mut w.creator, root, r(root, table)), Err(ObjError::WrongKind));
    assert_eq!(dup(&mut a, &mut w.creator, root, r(root, ObjectId(99))), Err(ObjError::NotInShare));
    assert_eq!(
        dup(&mut a, &mut w.creator, ObjectId(7), r(root, seg)),
        Err(ObjError::NotInShareSet)
    );
    assert_eq!(w.census.live(), live);
    // Another core's set that holds the table can use and close the descriptor.
    let mut b = w.set(1);
    b.add_share_ptr(a.shared_share(table).unwrap()).unwrap();
    assert_eq!(b.lookup(r(table, fd), ObjectKind::Segment).unwrap().id(), seg);
    b.share_delobj(r(table, fd)).unwrap();
    assert_eq!(a.resolve(r(table, fd)).err(), Some(ObjError::NotInShare));
    // A descriptor left in a share is released with it.
    dup(&mut a, &mut w.creator, table, r(root, seg)).unwrap();
    drop(b);
    drop(a);
    assert_eq!((w.census.live(), w.drops.load(Ordering::Relaxed)), (0, 1));
}

/// Each core's census is written on every create and free on that core (every `dup` and
/// `close`): in an array of them, one per core, no two may share a cache line. They did
/// (8 bytes each, eight cores to a line), so `fdbench`'s private tables wrote a line
/// shared by cores on every operation.
#[test]
fn each_census_has_a_cache_line_of_its_own() {
    let cores: [Census; 2] = [Census::new(), Census::new()];
    let (a, b) = (&cores[0] as *const Census as usize, &cores[1] as *const Census as usize);
    assert!(b - a >= 64 && a % 64 == 0, "censuses {} bytes apart", b - a);
}

std::thread_local! {
    /// The "core" a host test thread plays.
    static PLAYED_CORE: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// A census counts a create on the creating core and a free on the freeing one, each in
/// that core's own row (no line two cores write: issue M10 item 7); the sum is the live
/// count, whichever core frees.
#[test]
fn a_census_keeps_a_row_per_core() {
    static CENSUS: Census =
        Census::per_core(Cores { here: || PLAYED_CORE.with(|c| c.get()), count: || 4 });
    let tokens: Vec<CensusToken> = (0..8).map(|_| CensusToken::count(&CENSUS)).collect();
    assert_eq!(CENSUS.live(), 8);
    let rows = |c: &Census| -> Vec<isize> { (0..4).map(|core| c.row(core)).collect() };
    assert_eq!(rows(&CENSUS), [8, 0, 0, 0]);
    // Freed on "core 3": its own row goes down, core 0's stays.
    let handle = std::thread::spawn(move || {
        PLAYED_CORE.with(|c| c.set(3));
        drop(tokens);
    });
    handle.join().unwrap();
    assert_eq!(rows(&CENSUS), [8, 0, 0, -8]);
    assert_eq!(CENSUS.live(), 0);
}

/// A share takes at most `SHARE_MAX` entries (its table grows in one allocation); the
/// refused descriptor gives back its reference and census count.
#[test]
fn a_full_share_refuses_more() {
    let mut w = world(5);
    let mut a = w.set(0);
    let root = a.root_id();
    let p = w.probe();
    let seg = a.alloc(&mut w.creator, root, ObjectKind::Segment, name(), p).unwrap();
    let table = a.share_alloc(&mut w.creator, root, name()).unwrap();
    a.add_share(r(root, table)).unwrap();
    for share in [root, table] {
        let mut last = Ok(ObjectId(0));
        let mut live = w.census.live();
        for _ in 0..object::SHARE_MAX + 10 {
            live = w.census.live();
            last = a.share_dupobj(&mut w.creator, share, r(root, seg));
            if last.is_err() {
                break;
            }
        }
        assert_eq!(last, Err(ObjError::ShareFull));
        assert_eq!(w.census.live(), live);
    }
    let info = a.obj_get_name(r(root, seg)).unwrap();
    // Both shares full: the root's own entries (the segment, the table) count too.
    assert_eq!(info.refcount as usize, 2 * object::SHARE_MAX - 1);
    drop(a);
    assert_eq!((w.census.live(), w.drops.load(Ordering::Relaxed)), (0, 1));
}

#[derive(Clone, Debug)]
enum Op {
    Segment(usize),
    Share(usize),
    Add { share: usize, obj: usize },
    Del(usize),
    Dup { share: usize, obj: usize },
    SetAdd(usize),
    Drop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4usize).prop_map(Op::Segment),
        (0..4usize).prop_map(Op::Share),
        (0..8usize, 0..16usize).prop_map(|(share, obj)| Op::Add { share, obj }),
        (0..16usize).prop_map(Op::Del),
        (0..8usize, 0..16usize).prop_map(|(share, obj)| Op::Dup { share, obj }),
        (0..8usize).prop_map(Op::SetAdd),
        (0..8usize).prop_map(Op::Drop),
    ]
}

proptest! {
    /// Random sequences of the share calls on one set: whatever happens, nothing is freed
    /// while reachable (every lookup of a listed id works) and everything is freed when
    /// the set goes (census back to 0, one drop per segment).
    #[test]
    fn nothing_leaks_and_nothing_is_freed_early(ops in proptest::collection::vec(op(), 1..60)) {
        let mut w = world(3);
        let mut set = w.set(0);
        let root = set.root_id();
        let mut objs: Vec<ObjectId> = Vec::new(); // every id ever made
        let mut shares: Vec<ObjectId> = alloc::vec![root];
        let mut segments = 0;
        let mut descriptors: Vec<(ObjectId, ObjectId, ObjectId)> = Vec::new();
        for op in ops {
            match op {
                Op::Segment(s) => {
                    let parent = shares[s % shares.len()];
                    let p = w.probe();
                    segments += 1; // a refused payload is dropped at once: still one drop
                    if let Ok(id) = set.alloc(&mut w.creator, parent, ObjectKind::Segment, name(), p) {
                        objs.push(id);
                    }
                }
                Op::Share(s) => {
                    let parent = shares[s % shares.len()];
                    if let Ok(id) = set.share_alloc(&mut w.creator, parent, name()) {
                        objs.push(id);
                        shares.push(id);
                    }
                }
                Op::Add { share, obj } if !objs.is_empty() => {
                    let into = shares[share % shares.len()];
                    let id = objs[obj % objs.len()];
                    for from in shares.clone() {
                        let _ = set.share_addobj(into, r(from, id));
                    }
                }
                Op::Del(obj) if !objs.is_empty() => {
                    let id = objs[obj % objs.len()];
                    let from = shares[obj % shares.len()];
                    let _ = set.share_delobj(r(from, id));
                }
                Op::Dup { share, obj } if !objs.is_empty() => {
                    let into = shares[share % shares.len()];
                    let id = objs[obj % objs.len()];
                    for from in shares.clone() {
                        let object = set.resolve(r(from, id)).map(|p| p.id());
                        if let Ok(fd) = set.share_dupobj(&mut w.creator, into, r(from, id)) {
                            // `Del` reaches the descriptors too.
                            objs.push(fd);
                            descriptors.push((into, fd, object.unwrap()));
                        }
                    }
                }
                Op::SetAdd(s) => {
                    let id = shares[s % shares.len()];
                    for from in shares.clone() {
                        let _ = set.add_share(r(from, id));
                    }
                }
                Op::Drop(s) => {
                    let _ = set.self_drop(shares[s % shares.len()]);
                }
                _ => {}
            }
            // Whatever a share in the set lists must still be alive and of its kind.
            for &s in &shares {
                if let Ok(ptr) = set.shared_share(s) {
                    for id in ptr.share().unwrap().ids(0) {
                        prop_assert!(set.resolve(r(s, id)).is_ok());
                    }
                }
            }
            prop_assert!(w.census.live() <= objs.len());
            // A descriptor names the object it was made for, as long as it is there.
            for &(share, fd, object) in &descriptors {
                if let Ok(ptr) = set.resolve(r(share, fd)) {
                    prop_assert_eq!(ptr.id(), object);
                }
            }
        }
        drop(set);
        prop_assert_eq!(w.census.live(), 0);
        prop_assert_eq!(w.drops.load(Ordering::Relaxed), segments);
        let _ = Arc::<u8>::new(0);
    }
}

/// Issue M14: the objects a program makes through its set, and its shares' tables as
/// they grow, are charged to its quota and refused past it, changing nothing; every byte
/// comes back when the objects go.
#[test]
fn a_set_is_refused_at_its_quota_and_every_byte_comes_back() {
    let mut w = world(1);
    let object = Object::<Probe>::BYTES;
    // The root table's first 8 slots hold 4 entries; the 5th doubles it.
    let table = IdMap::<Entry<Probe>>::new().bytes_with_one_more();
    let quota = Quota::new(3 * object + table, None);
    let mut a = ShareSet::new(0, &mut w.creator, quota.clone()).unwrap();
    let root = a.root_id();
    let mut made = Vec::new();
    loop {
        let p = w.probe();
        match a.alloc(&mut w.creator, root, ObjectKind::Segment, name(), p) {
            Ok(id) => made.push(id),
            Err(e) => {
                assert_eq!(e, ObjError::QuotaExceeded);
                break;
            }
        }
    }
    assert_eq!(made.len(), 3);
    assert_eq!(quota.used(), 3 * object + table);
    // The refused payload was dropped, nothing else changed.
    assert_eq!(w.census.live(), 3);
    assert_eq!(a.root_len(), 3);
    // A descriptor fits in the table as it is; the next would double it: refused.
    a.share_dupobj(&mut w.creator, root, r(root, made[0])).unwrap();
    let fifth = a.share_dupobj(&mut w.creator, root, r(root, made[0]));
    assert_eq!(fifth, Err(ObjError::QuotaExceeded));
    assert_eq!(quota.used(), 3 * object + table);
    a.share_delobj(r(root, made[2])).unwrap();
    assert_eq!(quota.used(), 2 * object + table);
    // A share's table is charged besides its object: no room left for one.
    let shared = a.share_alloc(&mut w.creator, root, name());
    assert_eq!(shared, Err(ObjError::QuotaExceeded));
    drop(a);
    assert_eq!(quota.used(), 0);
    assert_eq!(w.census.live(), 0);
}

/// A shared share's table grows on its maker's quota, whoever adds to it, and gives it
/// back as it empties.
#[test]
fn a_shared_tables_growth_is_its_makers() {
    let mut w = world(1);
    let maker = Quota::new(u64::MAX, None);
    let other = Quota::new(u64::MAX, None);
    let mut a = ShareSet::new(0, &mut w.creator, maker.clone()).unwrap();
    let mut b = ShareSet::new(1, &mut w.creator, other.clone()).unwrap();
    let (ra, rb) = (a.root_id(), b.root_id());
    let shared = a.share_alloc(&mut w.creator, ra, name()).unwrap();
    a.add_share(r(ra, shared)).unwrap();
    let before = (maker.used(), other.used());
    let p = w.probe();
    let seg = b.alloc(&mut w.creator, rb, ObjectKind::Segment, name(), p).unwrap();
    let held = a.shared_share(shared).unwrap();
    b.add_share_ptr(held).unwrap();
    let after_alloc = other.used();
    b.share_addobj(shared, r(rb, seg)).unwrap();
    // The entry's slot: the maker's table grew to its first 8 slots.
    let table = IdMap::<Entry<Probe>>::new().bytes_with_one_more();
    assert_eq!(maker.used(), before.0 + table);
    assert_eq!(other.used(), after_alloc);
    b.share_delobj(r(shared, seg)).unwrap();
    drop(b);
    drop(a);
    assert_eq!((maker.used(), other.used()), (0, 0));
}
