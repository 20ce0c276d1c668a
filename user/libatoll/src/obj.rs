//! Corey's object calls (Figure 5), typed: shares, segments, address ranges, pcores and
//! devices, plus the initrd's files (which come back as segments). An object is named by
//! an [`ObjRef`] ⟨share, object⟩: the share must be in the caller's share set and hold
//! the object (Corey §4.2).

use crate::sys::{syscall3, syscall5};
use core::sync::atomic::{AtomicU64, Ordering};

use abi::{nr, ArSetAr, ArSetSeg, DeviceInfo, DeviceStat, Error, MappingInfo, PcoreRun, SysResult};

/// A reference to an object: ⟨share it is reached through, object⟩ (Corey §3.3, §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjRef {
    /// The share, which must be in the caller's share set.
    pub share: u64,
    /// The object, which must be in that share.
    pub object: u64,
}

impl ObjRef {
    /// ⟨share, object⟩.
    pub const fn new(share: u64, object: u64) -> ObjRef {
        ObjRef { share, object }
    }

    /// `object` reached through the caller's root share.
    pub fn root(object: u64) -> ObjRef {
        ObjRef { share: root_share(), object }
    }
}

/// The caller's root share (Corey §3.3: private to its core).
pub fn root_share() -> u64 {
    syscall3(nr::ROOT_SHARE, 0, 0, 0).unwrap_or(0)
}

/// The caller's root address range (its page faults resolve through it).
pub fn root_ar() -> u64 {
    syscall3(nr::ROOT_AR, 0, 0, 0).unwrap_or(0)
}

/// The share that holds the objects of the program's address space, if not the root
/// share (0): set while threads run ([`crate::threads`]), since their contexts each have a
/// root share of their own but edit one root range.
static HOME: AtomicU64 = AtomicU64::new(0);

/// Where the objects the root range maps are kept and new ones go (heap segments, shared
/// memory, mapped segments): the root share, or while threads run the share they all hold.
pub fn home_share() -> u64 {
    match HOME.load(Ordering::Acquire) {
        0 => root_share(),
        share => share,
    }
}

/// The home share if one is set (0: none, the root share serves).
pub(crate) fn current_home() -> u64 {
    HOME.load(Ordering::Acquire)
}

/// Sets the share [`home_share`] names (0: the root share again).
pub(crate) fn set_home_share(share: u64) {
    HOME.store(share, Ordering::Release);
}

/// The root address range as ⟨home share, range⟩: how the program edits its own address
/// space (the kernel keeps the range in the root share; `cfork` does the same for a child;
/// threads reach it through the share they hold in common).
pub fn root_ar_ref() -> ObjRef {
    ObjRef { share: home_share(), object: root_ar() }
}

/// `share_alloc`: a new share held by share `parent`. It is not in the share set until
/// [`set_add_share`] puts it there.
pub fn share_alloc(parent: u64) -> SysResult {
    syscall3(nr::SHARE_ALLOC, parent, 0, 0)
}

/// `share_addobj`: puts `obj` into `share` (one more reference).
pub fn share_addobj(share: u64, obj: ObjRef) -> SysResult {
    syscall3(nr::SHARE_ADDOBJ, share, obj.share, obj.object)
}

/// `share_delobj`: takes `obj` out of its share (one reference fewer; freed at zero).
pub fn share_delobj(obj: ObjRef) -> SysResult {
    syscall3(nr::SHARE_DELOBJ, obj.share, obj.object, 0)
}

/// `share_dupobj`: enters `obj` into `share` again under a fresh id, a descriptor (one
/// more reference, no new object); returns the id. `share_delobj` of it is `close`.
pub fn share_dupobj(share: u64, obj: ObjRef) -> SysResult {
    syscall3(nr::SHARE_DUPOBJ, share, obj.share, obj.object)
}

/// `self_drop`: takes `share` out of the caller's share set.
pub fn self_drop(share: u64) -> SysResult {
    syscall3(nr::SELF_DROP, share, 0, 0)
}

/// `set_add_share`: puts the share `share` (reached through a share of the set) into the
/// caller's share set, so objects can be named through it (Corey §3.3).
pub fn set_add_share(share: ObjRef) -> SysResult {
    syscall3(nr::SET_ADD_SHARE, share.share, share.object, 0)
}

