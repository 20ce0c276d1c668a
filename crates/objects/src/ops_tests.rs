//! Unit tests of [`crate::Objects`]: each Figure 5 operation, and each of its errors
//! leaving everything as it was.

use alloc::vec::Vec;

use crate::{Freed, ObjError, ObjName, ObjRef, ObjectId, ObjectKind, Objects, ShareSet};

use ObjectKind::{AddressRange, Segment, Share as ShareKind};

fn name(s: &str) -> ObjName {
    ObjName::new(s.as_bytes()).unwrap()
}

fn r(share: ObjectId, object: ObjectId) -> ObjRef {
    ObjRef { share, object }
}

/// A core-1 object space with a share set holding one root share.
fn setup() -> (Objects<&'static str>, ShareSet, ObjectId) {
    let mut o = Objects::new(1);
    let mut set = ShareSet::new();
    let root = o.root_share(&mut set, name("root")).unwrap();
    (o, set, root)
}

fn ids<P>(freed: &[Freed<P>]) -> Vec<ObjectId> {
    let mut v: Vec<_> = freed.iter().map(|f| f.id).collect();
    v.sort();
    v
}

#[test]
fn root_share_is_held_by_the_set() {
    let (o, set, root) = setup();
    assert!(set.contains_share(root));
    assert_eq!(root.core(), 1);
    assert_eq!((o.kind(root), o.refcount(root)), (Some(ShareKind), Some(1)));
    assert!(o.share(root).unwrap().is_empty());
}

#[test]
fn share_alloc_places_the_new_share_in_its_parent() {
    let (mut o, set, root) = setup();
    let s = o.share_alloc(&set, root, name("fds")).unwrap();
    assert!(o.share(root).unwrap().contains(s));
    assert_eq!(o.refcount(s), Some(1));
    let info = o.obj_get_name(&set, r(root, s)).unwrap();
    assert_eq!((info.kind, info.name.as_bytes()), (ShareKind, &b"fds"[..]));
    // s is reachable but not in the set: it cannot be a parent yet.
    assert_eq!(o.share_alloc(&set, s, name("x")), Err(ObjError::NotInShareSet));
    assert_eq!(o.len(), 2);
}

#[test]
fn share_alloc_needs_a_live_share_in_the_set() {
    let (mut o, mut set, root) = setup();
    let seg = o.alloc(&set, root, Segment, name("seg"), "frames").unwrap();
    set.add_share(seg).unwrap(); // plain set op: a bogus entry for the test
    assert_eq!(o.share_alloc(&set, seg, name("x")), Err(ObjError::WrongKind));
    set.add_share(ObjectId(999)).unwrap();
    assert_eq!(o.share_alloc(&set, ObjectId(999), name("x")), Err(ObjError::NoSuchObject));
    assert_eq!(o.len(), 2);
}

#[test]
fn alloc_places_kernel_objects_and_returns_the_payload_on_error() {
    let (mut o, set, root) = setup();
    let seg = o.alloc(&set, root, Segment, name("heap"), "frames").unwrap();
    assert_eq!(o.payload(seg), Some(&"frames"));
    assert_eq!(o.lookup(&set, r(root, seg), Segment), Ok(&"frames"));
    assert_eq!(o.alloc(&set, root, ShareKind, name("s"), "p"), Err((ObjError::WrongKind, "p")));
    let other = ObjectId(5);
    assert_eq!(o.alloc(&set, other, Segment, name("s"), "p"), Err((ObjError::NotInShareSet, "p")));
    assert_eq!(o.len(), 2);
}

#[test]
fn lookup_checks_access_and_kind() {
    let (mut o, set, root) = setup();
    let ar = o.alloc(&set, root, AddressRange, name("ar"), "tree").unwrap();
    assert_eq!(o.lookup(&set, r(root, ar), Segment), Err(ObjError::WrongKind));
    *o.lookup_mut(&set, r(root, ar), AddressRange).unwrap() = "tree2";
    assert_eq!(o.payload(ar), Some(&"tree2"));
    let s = o.share_alloc(&set, root, name("s")).unwrap();
    assert_eq!(o.lookup(&set, r(root, s), ShareKind), Err(ObjError::WrongKind));
    assert_eq!(o.lookup(&set, r(s, ar), AddressRange), Err(ObjError::NotInShareSet));
    assert_eq!(o.lookup(&set, r(root, ObjectId(77)), Segment), Err(ObjError::NotInShare));
    // An id of another core is not in any of this core's shares.
    let foreign = ObjectId((2 << 48) | ar.serial());
    assert_eq!(o.lookup(&set, r(root, foreign), AddressRange), Err(ObjError::NotInShare));
}

