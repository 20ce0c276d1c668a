//! Scenarios on the simulated machine (`sim`): first touch, pages shared through one root
//! or one spliced slot (Corey §3.1), copy-on-write and plain copies (§4.3), resizes,
//! edits, faults racing other work, and that every frame is freed at the end.

mod sim;

use addrrange::Perms;
use sim::{Refused, Sim, GRAN, P};

/// Every frame and object is freed once the handles and contexts go, and nothing went
/// wrong on the way.
fn all_freed(sim: &Sim) {
    assert_eq!(sim.violations(), Vec::<String>::new());
    assert_eq!(sim.live_objects(), 0, "objects left");
    assert_eq!(sim.live_frames(), 0, "frames left");
}

fn faults(sim: &Sim) -> u64 {
    *sim.faults.lock().unwrap()
}

#[test]
fn first_touch_fills_zeroes_and_maps_for_every_context_on_the_root() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(2));
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    let (a, b) = (sim.run(&root), sim.run(&root));
    assert_eq!(sim.live_frames(), 0, "frames are taken on first touch");
    assert_eq!(sim.read(a, P), Ok(0));
    assert_eq!((faults(&sim), sim.live_frames()), (1, 1));
    sim.write(b, P, 7).unwrap();
    assert_eq!(faults(&sim), 1, "b runs on the same tables: no fault of its own");
    assert_eq!(sim.read(a, P), Ok(7));
    assert_eq!(sim.contents(&seg), vec![0, 7]);
    sim.end(a);
    sim.end(b);
    drop((root, seg));
    all_freed(&sim);
}

#[test]
fn a_slot_spliced_into_two_roots_faults_once_for_both() {
    let sim = Sim::new();
    let (r1, r2, slot, seg) = (sim.root(), sim.root(), sim.slot(), sim.segment(1));
    sim.set_seg(&slot, 0, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_ar(&r1, GRAN, &slot, Perms::RW).unwrap();
    sim.set_ar(&r2, 2 * GRAN, &slot, Perms::RW).unwrap();
    let (a, b) = (sim.run(&r1), sim.run(&r2));
    sim.write(a, GRAN, 5).unwrap();
    assert_eq!(faults(&sim), 1);
    assert_eq!(sim.read(b, 2 * GRAN), Ok(5));
    assert_eq!(faults(&sim), 1, "the page is in the slot's tables, which r2 links");
    sim.end(a);
    sim.end(b);
    drop((r1, r2, slot, seg));
    all_freed(&sim);
}

#[test]
fn a_copy_on_write_copy_never_changes_and_shares_frames_until_a_write() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(2));
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, 0, 1).unwrap();
    sim.write(a, P, 2).unwrap();
    let copy = sim.copy_cow(&seg);
    assert_eq!(sim.live_frames(), 2, "the copy shares the frames");
    sim.write(a, 0, 10).unwrap();
    assert_eq!(sim.live_frames(), 3, "the write copied one page");
    assert_eq!(sim.contents(&copy), vec![1, 2]);
    assert_eq!(sim.contents(&seg), vec![10, 2]);
    // Writing the copy (mapped elsewhere) leaves the original alone too.
    sim.set_seg(&root, GRAN, &copy, 0, 2, Perms::RW).unwrap();
    sim.write(a, GRAN + P, 20).unwrap();
    assert_eq!((sim.contents(&copy), sim.contents(&seg)), (vec![1, 20], vec![10, 2]));
    sim.end(a);
    drop((root, seg, copy));
    all_freed(&sim);
}

#[test]
fn a_copy_on_write_copy_takes_back_writable_entries_in_every_root() {
    // Issue 9: a context on another root that maps the segment kept a writable entry.
    let sim = Sim::new();
    let (r1, r2, seg) = (sim.root(), sim.root(), sim.segment(1));
    sim.set_seg(&r1, 0, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_seg(&r2, 0, &seg, 0, 1, Perms::RW).unwrap();
    let (a, b) = (sim.run(&r1), sim.run(&r2));
    sim.write(b, 0, 1).unwrap();
    sim.write(a, 0, 2).unwrap();
    let copy = sim.copy_cow(&seg);
    sim.write(b, 0, 3).unwrap();
    assert_eq!(sim.contents(&copy), vec![2]);
    assert_eq!(sim.read(a, 0), Ok(3));
    sim.end(a);
    sim.end(b);
    drop((r1, r2, seg, copy));
    all_freed(&sim);
}

#[test]
fn a_plain_copy_is_independent_at_once() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(3));
    sim.set_seg(&root, 0, &seg, 0, 3, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, 2 * P, 4).unwrap();
    let copy = sim.copy_plain(&seg);
    assert_eq!(sim.live_frames(), 2, "only the touched page is copied");
    sim.write(a, 2 * P, 5).unwrap();
    assert_eq!(sim.contents(&copy), vec![0, 0, 4]);
    sim.end(a);
    drop((root, seg, copy));
    all_freed(&sim);
}