/// A new share held by the root share and put into the share set: the usual way to make
/// a table other cores will be given (Corey §3.3 "they create a share and add the
/// share's ID to their private root share").
pub fn share_new() -> Result<u64, Error> {
    let root = root_share();
    let share = share_alloc(root)?;
    if let Err(e) = set_add_share(ObjRef::new(root, share)) {
        let _ = share_delobj(ObjRef::new(root, share));
        return Err(e);
    }
    Ok(share)
}

/// Frees a share made by [`share_new`]: out of the set and out of the root share.
pub fn share_free(share: u64) {
    let _ = self_drop(share);
    let _ = share_delobj(ObjRef::root(share));
}

/// `obj_revoke`: takes `obj`'s object back from every other share on every core; the
/// entry `obj` itself stays. Returns the cores that did not acknowledge it in time (bit
/// i: core i; 0 when every core applied it).
pub fn obj_revoke(obj: ObjRef) -> SysResult {
    syscall3(nr::OBJ_REVOKE, obj.share, obj.object, 0)
}

/// `obj_get_name`: the object's kind code (`abi::ObjectKind`).
pub fn obj_get_name(obj: ObjRef) -> SysResult {
    syscall3(nr::OBJ_GET_NAME, obj.share, obj.object, 0)
}

/// `segment_alloc`: `nbytes` of zero pages (filled on first touch, from this core's
/// memory), placed in `share`.
pub fn segment_alloc(share: u64, nbytes: u64) -> SysResult {
    syscall3(nr::SEGMENT_ALLOC, share, nbytes, 0)
}

/// `segment_copy`: a copy of `seg` placed in `share`; `mode` is an `abi::copy_mode`
/// (`PLAIN` copies now, `COW` shares pages until either side writes; Corey §4.3).
pub fn segment_copy(share: u64, seg: ObjRef, mode: u64) -> SysResult {
    syscall5(nr::SEGMENT_COPY, share, seg.share, seg.object, mode, 0)
}

/// `segment_get_nbytes`: the segment's size.
pub fn segment_get_nbytes(seg: ObjRef) -> SysResult {
    syscall3(nr::SEGMENT_GET_NBYTES, seg.share, seg.object, 0)
}

/// `segment_set_nbytes`: grows or shrinks the segment.
pub fn segment_set_nbytes(seg: ObjRef, nbytes: u64) -> SysResult {
    syscall3(nr::SEGMENT_SET_NBYTES, seg.share, seg.object, nbytes)
}

/// `segment_read`: copies the segment's bytes from `offset` into `buf`; returns the count
/// (0 at the end).
pub fn segment_read(seg: ObjRef, offset: u64, buf: &mut [u8]) -> SysResult {
    syscall5(
        nr::SEGMENT_READ,
        seg.share,
        seg.object,
        offset,
        crate::sys::buf_addr(buf),
        buf.len() as u64,
    )
}

/// `ar_alloc`: a new, empty address range in `share`; `kind` is an `abi::ar_kind`
/// (`SLOT`: 1 GiB, for `ar_set_ar`; `ROOT`: spans the user half, for `pcore_run`).
pub fn ar_alloc(share: u64, kind: u64) -> SysResult {
    syscall3(nr::AR_ALLOC, share, kind, 0)
}

/// `ar_set_seg`: maps pages of a segment into an address range.
pub fn ar_set_seg(args: &ArSetSeg) -> SysResult {
    let words = args.to_words();
    syscall3(nr::AR_SET_SEG, words.as_ptr() as u64, 0, 0)
}

/// `ar_set_ar`: splices an address range into a 1 GiB slot of another.
pub fn ar_set_ar(args: &ArSetAr) -> SysResult {
    let words = args.to_words();
    syscall3(nr::AR_SET_AR, words.as_ptr() as u64, 0, 0)
}

/// `ar_get`: the id mapped at `va` in `ar` (0 if none).
pub fn ar_get(ar: ObjRef, va: u64) -> SysResult {
    syscall3(nr::AR_GET, ar.share, ar.object, va)
}