#[test]
fn share_addobj_counts_a_reference() {
    let (mut o, mut set, root) = setup();
    let shared = o.share_alloc(&set, root, name("shared")).unwrap();
    o.set_add_share(&mut set, r(root, shared)).unwrap();
    let seg = o.alloc(&set, root, Segment, name("seg"), "frames").unwrap();
    o.share_addobj(&set, shared, r(root, seg)).unwrap();
    assert_eq!(o.refcount(seg), Some(2));
    assert!(o.share(shared).unwrap().contains(seg));
    assert_eq!(o.resolve(&set, r(shared, seg)), Ok(seg));
}

#[test]
fn share_addobj_errors_change_nothing() {
    let (mut o, mut set, root) = setup();
    let a = o.share_alloc(&set, root, name("a")).unwrap();
    let seg = o.alloc(&set, root, Segment, name("seg"), "frames").unwrap();
    let before = (o.len(), o.refcount(seg), o.share(root).cloned());
    assert_eq!(o.share_addobj(&set, a, r(root, seg)), Err(ObjError::NotInShareSet));
    o.set_add_share(&mut set, r(root, a)).unwrap();
    assert_eq!(o.share_addobj(&set, root, r(root, seg)), Err(ObjError::AlreadyPresent));
    assert_eq!(o.share_addobj(&set, a, r(a, seg)), Err(ObjError::NotInShare));
    assert_eq!(o.share_addobj(&set, a, r(seg, seg)), Err(ObjError::NotInShareSet));
    set.add_share(seg).unwrap(); // bogus, plain set op
    assert_eq!(o.share_addobj(&set, seg, r(root, a)), Err(ObjError::WrongKind));
    assert_eq!(before, (o.len(), o.refcount(seg), o.share(root).cloned()));
    assert!(o.share(a).unwrap().is_empty());
}

#[test]
fn share_cycles_are_refused() {
    // root ⊃ a ⊃ b ⊃ c, all four in the set.
    let (mut o, mut set, root) = setup();
    let a = o.share_alloc(&set, root, name("a")).unwrap();
    o.set_add_share(&mut set, r(root, a)).unwrap();
    let b = o.share_alloc(&set, a, name("b")).unwrap();
    o.set_add_share(&mut set, r(a, b)).unwrap();
    let c = o.share_alloc(&set, b, name("c")).unwrap();
    o.set_add_share(&mut set, r(b, c)).unwrap();
    assert_eq!(o.share_addobj(&set, a, r(root, a)), Err(ObjError::ShareCycle));
    assert_eq!(o.share_addobj(&set, b, r(root, a)), Err(ObjError::ShareCycle));
    assert_eq!(o.share_addobj(&set, c, r(root, a)), Err(ObjError::ShareCycle));
    assert_eq!(o.share_addobj(&set, c, r(a, b)), Err(ObjError::ShareCycle));
    assert_eq!(o.share_addobj(&set, c, r(b, c)), Err(ObjError::ShareCycle));
    assert_eq!(o.share_addobj(&set, b, r(b, c)), Err(ObjError::AlreadyPresent));
    assert_eq!(o.refcount(a), Some(2));
    // Not cycles: c also into a and into root (a share may have several parents).
    assert_eq!(o.share_addobj(&set, a, r(b, c)), Ok(()));
    assert_eq!(o.share_addobj(&set, root, r(b, c)), Ok(()));
    assert_eq!(o.refcount(c), Some(4));
}