#[test]
fn a_shrink_takes_back_the_mappings_and_frees_the_pages() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(2));
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, 0, 1).unwrap();
    sim.write(a, P, 2).unwrap();
    sim.resize(&seg, 1);
    assert_eq!(sim.live_frames(), 1);
    assert_eq!(sim.read(a, P), Err(Refused), "past the segment's end");
    sim.resize(&seg, 2);
    assert_eq!(sim.read(a, P), Ok(0), "a grown page is untouched");
    assert_eq!(sim.read(a, 0), Ok(1));
    sim.end(a);
    drop((root, seg));
    all_freed(&sim);
}

#[test]
fn a_remap_unmaps_the_old_pages() {
    let sim = Sim::new();
    let (root, old, new) = (sim.root(), sim.segment(1), sim.segment(1));
    sim.set_seg(&root, 0, &old, 0, 1, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, 0, 1).unwrap();
    sim.set_seg(&root, 0, &new, 0, 1, Perms::RW).unwrap();
    assert_eq!(sim.read(a, 0), Ok(0));
    drop(old);
    assert_eq!(sim.live_frames(), 1, "the old segment went with its last holder");
    sim.end(a);
    drop((root, new));
    all_freed(&sim);
}

#[test]
fn the_same_mapping_again_changes_rights_in_place() {
    // Multikernel §5.1, Figure 7: a rights reduction as `mprotect` makes it. The entries
    // keep their frames (no fault afterwards for what is still allowed) and a TLB with the
    // right taken away is shot down; rights given back are in the entries at once.
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(2));
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    let (a, b) = (sim.run(&root), sim.run(&root));
    sim.write(a, 0, 1).unwrap();
    sim.write(b, P, 2).unwrap();
    assert_eq!(sim.peek(b, 0), Some((1, true)), "b's TLB or tables: writable");
    let before = faults(&sim);
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::R).unwrap();
    assert_eq!(sim.peek(a, P), Some((2, false)), "no stale writable translation");
    assert_eq!(sim.write(b, 0, 3), Err(Refused));
    assert_eq!((sim.read(a, 0), sim.read(b, P)), (Ok(1), Ok(2)));
    // Given back in place: the writes find writable entries in the tables (a TLB entry
    // with fewer rights is walked past, as the MMU refaults and the fault retries).
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    sim.write(a, 0, 4).unwrap();
    sim.write(b, P, 5).unwrap();
    assert_eq!(faults(&sim) - before, 1, "only the refused write faulted");
    assert_eq!(sim.contents(&seg), vec![4, 5]);
    // A copy-on-write page stays read-only when write is given back: the write copies.
    let copy = sim.copy_cow(&seg);
    assert_eq!(sim.read(a, 0), Ok(4)); // mapped again, read-only
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::R).unwrap();
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    sim.write(a, 0, 6).unwrap();
    assert_eq!((sim.contents(&copy), sim.contents(&seg)), (vec![4, 5], vec![6, 5]));
    sim.end(a);
    sim.end(b);
    drop((root, seg, copy));
    all_freed(&sim);
}

#[test]
fn a_write_through_a_read_only_mapping_is_refused() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(1));
    sim.set_seg(&root, 0, &seg, 0, 1, Perms::R).unwrap();
    let a = sim.run(&root);
    assert_eq!(sim.write(a, 0, 1), Err(Refused));
    assert_eq!(sim.read(a, 0), Ok(0));
    assert_eq!(sim.write(a, 0, 1), Err(Refused), "the entry is read-only");
    assert_eq!(sim.read(a, P), Err(Refused), "nothing is mapped there");
    sim.end(a);
    drop((root, seg));
    all_freed(&sim);
}

