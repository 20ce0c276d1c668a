//! A simulated machine for the `vm` crate's tests: the crate's [`Host`] with counted frames
//! that report being freed while a page-table entry maps them, page tables a simulated MMU
//! walks (a root's links into slot ranges included), a TLB per context that only a
//! shootdown flushes, and the system calls composed from the crate as
//! `kernel/src/user/corey.rs` composes them. Other work can be injected at the moment a
//! lock is taken ([`Sim::interfere`]), as another core would do it, to reach the paths
//! where a fault finds that the range or the page changed while it filled the page.
//!
//! Addresses are small: a slot (the kernel's 1 GiB) is [`GRAN`] = 4 pages, a root range
//! [`ROOT_SLOTS`] slots. A frame holds one `u64` (its "page contents").

#![allow(dead_code)] // each test file uses part of it

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use addrrange::{AddressRange, ArError, Perms};
use vm::{Host, PageTables, RangeState, SegmentState, VmError, PAGE_SIZE};

/// Bytes in a page.
pub const P: u64 = PAGE_SIZE;
/// A slot range's span and the granularity ranges nest at.
pub const GRAN: u64 = 4 * P;
/// Slots in a root range.
pub const ROOT_SLOTS: u64 = 3;

/// Frames: each a value and a generation (a freed address is reused, as the kernel's
/// frame lists do, so a stale translation is told from a fresh one by its generation),
/// and how many page-table entries map each.
#[derive(Default)]
pub struct Mem {
    frames: BTreeMap<u64, (u64, u64)>,
    free: Vec<u64>,
    next_addr: u64,
    next_gen: u64,
    entries: BTreeMap<u64, usize>,
    violations: Vec<String>,
    /// Frames that may still be allocated (`None`: no limit).
    budget: Option<usize>,
}

impl Mem {
    fn alloc(&mut self, value: u64) -> Option<(u64, u64)> {
        if let Some(b) = &mut self.budget {
            *b = b.checked_sub(1)?;
        }
        let addr = self.free.pop().unwrap_or_else(|| {
            self.next_addr += P;
            self.next_addr
        });
        self.next_gen += 1;
        self.frames.insert(addr, (self.next_gen, value));
        Some((addr, self.next_gen))
    }

    fn free(&mut self, addr: u64) {
        if let Some(&n) = self.entries.get(&addr).filter(|&&n| n > 0) {
            self.violations.push(format!("frame {addr:#x} freed while {n} entries map it"));
        }
        self.frames.remove(&addr);
        self.free.push(addr);
        if let Some(b) = &mut self.budget {
            *b += 1;
        }
    }

    fn entry(&mut self, addr: u64, delta: isize) {
        let n = self.entries.entry(addr).or_default();
        *n = n.checked_add_signed(delta).expect("entry count below zero");
        if !self.frames.contains_key(&addr) {
            self.violations.push(format!("an entry (un)maps the free frame {addr:#x}"));
        }
    }
}

/// A counted frame handle; the frame is freed when the last one goes.
#[derive(Clone)]
pub struct Frame(Arc<FrameBox>);

struct FrameBox {
    addr: u64,
    mem: Arc<Mutex<Mem>>,
}

impl Drop for FrameBox {
    fn drop(&mut self) {
        self.mem.lock().unwrap().free(self.addr);
    }
}

/// A range's page tables: entries by offset, and (for a root) links to spliced slots.
pub struct Tables {
    mem: Arc<Mutex<Mem>>,
    entries: BTreeMap<u64, (u64, Perms)>,
    links: BTreeMap<u64, (Weak<Obj>, Perms)>,
}

impl PageTables for Tables {
    fn map(&mut self, offset: u64, addr: u64, perms: Perms) -> Result<(), VmError> {
        let mut mem = self.mem.lock().unwrap();
        if self.entries.contains_key(&offset) {
            mem.violations.push(format!("map over the entry at {offset:#x}"));
        }
        mem.entry(addr, 1);
        self.entries.insert(offset, (addr, perms));
        Ok(())
    }

    fn unmap(&mut self, offset: u64) {
        if let Some((addr, _)) = self.entries.remove(&offset) {
            self.mem.lock().unwrap().entry(addr, -1);
        }
    }