#[test]
fn share_delobj_frees_at_the_last_holder() {
    let (mut o, mut set, root) = setup();
    let s = o.share_alloc(&set, root, name("s")).unwrap();
    o.set_add_share(&mut set, r(root, s)).unwrap();
    let seg = o.alloc(&set, root, Segment, name("seg"), "frames").unwrap();
    o.share_addobj(&set, s, r(root, seg)).unwrap();
    assert_eq!(o.share_delobj(&set, r(root, seg)), Ok(Vec::new()));
    assert_eq!(o.refcount(seg), Some(1));
    assert_eq!(o.share_delobj(&set, r(root, seg)), Err(ObjError::NotInShare));
    let freed = o.share_delobj(&set, r(s, seg)).unwrap();
    let want = Freed { id: seg, kind: Segment, payload: Some("frames") };
    assert_eq!(freed, [want]);
    assert_eq!(o.kind(seg), None);
    assert_eq!(o.share_delobj(&set, r(seg, seg)), Err(ObjError::NotInShareSet));
}

#[test]
fn a_freed_share_releases_its_entries() {
    let (mut o, mut set, root) = setup();
    let s = o.share_alloc(&set, root, name("s")).unwrap();
    o.set_add_share(&mut set, r(root, s)).unwrap();
    let a = o.alloc(&set, s, Segment, name("a"), "a").unwrap();
    let b = o.alloc(&set, s, Segment, name("b"), "b").unwrap();
    let inner = o.share_alloc(&set, s, name("inner")).unwrap();
    o.share_addobj(&set, root, r(s, b)).unwrap();
    assert_eq!(o.share_delobj(&set, r(root, s)), Ok(Vec::new()));
    let freed = o.self_drop(&mut set, s).unwrap();
    assert_eq!(ids(&freed), [s, a, inner]);
    assert!(freed.iter().all(|f| (f.kind == ShareKind) == f.payload.is_none()));
    assert_eq!(o.refcount(b), Some(1));
    assert!(!set.contains_share(s));
    assert_eq!(o.len(), 2);
}

#[test]
fn a_long_chain_of_shares_is_freed_without_recursion() {
    let (mut o, mut set, root) = setup();
    let mut parent = root;
    for _ in 0..20_000 {
        let s = o.share_alloc(&set, parent, name("")).unwrap();
        o.set_add_share(&mut set, r(parent, s)).unwrap();
        if parent != root {
            o.self_drop(&mut set, parent).unwrap();
        }
        parent = s;
    }
    o.self_drop(&mut set, parent).unwrap();
    let freed = o.self_drop(&mut set, root).unwrap();
    assert_eq!(freed.len(), 20_001);
    assert!(o.is_empty() && set.is_empty());
}

#[test]
fn self_drop_errors_change_nothing() {
    let (mut o, mut set, root) = setup();
    let seg = o.alloc(&set, root, Segment, name("seg"), "f").unwrap();
    assert_eq!(o.self_drop(&mut set, seg), Err(ObjError::NotInShareSet));
    set.add_share(seg).unwrap(); // bogus, plain set op
    assert_eq!(o.self_drop(&mut set, seg), Err(ObjError::WrongKind));
    set.add_share(ObjectId(12)).unwrap();
    assert_eq!(o.self_drop(&mut set, ObjectId(12)), Err(ObjError::NoSuchObject));
    assert!(set.contains_share(ObjectId(12)) && set.contains_share(root));
    assert_eq!(o.refcount(seg), Some(1));
}

#[test]
fn obj_get_name_reports_and_checks_access() {
    let (mut o, set, root) = setup();
    let seg = o.alloc(&set, root, Segment, name("heap"), "f").unwrap();
    let info = o.obj_get_name(&set, r(root, seg)).unwrap();
    assert_eq!((info.id, info.kind, info.refcount), (seg, Segment, 1));
    assert_eq!(info.name.as_bytes(), b"heap");
    assert_eq!(o.obj_get_name(&set, r(seg, root)), Err(ObjError::NotInShareSet));
    assert_eq!(o.obj_get_name(&set, r(root, root)), Err(ObjError::NotInShare));
}