#[test]
fn replacing_a_splice_unlinks_the_slot() {
    let sim = Sim::new();
    let (root, slot, a_seg, b_seg) = (sim.root(), sim.slot(), sim.segment(1), sim.segment(4));
    sim.set_seg(&slot, 0, &a_seg, 0, 1, Perms::RW).unwrap();
    sim.set_ar(&root, GRAN, &slot, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, GRAN, 1).unwrap();
    sim.set_seg(&root, GRAN, &b_seg, 0, GRAN / P, Perms::RW).unwrap();
    assert_eq!(sim.read(a, GRAN), Ok(0), "the root maps b now, not the slot");
    drop((slot, a_seg));
    assert_eq!(sim.live_frames(), 1, "the slot and its page went with the splice (b's is left)");
    sim.end(a);
    drop((root, b_seg));
    all_freed(&sim);
}

#[test]
fn with_no_frame_left_the_fault_is_refused() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(1));
    sim.set_seg(&root, 0, &seg, 0, 1, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.limit_frames(0);
    assert_eq!(sim.read(a, 0), Err(Refused));
    sim.limit_frames(1);
    assert_eq!(sim.read(a, 0), Ok(0));
    sim.end(a);
    drop((root, seg));
    all_freed(&sim);
}

// A fault takes, with no lock held between: the root's lock (route), the owner's (plan),
// the segment's (note the range), the segment's (look), the segment's (place, after a
// frame was zeroed or copied; not for a page that is there), the owner's (install).
// `interfere(n, ..)` runs work before the n-th of these.

#[test]
fn two_faults_filling_one_page_keep_one_frame() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(1));
    sim.set_seg(&root, 0, &seg, 0, 1, Perms::RW).unwrap();
    let (a, b) = (sim.run(&root), sim.run(&root));
    // b fills the page while a's zeroed frame is on its way to the slot.
    sim.interfere(5, move |sim| sim.write(b, 0, 9).unwrap());
    assert_eq!(sim.read(a, 0), Ok(9));
    assert!(!sim.flush_pending(), "the work ran");
    assert_eq!(sim.live_frames(), 1, "a's frame went back");
    sim.end(a);
    sim.end(b);
    drop((root, seg));
    all_freed(&sim);
}

#[test]
fn a_copy_made_while_a_write_fills_the_page_never_changes() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(1));
    sim.set_seg(&root, 0, &seg, 0, 1, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, 0, 1).unwrap();
    // Another segment there and back: the page is unmapped, so the next write faults. (The
    // same mapping again would only change rights, in place.)
    let other = sim.segment(1);
    sim.set_seg(&root, 0, &other, 0, 1, Perms::RW).unwrap();
    sim.set_seg(&root, 0, &seg, 0, 1, Perms::RW).unwrap();
    drop(other);
    let copy = std::sync::Arc::new(std::sync::Mutex::new(None));
    let made = copy.clone();
    // The copy is made after the write's fault looked at the page, before it is mapped.
    sim.interfere(5, move |sim| *made.lock().unwrap() = Some(sim.copy_cow(&sim.segments()[0])));
    sim.write(a, 0, 2).unwrap();
    let copy = copy.lock().unwrap().take().expect("the copy was made");
    assert_eq!(sim.contents(&copy), vec![1]);
    assert_eq!(sim.contents(&seg), vec![2]);
    sim.end(a);
    drop((root, seg, copy));
    all_freed(&sim);
}