/// `ar_mappings` (Figure 5's `ar_get(ar)`): the range's mappings written into `out`;
/// returns how many there are (more than `out.len()` means the list was cut short).
pub fn ar_mappings(ar: ObjRef, out: &mut [MappingInfo]) -> Result<usize, Error> {
    // The kernel writes six plain words per mapping; `MappingInfo` has no fixed layout.
    // (At least one, so the pointer is a real one even when `out` is empty.)
    let mut words = alloc::vec![[0u64; 6]; out.len().max(1)];
    let total = syscall5(
        nr::AR_MAPPINGS,
        ar.share,
        ar.object,
        words.as_mut_ptr() as u64,
        out.len() as u64,
        0,
    )?;
    for (m, w) in out.iter_mut().zip(words.iter()).take(total as usize) {
        *m = MappingInfo::from_words(*w);
    }
    Ok(total as usize)
}

/// Soft page faults the calling context (this thread, or this `cfork` context) has taken
/// so far.
pub fn page_faults() -> u64 {
    syscall3(nr::PAGE_FAULTS, abi::faults::CONTEXT, 0, 0).unwrap_or(0)
}

/// Soft page faults every context of this address space (the program's threads, McRT's
/// processors) has taken so far: Linux's `getrusage(RUSAGE_SELF).ru_minflt`.
pub fn address_space_faults() -> u64 {
    syscall3(nr::PAGE_FAULTS, abi::faults::ADDRESS_SPACE, 0, 0).unwrap_or(0)
}

/// `pcore_alloc`: the pcore object of core `core`, placed in `share` (Corey §4.4); one
/// live pcore object per core (`NotPermitted` while another names it).
pub fn pcore_alloc(share: u64, core: usize) -> SysResult {
    syscall3(nr::PCORE_ALLOC, share, core as u64, 0)
}

/// `pcore_run`: starts a context on the pcore's core (never the caller's) and returns at
/// once (Corey §4.4).
pub fn pcore_run(run: &PcoreRun) -> SysResult {
    let words = run.to_words();
    syscall3(nr::PCORE_RUN, words.as_ptr() as u64, 0, 0)
}

/// `pcore_status`: the raw status word (`abi::pcore_status`), detail bits included.
pub fn pcore_status_word(pcore: ObjRef) -> SysResult {
    syscall3(nr::PCORE_STATUS, pcore.share, pcore.object, 0)
}

/// `pcore_status`: what the pcore is doing, as a [`Status`].
pub fn pcore_status(pcore: ObjRef) -> Result<Status, Error> {
    syscall3(nr::PCORE_STATUS, pcore.share, pcore.object, 0).map(Status::from_word)
}

/// `pcore_set_interval`: the pcore's time-slice period, in Hz (10–1000).
pub fn pcore_set_interval(pcore: ObjRef, hz: u64) -> SysResult {
    syscall3(nr::PCORE_SET_INTERVAL, pcore.share, pcore.object, hz)
}

/// `pcore_halt`: stops the context running on the pcore.
pub fn pcore_halt(pcore: ObjRef) -> SysResult {
    syscall3(nr::PCORE_HALT, pcore.share, pcore.object, 0)
}

/// `program_run`: loads the initrd program `line` names (`prog args...`) onto the pcore's
/// core as a new program. On another core it returns [`Status::Running`] at once (poll
/// [`pcore_status`]); on the caller's own core the caller waits and gets the program's
/// end status.
pub fn program_run(pcore: ObjRef, line: &str) -> Result<Status, Error> {
    program_run_giving(pcore, line, 0)
}

/// [`program_run`], handing the program the object `give` of the caller's root share (0:
/// none): it lands in the program's root share, its id the program's start argument
/// ([`crate::devices::given_object`]). How `init` hands on the machine device.
pub fn program_run_giving(pcore: ObjRef, line: &str, give: u64) -> Result<Status, Error> {
    let word = syscall5(
        nr::PROGRAM_RUN,
        pcore.share,
        pcore.object,
        crate::sys::buf_addr(line.as_bytes()),
        line.len() as u64,
        give,
    )?;
    Ok(if word == 0 { Status::Running } else { Status::from_word(word) })
}

/// `device_list`: the machine's devices written into `out`; returns how many there are.
pub fn device_list(out: &mut [DeviceInfo]) -> Result<usize, Error> {
    let mut words = [[0u64; 4]; 64];
    let max = out.len().min(words.len());
    let total = syscall3(nr::DEVICE_LIST, words.as_mut_ptr() as u64, max as u64, 0)?;
    for (d, w) in out.iter_mut().zip(words.iter()).take(max.min(total as usize)) {
        *d = DeviceInfo { hwid: w[0], kind: w[1], core: w[2], name: w[3] };
    }
    Ok(total as usize)
}

