//! A participant that holds no lock holds no memory: the kernel's balance check counts
//! every heap byte, so a table that keeps its first allocation for good looks like a leak
//! after a core's first two-phase operation. A counting allocator (per thread, so tests
//! running at once do not disturb each other) measures it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use agreement::{Decision, Participant, Vote};

/// The system allocator, counting the bytes each thread holds.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call is passed straight to the system allocator; the count is a side note.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.with(|l| l.set(l.get() + layout.size() as isize));
        // SAFETY: the caller keeps `GlobalAlloc`'s contract, which `System` has too.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.with(|l| l.set(l.get() - layout.size() as isize));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn live() -> isize {
    LIVE.with(|l| l.get())
}

#[test]
fn a_participant_holding_nothing_holds_no_memory() {
    let mut p: Participant<u64> = Participant::new();
    let before = live();
    for op in 1..=3 {
        assert_eq!(p.prepare(op, &[10 * op, 10 * op + 1], true), Vote::Yes);
    }
    assert_eq!(p.prepare(4, &[10], true), Vote::No);
    for op in 1..=3 {
        p.decide(op, Decision::Commit);
    }
    assert_eq!(p.prepared(), 0);
    assert_eq!(live(), before, "bytes still held by a participant with no lock");
    // And again: nothing was kept from the first round.
    assert_eq!(p.prepare(5, &[10], true), Vote::Yes);
    p.decide(5, Decision::Abort);
    assert_eq!(live(), before);
}
