//! The Larson allocator benchmark (Larson & Krishnan, ISMM 1998; McRT Figure 11), written
//! once over `GlobalAlloc` for Atoll, the Linux guest and the host: each thread owns
//! [`SLOTS`] slots of random-size objects (16 to 1024 bytes) and repeatedly frees a random
//! slot's object and allocates a new one (one op = one free plus one allocation, each
//! object touched). After every round of [`ROUND`] ops it hands [`HANDOFF`] of its objects
//! to the next thread and takes over those the previous thread handed it, so a share of
//! the frees are remote.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

/// An object: its address and size (0: an empty slot).
pub type Obj = (usize, usize);

/// Objects each thread holds.
pub const SLOTS: usize = 1000;
/// Ops between hand-overs.
pub const ROUND: usize = 1000;
/// Objects handed to the next thread each round.
pub const HANDOFF: usize = SLOTS / 8;
/// Smallest and largest object.
pub const MIN_SIZE: usize = 16;
pub const MAX_SIZE: usize = 1024;

/// The mailboxes: thread `i` takes from box `i` and gives to box `i + 1`.
pub struct Mail(Vec<AtomicPtr<Vec<Obj>>>);

impl Mail {
    /// Mailboxes for `n` threads.
    pub fn new(n: usize) -> Mail {
        Mail((0..n).map(|_| AtomicPtr::new(null_mut())).collect())
    }

    /// Frees whatever is left in the boxes.
    pub fn drain<A: GlobalAlloc>(&self, a: &A) {
        for b in &self.0 {
            let p = b.swap(null_mut(), Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: boxes hold `Box<Vec<Obj>>`s put there by `larson`.
                let objs = unsafe { Box::from_raw(p) };
                free_all(a, &objs);
            }
        }
    }
}

/// One Larson thread, number `me`: fill the slots, then `ops` ops in rounds with
/// hand-overs; yields (`mcrt::yield_now`) every `yield_every` ops on McRT threads.
pub fn larson<A: GlobalAlloc>(
    a: &A,
    mail: &Mail,
    me: usize,
    ops: usize,
    yield_every: Option<usize>,
) {
    let n = mail.0.len();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (me as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut slots: Vec<Obj> = (0..SLOTS).map(|_| new_obj(a, &mut rng)).collect();
    for op in 1..=ops {
        let k = rng.below(SLOTS);
        free_obj(a, slots[k]);
        slots[k] = new_obj(a, &mut rng);
        if yield_every.is_some_and(|y| op.is_multiple_of(y)) {
            mcrt::yield_now();
        }
        if op.is_multiple_of(ROUND) && n > 1 {
            // Give the first HANDOFF objects to the next thread, take the previous one's.
            let give: Vec<Obj> = slots[..HANDOFF].to_vec();
            let old = mail.0[(me + 1) % n].swap(Box::into_raw(Box::new(give)), Ordering::AcqRel);
            let got = mail.0[me].swap(null_mut(), Ordering::AcqRel);
            for s in &mut slots[..HANDOFF] {
                *s = (0, 0);
            }
            for p in [old, got] {
                if p.is_null() {
                    continue;
                }
                // SAFETY: boxes hold `Box<Vec<Obj>>`s put there by this function.
                let objs = unsafe { Box::from_raw(p) };
                let mut empty = slots[..HANDOFF].iter_mut().filter(|s| s.0 == 0);
                for &o in objs.iter() {
                    match empty.next() {
                        Some(s) => *s = o,
                        None => free_obj(a, o),
                    }
                }
            }
        }
    }
    free_all(a, &slots);
}

fn new_obj<A: GlobalAlloc>(a: &A, rng: &mut Rng) -> Obj {
    let size = MIN_SIZE + rng.below(MAX_SIZE - MIN_SIZE + 1);
    // SAFETY: a non-zero size.
    let p = unsafe { a.alloc(Layout::from_size_align_unchecked(size, 8)) };
    assert!(!p.is_null(), "larson: out of memory");
    // SAFETY: fresh, `size` bytes: touch its first and last byte as a program would.
    unsafe {
        p.write(size as u8);
        p.add(size - 1).write(size as u8);
    }
    (p as usize, size)
}

fn free_obj<A: GlobalAlloc>(a: &A, (p, size): Obj) {
    if p != 0 {
        // SAFETY: allocated by `new_obj` on `a` with this layout, not used again.
        unsafe { a.dealloc(p as *mut u8, Layout::from_size_align_unchecked(size, 8)) };
    }
}

fn free_all<A: GlobalAlloc>(a: &A, objs: &[Obj]) {
    for &o in objs {
        free_obj(a, o);
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}