/// `device_alloc`: a device object for hardware device `hwid`, placed in `share`.
pub fn device_alloc(share: u64, hwid: u64) -> SysResult {
    syscall3(nr::DEVICE_ALLOC, share, hwid, 0)
}

/// `device_stat`: the device's counters.
pub fn device_stat(dev: ObjRef) -> Result<DeviceStat, Error> {
    let mut w = [0u64; 4];
    syscall3(nr::DEVICE_STAT, dev.share, dev.object, w.as_mut_ptr() as u64)?;
    Ok(DeviceStat { hwid: w[0], kind: w[1], count: w[2], detail: w[3] })
}

/// `file_open`: a new read-only segment in `share` holding the initrd file `path` (its
/// size is the file's).
pub fn file_open(share: u64, path: &str) -> SysResult {
    syscall3(nr::FILE_OPEN, share, crate::sys::buf_addr(path.as_bytes()), path.len() as u64)
}

/// What a pcore is doing (`abi::pcore_status`). The `Debug` form is the kernel console's
/// (`Exited(0)`, `Faulted(14)`, `TimedOut`), which `make bench` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Never run, or its last context was collected.
    Idle,
    /// Started and not ended yet (perhaps still queued).
    Running,
    /// The context called `exit(code)`.
    Exited(i32),
    /// The context took exception `vector`.
    Faulted(u32),
    /// The context ran past its time limit.
    TimedOut,
    /// `pcore_halt` stopped it.
    Halted,
    /// It could not start.
    Failed,
}

impl Status {
    /// Decodes a status word.
    pub fn from_word(word: u64) -> Status {
        use abi::pcore_status as s;
        let detail = word as u32;
        match s::state(word) {
            s::IDLE => Status::Idle,
            s::RUNNING => Status::Running,
            s::EXITED => Status::Exited(detail as i32),
            s::FAULTED => Status::Faulted(detail),
            s::TIMED_OUT => Status::TimedOut,
            s::HALTED => Status::Halted,
            _ => Status::Failed,
        }
    }

    /// Whether it ended with `exit(0)`.
    pub fn ok(&self) -> bool {
        *self == Status::Exited(0)
    }

    /// Whether it ended, and not with `exit(0)`: a fault, its time limit, a halt, a
    /// failed start or an exit code that reports a failure (a panic's 101). A peer that
    /// ended so will not do what others wait for.
    pub fn ended_badly(&self) -> bool {
        !matches!(self, Status::Idle | Status::Running | Status::Exited(0))
    }
}

/// Every mapping of `ar` (asks again with a bigger buffer while the list grows).
pub fn ar_mappings_all(ar: ObjRef) -> Result<alloc::vec::Vec<MappingInfo>, Error> {
    let mut list = alloc::vec![MappingInfo::default(); 16];
    loop {
        let total = ar_mappings(ar, &mut list)?;
        if total <= list.len() {
            list.truncate(total);
            return Ok(list);
        }
        list.resize(total, MappingInfo::default());
    }
}

/// `pcore_add_device`: `dev` joins the devices the pcore polls as a kernel core (Corey
/// §4.4); returns how many it has now.
pub fn pcore_add_device(pcore: ObjRef, dev: ObjRef) -> SysResult {
    syscall5(nr::PCORE_ADD_DEVICE, pcore.share, pcore.object, dev.share, dev.object, 0)
}

/// `device_buf`: feeds pages of segment `seg` from byte `offset` (page-aligned) to the
/// device as `kind` (`abi::sysdev::buf_type`), Corey §4.4.
pub fn device_buf(dev: ObjRef, seg: ObjRef, offset: u64, kind: u64) -> SysResult {
    let arg = abi::sysdev::buf_arg(offset, kind);
    syscall5(nr::DEVICE_BUF, dev.share, dev.object, seg.share, seg.object, arg)
}

/// `device_conf`: sets `conf` (`abi::sysdev::conf`) of the device to `value` (Corey §4.4).
pub fn device_conf(dev: ObjRef, conf: u64, value: u64) -> SysResult {
    syscall5(nr::DEVICE_CONF, dev.share, dev.object, conf, value, 0)
}