#[test]
fn a_slot_spliced_read_only_stays_read_only_after_a_read_write_splice_writes() {
    // Before: the slot's entry got the rights of whichever root faulted first, and the
    // root's link allowed everything, so once b had written, a could write too.
    let sim = Sim::new();
    let (r1, r2, slot, seg) = (sim.root(), sim.root(), sim.slot(), sim.segment(1));
    sim.set_seg(&slot, 0, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_ar(&r1, 0, &slot, Perms::R).unwrap();
    sim.set_ar(&r2, 0, &slot, Perms::RW).unwrap();
    let (a, b) = (sim.run(&r1), sim.run(&r2));
    assert_eq!(sim.read(a, 0), Ok(0));
    sim.write(b, 0, 1).unwrap();
    assert_eq!(sim.write(a, 0, 2), Err(Refused));
    assert_eq!(sim.read(a, 0), Ok(1));
    assert_eq!(sim.contents(&seg), vec![1]);
    sim.end(a);
    sim.end(b);
    drop((r1, r2, slot, seg));
    all_freed(&sim);
}

#[test]
fn a_fault_maps_what_the_range_maps_when_the_entry_is_written() {
    // Before: the fault checked only that the range still mapped the same segment, so a
    // remap to another page of it, read-only, raced by the fault left an entry for the
    // old page, writable.
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(2));
    sim.set_seg(&root, 0, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_seg(&root, P, &seg, 1, 1, Perms::RW).unwrap();
    let a = sim.run(&root);
    sim.write(a, P, 7).unwrap();
    let (r, s) = (root.clone(), seg.clone());
    // Just before the fault looks at the page it planned to fill (page 0, writable).
    sim.interfere(4, move |sim| sim.set_seg(&r, 0, &s, 1, 1, Perms::R).unwrap());
    assert_eq!(sim.write(a, 0, 5), Err(Refused), "va 0 maps page 1 read-only now");
    assert!(!sim.flush_pending(), "the remap ran during the fault");
    assert_eq!(sim.read(a, 0), Ok(7));
    assert_eq!(sim.contents(&seg), vec![0, 7]);
    sim.end(a);
    drop((root, seg));
    all_freed(&sim);
}

#[test]
fn a_fault_racing_a_splice_at_its_address_retries() {
    // Before: the fault, routed to the root's own mapping, found the splice there and
    // stopped the program, though the address was mapped before and after.
    let sim = Sim::new();
    let (root, slot, seg, shared) = (sim.root(), sim.slot(), sim.segment(1), sim.segment(1));
    sim.set_seg(&root, GRAN, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_seg(&slot, 0, &shared, 0, 1, Perms::RW).unwrap();
    let a = sim.run(&root);
    let (r, s) = (root.clone(), slot.clone());
    // After the fault was routed to the root's own mapping, before it plans there.
    sim.interfere(2, move |sim| sim.set_ar(&r, GRAN, &s, Perms::RW).unwrap());
    assert_eq!(sim.write(a, GRAN, 3), Ok(()));
    assert!(!sim.flush_pending(), "the splice ran during the fault");
    assert_eq!((sim.contents(&shared), sim.contents(&seg)), (vec![3], vec![0]));
    sim.end(a);
    drop((root, slot, seg, shared));
    all_freed(&sim);
}

#[test]
fn after_a_write_copies_a_page_every_mapping_of_it_sees_the_copy() {
    // Before: the write's fault replaced only its own entry; an entry for the same page
    // at another address (or in another range) still mapped the frame it was copied
    // from, and read what the page held before the write.
    let sim = Sim::new();
    let (r1, r2, seg) = (sim.root(), sim.root(), sim.segment(1));
    sim.set_seg(&r1, 0, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_seg(&r1, P, &seg, 0, 1, Perms::RW).unwrap();
    sim.set_seg(&r2, 0, &seg, 0, 1, Perms::R).unwrap();
    let (a, b) = (sim.run(&r1), sim.run(&r2));
    sim.write(a, 0, 1).unwrap();
    let copy = sim.copy_cow(&seg);
    assert_eq!((sim.read(a, P), sim.read(b, 0)), (Ok(1), Ok(1)));
    sim.write(a, 0, 2).unwrap();
    assert_eq!(sim.read(a, P), Ok(2), "the same page at another address");
    assert_eq!(sim.read(b, 0), Ok(2), "the same page in another root");
    assert_eq!(sim.contents(&copy), vec![1]);
    sim.end(a);
    sim.end(b);
    drop((r1, r2, seg, copy));
    all_freed(&sim);
}

#[test]
fn a_pinned_page_is_the_one_contexts_map_and_a_copy_on_write_page_is_refused() {
    let sim = Sim::new();
    let (root, seg) = (sim.root(), sim.segment(2));
    sim.set_seg(&root, 0, &seg, 0, 2, Perms::RW).unwrap();
    // An untouched page is filled with zeroes by the pin, and a context's first touch
    // then finds that frame (not a second one).
    let pinned = vm::pin_page(&sim, &seg, 1).unwrap();
    assert_eq!(sim.live_frames(), 1);
    let a = sim.run(&root);
    sim.write(a, P, 9).unwrap();
    assert_eq!(sim.live_frames(), 1, "the write went to the pinned frame");
    let addr = <Sim as vm::Host>::addr;
    assert_eq!(vm::pin_page(&sim, &seg, 1).map(|f| addr(&f)), Ok(addr(&pinned)));
    assert_eq!(vm::pin_page(&sim, &seg, 2).map(|_| ()), Err(vm::VmError::OutOfRange));
    // Once the segment is copied copy-on-write, its pages are refused.
    let copy = sim.copy_cow(&seg);
    assert_eq!(vm::pin_page(&sim, &seg, 1).map(|_| ()), Err(vm::VmError::WrongKind));
    sim.end(a);
    drop((root, seg, copy, pinned));
    all_freed(&sim);
}