#[test]
fn set_add_share_takes_up_a_reachable_share() {
    let (mut o, mut set, root) = setup();
    let s = o.share_alloc(&set, root, name("s")).unwrap();
    let seg = o.alloc(&set, root, Segment, name("seg"), "f").unwrap();
    assert_eq!(o.set_add_share(&mut set, r(root, seg)), Err(ObjError::WrongKind));
    assert_eq!(o.set_add_share(&mut set, r(s, s)), Err(ObjError::NotInShareSet));
    assert_eq!(o.set_add_share(&mut set, r(root, s)), Ok(s));
    assert_eq!(o.set_add_share(&mut set, r(root, s)), Err(ObjError::AlreadyPresent));
    assert_eq!(o.refcount(s), Some(2));
}

#[test]
fn a_child_set_gets_the_shares_its_parent_chose() {
    let (mut o, mut set, root) = setup();
    let shared = o.share_alloc(&set, root, name("shared")).unwrap();
    o.set_add_share(&mut set, r(root, shared)).unwrap();
    let seg = o.alloc(&set, shared, Segment, name("buf"), "f").unwrap();
    let mut child = ShareSet::new();
    let croot = o.root_share(&mut child, name("child root")).unwrap();
    assert_eq!(o.set_copy_share(&set, croot, &mut child), Err(ObjError::NotInShareSet));
    o.set_copy_share(&set, shared, &mut child).unwrap();
    assert_eq!(o.set_copy_share(&set, shared, &mut child), Err(ObjError::AlreadyPresent));
    assert_eq!(o.refcount(shared), Some(3));
    assert_eq!(o.resolve(&child, r(shared, seg)), Ok(seg));
    assert_eq!(o.resolve(&child, r(root, shared)), Err(ObjError::NotInShareSet));
    // The child halts: its root goes, the shared share stays for the parent.
    assert_eq!(ids(&o.release_set(child)), [croot]);
    assert_eq!(o.refcount(shared), Some(2));
    let all = o.release_set(set);
    assert_eq!(ids(&all), [root, shared, seg]);
    assert!(o.is_empty());
}

#[test]
fn kernel_references_keep_objects_alive() {
    let (mut o, set, root) = setup();
    let seg = o.alloc(&set, root, Segment, name("seg"), "frames").unwrap();
    o.add_ref(seg).unwrap(); // e.g. an address range maps it
    assert_eq!(o.share_delobj(&set, r(root, seg)), Ok(Vec::new()));
    assert_eq!(o.resolve(&set, r(root, seg)), Err(ObjError::NotInShare));
    assert_eq!(o.payload(seg), Some(&"frames"));
    assert_eq!(o.drop_ref(seg).unwrap().len(), 1);
    assert_eq!(o.drop_ref(seg), Err(ObjError::NoSuchObject));
    assert_eq!(o.add_ref(seg), Err(ObjError::NoSuchObject));
}

#[test]
fn refcount_overflow_is_refused_everywhere() {
    let (mut o, mut set, root) = setup();
    let a = o.share_alloc(&set, root, name("a")).unwrap();
    o.set_add_share(&mut set, r(root, a)).unwrap();
    let seg = o.alloc(&set, root, Segment, name("seg"), "f").unwrap();
    o.table.force_refcount(seg, u32::MAX);
    o.table.force_refcount(a, u32::MAX);
    assert_eq!(o.share_addobj(&set, a, r(root, seg)), Err(ObjError::RefcountOverflow));
    assert_eq!(o.add_ref(seg), Err(ObjError::RefcountOverflow));
    assert_eq!(o.set_add_share(&mut set, r(root, a)), Err(ObjError::AlreadyPresent));
    let mut child = ShareSet::new();
    assert_eq!(o.set_copy_share(&set, a, &mut child), Err(ObjError::RefcountOverflow));
    assert!(child.is_empty() && !o.share(a).unwrap().contains(seg));
}

#[test]
fn lengths_and_cores() {
    let mut o: Objects<()> = Objects::new(9);
    assert!(o.is_empty() && o.core() == 9);
    let mut set = ShareSet::new();
    let root = o.root_share(&mut set, ObjName::default()).unwrap();
    assert_eq!((root.core(), o.len()), (9, 1));
    assert_eq!(o.payload(root), None);
    assert_eq!(o.payload_mut(root), None);
}