    fn translate(&self, offset: u64) -> Option<(u64, Perms)> {
        self.entries.get(&offset).copied()
    }

    fn unlink(&mut self, offset: u64) {
        self.links.remove(&offset);
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        if !self.entries.is_empty() {
            let n = self.entries.len();
            self.mem.lock().unwrap().violations.push(format!("tables freed with {n} entries"));
        }
    }
}

/// A segment or an address range.
pub struct Obj {
    pub id: u64,
    body: Body,
}

enum Body {
    Segment(Mutex<SegmentState<Sim>>),
    Range(Mutex<RangeState<Sim>>),
}

impl Drop for Obj {
    fn drop(&mut self) {
        // As `objects::release`: what a range held goes after it.
        if let Body::Range(r) = &self.body {
            let held = r.lock().unwrap().take_held();
            drop(held);
        }
    }
}

/// A counted pointer to an object.
pub type Ptr = Arc<Obj>;

/// A context running on a root range, with its TLB: page → (frame, generation, writable).
struct Context {
    root: Ptr,
    tlb: BTreeMap<u64, (u64, u64, bool)>,
}

/// An access the mappings do not allow (the program would be stopped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

thread_local! {
    /// Locks this thread holds (work is injected only when it holds none).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

type Work = Box<dyn FnOnce(&Sim) + Send>;

/// The simulated machine.
pub struct Sim {
    mem: Arc<Mutex<Mem>>,
    next_id: Mutex<u64>,
    objects: Mutex<Vec<Weak<Obj>>>,
    contexts: Mutex<Vec<Option<Context>>>,
    pending: Mutex<Option<(u32, Work)>>,
    pub faults: Mutex<u64>,
    pub shootdowns: Mutex<u64>,
}

impl Host for Sim {
    type Frame = Frame;
    type Tables = Tables;
    type Object = Obj;

    fn addr(frame: &Frame) -> u64 {
        frame.0.addr
    }

    fn id(object: &Obj) -> u64 {
        object.id
    }

    fn with_segment<R>(
        &self,
        object: &Obj,
        f: impl FnOnce(&mut SegmentState<Sim>) -> R,
    ) -> Option<R> {
        match &object.body {
            Body::Segment(m) => Some(self.locked(m, f)),
            Body::Range(_) => None,
        }
    }

    fn with_range<R>(&self, object: &Obj, f: impl FnOnce(&mut RangeState<Sim>) -> R) -> Option<R> {
        match &object.body {
            Body::Range(m) => Some(self.locked(m, f)),
            Body::Segment(_) => None,
        }
    }

    fn zeroed(&self) -> Option<Frame> {
        self.frame(0)
    }

    fn copy(&self, frame: &Frame) -> Option<Frame> {
        let value = self.mem.lock().unwrap().frames.get(&frame.0.addr).map(|&(_, v)| v);
        match value {
            Some(v) => self.frame(v),
            None => {
                self.violation(format!("copy of the free frame {:#x}", frame.0.addr));
                None
            }
        }
    }

    fn shootdown(&self, range: &Obj) -> bool {
        assert_eq!(DEPTH.get(), 0, "shootdown with a lock held");
        *self.shootdowns.lock().unwrap() += 1;
        for context in self.contexts.lock().unwrap().iter_mut().flatten() {
            let root = &context.root;
            if root.id == range.id || links(root).iter().any(|(_, (w, _))| ptr_is(w, range)) {
                context.tlb.clear();
            }
        }
        true
    }
}

fn ptr_is(w: &Weak<Obj>, o: &Obj) -> bool {
    w.upgrade().is_some_and(|p| p.id == o.id)
}

/// A root's links (read as the MMU does, without the range's lock protocol).
fn links(root: &Obj) -> BTreeMap<u64, (Weak<Obj>, Perms)> {
    match &root.body {
        Body::Range(r) => r.lock().unwrap().tables().links.clone(),
        Body::Segment(_) => BTreeMap::new(),
    }
}

impl Sim {
    /// A machine with nothing allocated.
    pub fn new() -> Sim {
        Sim {
            mem: Arc::default(),
            next_id: Mutex::new(0),
            objects: Mutex::default(),
            contexts: Mutex::default(),
            pending: Mutex::new(None),
            faults: Mutex::new(0),
            shootdowns: Mutex::new(0),
        }
    }

    /// At most `frames` more frames can be allocated from now on.
    pub fn limit_frames(&self, frames: usize) {
        self.mem.lock().unwrap().budget = Some(frames);
    }

    fn locked<T, R>(&self, m: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        if DEPTH.get() == 0 {
            self.run_pending();
        }
        DEPTH.set(DEPTH.get() + 1);
        let r = f(&mut m.lock().unwrap());
        DEPTH.set(DEPTH.get() - 1);
        r
    }

    /// Runs `work` just before the `after`-th lock taken from now on with no lock held
    /// (1: the next), as another core would between two steps of an operation.
    pub fn interfere(&self, after: u32, work: impl FnOnce(&Sim) + Send + 'static) {
        *self.pending.lock().unwrap() = Some((after.max(1), Box::new(work)));
    }

    /// Runs injected work now if it has not run yet; whether there was some.
    pub fn flush_pending(&self) -> bool {
        let work = self.pending.lock().unwrap().take();
        work.map(|(_, w)| w(self)).is_some()
    }

    fn run_pending(&self) {
        let work = {
            let mut pending = self.pending.lock().unwrap();
            match pending.as_mut() {
                Some((n, _)) if *n > 1 => {
                    *n -= 1;
                    None
                }
                Some(_) => pending.take().map(|(_, w)| w),
                None => None,
            }
        };
        if let Some(work) = work {
            work(self);
        }
    }

    fn frame(&self, value: u64) -> Option<Frame> {
        let (addr, _) = self.mem.lock().unwrap().alloc(value)?;
        Some(Frame(Arc::new(FrameBox { addr, mem: self.mem.clone() })))
    }

    fn violation(&self, what: String) {
        self.mem.lock().unwrap().violations.push(what);
    }

    /// What went wrong so far: frames freed while mapped, stale translations used, ...
    pub fn violations(&self) -> Vec<String> {
        self.mem.lock().unwrap().violations.clone()
    }

    /// Frames allocated and not freed.
    pub fn live_frames(&self) -> usize {
        self.mem.lock().unwrap().frames.len()
    }

    /// Objects not freed.
    pub fn live_objects(&self) -> usize {
        self.objects.lock().unwrap().iter().filter(|w| w.strong_count() > 0).count()
    }

    /// The live segments.
    pub fn segments(&self) -> Vec<Ptr> {
        let all: Vec<Ptr> = self.objects.lock().unwrap().iter().filter_map(Weak::upgrade).collect();
        all.into_iter().filter(|o| matches!(o.body, Body::Segment(_))).collect()
    }

    fn object(&self, body: Body) -> Ptr {
        let id = {
            let mut next = self.next_id.lock().unwrap();
            *next += 1;
            *next
        };
        let ptr = Arc::new(Obj { id, body });
        self.objects.lock().unwrap().push(Arc::downgrade(&ptr));
        ptr
    }

    /// `segment_alloc` of `pages` pages.
    pub fn segment(&self, pages: u64) -> Ptr {
        let state = SegmentState::new(pages * P).expect("small segment");
        self.object(Body::Segment(Mutex::new(state)))
    }

    fn range(&self, span: u64) -> Ptr {
        let tables =
            Tables { mem: self.mem.clone(), entries: BTreeMap::new(), links: BTreeMap::new() };
        let map = AddressRange::new(span, GRAN).expect("valid span");
        self.object(Body::Range(Mutex::new(RangeState::new(map, tables))))
    }

    /// `ar_alloc(ROOT)`.
    pub fn root(&self) -> Ptr {
        self.range(ROOT_SLOTS * GRAN)
    }

    /// `ar_alloc(SLOT)`.
    pub fn slot(&self) -> Ptr {
        self.range(GRAN)
    }

    /// Whether `ar` is a root range.
    pub fn is_root(&self, ar: &Obj) -> bool {
        self.with_range(ar, |s| s.map().span() > GRAN).unwrap_or(false)
    }

    /// The page values of a segment (0 for untouched pages), read under its lock.
    pub fn contents(&self, seg: &Obj) -> Vec<u64> {
        let frames = self.with_segment(seg, |s| s.frames().unwrap()).unwrap();
        let mem = self.mem.lock().unwrap();
        let value = |f: &Frame| mem.frames.get(&f.0.addr).map_or(u64::MAX, |&(_, v)| v);
        frames.iter().map(|f| f.as_ref().map_or(0, value)).collect()
    }

    /// As `corey.rs`'s `edit_range`: the edit, then `link` on the tables under the same
    /// lock; a shootdown if anything was taken out, and only then the frames and objects go.
    fn edit(
        &self,
        ar: &Ptr,
        target: Ptr,
        edit: impl FnOnce(&mut RangeState<Sim>, Ptr) -> Result<vm::Edited<Sim>, ArError>,
        link: impl FnOnce(&mut Tables),
    ) -> Result<(), ArError> {
        let edited = self
            .with_range(ar, |s| {
                let edited = edit(s, target)?;
                link(s.tables_mut());
                Ok(edited)
            })
            .expect("a range")?;
        if edited.needs_shootdown() {
            self.shootdown(ar);
        }
        drop(edited);
        Ok(())
    }

    /// `ar_set_seg`.
    pub fn set_seg(
        &self,
        ar: &Ptr,
        va: u64,
        seg: &Ptr,
        first_page: u64,
        pages: u64,
        perms: Perms,
    ) -> Result<(), ArError> {
        let edit =
            |s: &mut RangeState<Sim>, target| s.set_seg(self, target, va, first_page, pages, perms);
        self.edit(ar, seg.clone(), edit, |_| {})
    }

    /// `ar_set_ar`: splices the slot range `slot` into the root `root` at `va`.
    pub fn set_ar(&self, root: &Ptr, va: u64, slot: &Ptr, perms: Perms) -> Result<(), ArError> {
        assert!(self.is_root(root) && !self.is_root(slot), "a slot into a root");
        // As the kernel's `install_slot`: the root's entry carries the splice's rights.
        let link = (Arc::downgrade(slot), perms);
        let id = slot.id;
        let edit = |s: &mut RangeState<Sim>, target| s.edit(target, |r| r.set_ar(va, id, perms));
        self.edit(root, slot.clone(), edit, |t| {
            t.links.insert(va, link);
        })
    }

    /// `segment_copy(COW)`.
    pub fn copy_cow(&self, seg: &Ptr) -> Ptr {
        let copy = vm::copy_on_write(self, seg).expect("a segment");
        self.object(Body::Segment(Mutex::new(copy)))
    }

    /// `segment_copy(PLAIN)`: every touched page copied now.
    pub fn copy_plain(&self, seg: &Ptr) -> Ptr {
        let (frames, nbytes) =
            self.with_segment(seg, |s| (s.frames().unwrap(), s.nbytes())).unwrap();
        let mut copy = SegmentState::new(nbytes).unwrap();
        for (index, frame) in (0..).zip(&frames) {
            if let Some(frame) = frame {
                copy.set_frame(index, self.copy(frame).unwrap()).unwrap();
            }
        }
        self.object(Body::Segment(Mutex::new(copy)))
    }

    /// `segment_set_nbytes` to `pages` pages.
    pub fn resize(&self, seg: &Ptr, pages: u64) {
        vm::set_nbytes(self, seg, pages * P).expect("a segment");
    }

    /// A context starts on `root`; its index.
    pub fn run(&self, root: &Ptr) -> usize {
        let mut contexts = self.contexts.lock().unwrap();
        contexts.push(Some(Context { root: root.clone(), tlb: BTreeMap::new() }));
        contexts.len() - 1
    }

    /// The context ends (its core switches tables, which flushes its TLB).
    pub fn end(&self, context: usize) {
        let gone = self.contexts.lock().unwrap()[context].take();
        drop(gone);
    }

    /// A store of `value` at `va` by `context`.
    pub fn write(&self, context: usize, va: u64, value: u64) -> Result<(), Refused> {
        self.access(context, va, Some(value)).map(|_| ())
    }

    /// A load at `va` by `context`.
    pub fn read(&self, context: usize, va: u64) -> Result<u64, Refused> {
        self.access(context, va, None)
    }

    /// One access as the MMU and the kernel do it: the TLB, else a walk of the root's
    /// tables (into a linked slot's), else a soft page fault and again.
    fn access(&self, context: usize, va: u64, store: Option<u64>) -> Result<u64, Refused> {
        let write = store.is_some();
        let page = va & !(P - 1);
        let root = self.contexts.lock().unwrap()[context].as_ref().expect("running").root.clone();
        for _ in 0..8 {
            let cached =
                self.contexts.lock().unwrap()[context].as_ref().unwrap().tlb.get(&page).copied();
            let hit = match cached {
                Some((addr, gen, w)) if w || !write => Some((addr, gen)),
                _ => self.walk(&root, page).filter(|&(_, _, p)| !write || p.write).map(
                    |(a, g, p)| {
                        let mut contexts = self.contexts.lock().unwrap();
                        let tlb = &mut contexts[context].as_mut().unwrap().tlb;
                        tlb.insert(page, (a, g, p.write));
                        (a, g)
                    },
                ),
            };
            if let Some((addr, gen)) = hit {
                return self.touch(addr, gen, store);
            }
            // A page fault drops the faulting address's TLB entry.
            self.contexts.lock().unwrap()[context].as_mut().unwrap().tlb.remove(&page);
            *self.faults.lock().unwrap() += 1;
            if vm::fault(self, &root, va, write) == vm::Fault::Refused {
                return Err(Refused);
            }
        }
        self.violation(format!("an access at {va:#x} did not settle"));
        Err(Refused)
    }

    /// What `context` reaches at `va` with no fault (through its TLB, else its tables):
    /// the value there and whether a store would go through. A stale translation is
    /// recorded as a violation.
    pub fn peek(&self, context: usize, va: u64) -> Option<(u64, bool)> {
        let page = va & !(P - 1);
        let (root, cached) = {
            let contexts = self.contexts.lock().unwrap();
            let c = contexts[context].as_ref().expect("running");
            (c.root.clone(), c.tlb.get(&page).copied())
        };
        let (addr, gen, write) = match cached {
            Some(hit) => hit,
            None => self.walk(&root, page).map(|(a, g, p)| (a, g, p.write))?,
        };
        self.touch(addr, gen, None).ok().map(|value| (value, write))
    }

    /// The MMU's walk: the frame, its generation and the rights `page` maps with.
    fn walk(&self, root: &Obj, page: u64) -> Option<(u64, u64, Perms)> {
        let base = page & !(GRAN - 1);
        let (addr, perms) = match links(root).get(&base) {
            Some((slot, link)) => {
                let Some(slot) = slot.upgrade() else {
                    self.violation(format!("a root links a freed slot at {base:#x}"));
                    return None;
                };
                let Body::Range(r) = &slot.body else { return None };
                let (addr, perms) = r.lock().unwrap().tables().translate(page - base)?;
                (addr, perms.intersect(*link))
            }
            None => {
                let Body::Range(r) = &root.body else { return None };
                r.lock().unwrap().tables().translate(page)?
            }
        };
        let gen = self.mem.lock().unwrap().frames.get(&addr).map(|&(g, _)| g);
        match gen {
            Some(gen) => Some((addr, gen, perms)),
            None => {
                self.violation(format!("an entry maps the free frame {addr:#x}"));
                None
            }
        }
    }

    /// Reads or writes the frame a translation gave, which must still be that frame.
    fn touch(&self, addr: u64, gen: u64, store: Option<u64>) -> Result<u64, Refused> {
        let mut mem = self.mem.lock().unwrap();
        match mem.frames.get_mut(&addr) {
            Some((g, value)) if *g == gen => {
                if let Some(v) = store {
                    *value = v;
                }
                Ok(*value)
            }
            _ => {
                mem.violations.push(format!("a stale translation reached frame {addr:#x}"));
                Err(Refused)
            }
        }
    }
}
