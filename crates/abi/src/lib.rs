//! The Atoll system-call ABI: one source of truth for the kernel and user programs.
//!
//! A call is made with `syscall`: the number in `rax`, up to five arguments in `rdi`,
//! `rsi`, `rdx`, `r10`, `r8`. The result comes back in `rax` as a [`SysResult`] word:
//! non-negative values are successes, negative values are `-(Error as i64)`. No call
//! panics the kernel; every bad argument is an error code.
#![no_std]
#![forbid(unsafe_code)]

/// Longest argument string a program is started with, in bytes (`args` copies at most
/// this); the kernel refuses a longer one with `InvalidArgument` rather than cut it.
pub const ARGS_MAX: usize = 256;

/// The exit status of a test program that could check nothing on this machine (one core,
/// too little memory): automake's "skipped" code. The kernel test that ran it reports
/// `TEST SKIP`, never a pass; the program prints why.
pub const EXIT_SKIPPED: i32 = 77;

mod blocks;
pub use blocks::{
    ArSetAr, ArSetSeg, DeviceInfo, DeviceStat, Locality, MappingInfo, PcoreRun, ThreadCreate,
    ThreadStat,
};

/// Declares an enum whose discriminants are ABI codes, each variant once with its code, and
/// generates what converts between the two: `from_code`, `code` and `ALL`. A hand-written
/// `from_code` repeated every variant, and a variant added to the enum but not to the match
/// would have decoded as "no such code".
macro_rules! abi_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident: $repr:ident {
            $($(#[$variant_meta:meta])* $variant:ident = $code:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[repr($repr)]
        pub enum $name {
            $($(#[$variant_meta])* $variant = $code,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value with ABI code `code`, if there is one.
            pub const fn from_code(code: $repr) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Its ABI code.
            pub const fn code(self) -> $repr {
                self as $repr
            }
        }
    };
}

/// System call numbers.
pub mod nr {
    /// `null()`: does nothing (measures the syscall path).
    pub const NULL: u64 = 0;
    /// `write(ptr, len)`: writes bytes to the console; returns the count.
    pub const WRITE: u64 = 1;
    /// `exit(code)`: ends the program on this core; never returns.
    pub const EXIT: u64 = 2;
    /// `pcore_current()`: the index of the core running the caller (Corey §4.4).
    pub const PCORE_CURRENT: u64 = 3;
    /// `cycles()`: the time-stamp counter.
    pub const CYCLES: u64 = 4;
    /// `args(ptr, len)`: copies the program's argument string; returns its length.
    pub const ARGS: u64 = 5;
    /// `root_share()`: the id of the caller's root share (Corey §3.3).
    pub const ROOT_SHARE: u64 = 6;
    /// `root_ar()`: the id of the caller's root address range (faults resolve through it).
    pub const ROOT_AR: u64 = 7;
    /// `share_alloc(parent)`: a new share, placed in share `parent`; returns its id.
    pub const SHARE_ALLOC: u64 = 8;
    /// `share_addobj(share, ref_share, ref_obj)`: puts the object ⟨ref_share, ref_obj⟩ into `share`.
    pub const SHARE_ADDOBJ: u64 = 9;
    /// `share_delobj(ref_share, ref_obj)`: takes the object out of `ref_share`.
    pub const SHARE_DELOBJ: u64 = 10;
    /// `self_drop(share)`: removes `share` from the caller's share set.
    pub const SELF_DROP: u64 = 11;
    /// `obj_get_name(ref_share, ref_obj)`: the object's kind (see [`crate::ObjectKind`]).
    pub const OBJ_GET_NAME: u64 = 12;
    /// `segment_alloc(share, nbytes)`: a new segment of zero-filled pages (filled on first
    /// touch) from this core's memory, placed in `share`; returns its id.
    pub const SEGMENT_ALLOC: u64 = 13;
    /// `segment_get_nbytes(ref_share, ref_obj)`: the segment's size in bytes.
    pub const SEGMENT_GET_NBYTES: u64 = 14;
    /// `segment_set_nbytes(ref_share, ref_obj, nbytes)`: grows or shrinks the segment.
    pub const SEGMENT_SET_NBYTES: u64 = 15;
    /// `ar_alloc(share, kind)`: a new, empty address range placed in `share`; returns its
    /// id. [`ar_kind`] `SLOT` makes a 1 GiB range for `ar_set_ar`, `ROOT` one a pcore runs on.
    pub const AR_ALLOC: u64 = 16;
    /// `ar_set_seg(&ArSetSeg)`: maps pages of a segment into an address range.
    pub const AR_SET_SEG: u64 = 17;
    /// `ar_set_ar(&ArSetAr)`: splices an address range into another (1 GiB slots).
    pub const AR_SET_AR: u64 = 18;
    /// `ar_get(ref_share, ref_obj, va)`: the target id mapped at `va` (0 if none).
    pub const AR_GET: u64 = 19;
    /// `page_faults(which)`: soft page faults taken so far, by the calling context
    /// ([`faults::CONTEXT`], 0) or by every context of its address space (its program's
    /// threads: [`faults::ADDRESS_SPACE`], 1); anything else is `InvalidArgument`.
    pub const PAGE_FAULTS: u64 = 20;
    /// `locality_get(core, &mut Locality)`: where `core` sits and what it costs to reach
    /// from the caller's core, from the system knowledge base (Corey §4.4, Multikernel §4.9).
    pub const LOCALITY_GET: u64 = 21;
    /// `segment_copy(share, ref_share, ref_obj, mode)`: a new segment holding a copy of
    /// the segment's pages, placed in `share`; [`copy_mode`] `PLAIN` copies now, `COW`
    /// shares the pages until either side writes one (Corey §4.3).
    pub const SEGMENT_COPY: u64 = 22;
    /// `pcore_alloc(share, core)`: the pcore object of physical core `core`, placed in
    /// `share` (Corey §4.4). One pcore object per physical core at a time: `NotPermitted`
    /// while another is live, `InvalidArgument` for a core that is not online.
    pub const PCORE_ALLOC: u64 = 23;
    /// `pcore_run(&PcoreRun)`: starts a user context on the pcore's core (entry, stack,
    /// root address range, share set, one argument in `rdi`) and returns at once. A
    /// context on the caller's own core is refused (`NotPermitted`): it is busy running
    /// the caller. `NotPermitted` too while the pcore runs something.
    pub const PCORE_RUN: u64 = 24;
    /// `pcore_status(ref_share, ref_obj)`: what the pcore is doing, a [`PcoreStatus`] word.
    pub const PCORE_STATUS: u64 = 25;
    /// `pcore_set_interval(ref_share, ref_obj, hz)`: the pcore's time-slice period (its
    /// tick while it runs a context; 10–1000 Hz). A halt is seen within one period.
    pub const PCORE_SET_INTERVAL: u64 = 26;
    /// `pcore_halt(ref_share, ref_obj)`: stops the context running on the pcore (within one
    /// time slice; at once if it is the caller).
    pub const PCORE_HALT: u64 = 27;
    /// `device_list(&mut [DeviceInfo], max)`: the machine's devices; returns how many
    /// there are (writes at most `max`).
    pub const DEVICE_LIST: u64 = 28;
    /// `device_alloc(share, hwid)`: a device object for device `hwid`, placed in `share`.
    pub const DEVICE_ALLOC: u64 = 29;
    /// `device_stat(ref_share, ref_obj, &mut DeviceStat)`: the device's counters.
    pub const DEVICE_STAT: u64 = 30;
    /// `set_add_share(ref_share, ref_obj)`: adds a share reachable through the caller's
    /// share set to the set itself (Corey §3.3: how a core takes up a share it was given).
    pub const SET_ADD_SHARE: u64 = 31;
    /// `ar_mappings(ref_share, ref_obj, &mut [MappingInfo], max)`: the range's mappings
    /// (Figure 5's `ar_get(ar)`); returns how many there are (writes at most `max`).
    pub const AR_MAPPINGS: u64 = 32;
    /// `file_list(buf, len)`: the initrd's file names, one per line; returns the bytes
    /// the whole list needs (writes at most `len`).
    pub const FILE_LIST: u64 = 33;
    /// `file_open(share, path, path_len)`: a new read-only segment holding the initrd
    /// file's bytes (its `nbytes` is the file's size), placed in `share`.
    pub const FILE_OPEN: u64 = 34;
    /// `segment_read(ref_share, ref_obj, offset, buf, len)`: copies bytes of the segment
    /// from `offset` into `buf`; returns the count (0 at the end).
    pub const SEGMENT_READ: u64 = 35;
    /// `program_run(pcore_share, pcore_obj, line, line_len, give)`: loads the initrd
    /// program the line names (`prog args...`) as a new program on the pcore's core. On
    /// another core it returns at once (see `pcore_status`); on the caller's own core the
    /// caller waits until the program ends (the pcore is lent to it). `give`, if not 0, is
    /// an object of the caller's root share that the new program receives in its own root
    /// share, its id passed as the program's start argument (`rdi` of `_start`): how `init`
    /// hands the machine device on. Returns 0, or for a program run on the caller's core
    /// its [`PcoreStatus`] word.
    pub const PROGRAM_RUN: u64 = 36;
    /// `cores_online()`: how many cores are running Atoll.
    pub const CORES_ONLINE: u64 = 37;
    /// `kernel_command(machine_share, machine_obj, line, len)`: runs one line of the kernel
    /// console (its diagnostics and in-kernel experiments: `mem`, `monitor`, `bench ...`);
    /// output goes to the console. A capability: ⟨machine_share, machine_obj⟩ must name a
    /// device object of kind [`device_kind::MACHINE`], else `NotPermitted`. A line the
    /// console refuses (unknown command, bad arguments) is `InvalidArgument`; `Busy` while
    /// another program's line runs (one at a time, machine-wide).
    pub const KERNEL_COMMAND: u64 = 38;
    /// `poweroff(machine_share, machine_obj)`: turns the machine off; the same capability
    /// as `kernel_command`.
    pub const POWEROFF: u64 = 39;
    /// `console_read(keyboard_share, keyboard_obj, buf, len)`: bytes typed on the serial
    /// console since the last call (never waits; returns 0 when there are none). A
    /// capability: ⟨keyboard_share, keyboard_obj⟩ must name a device object of kind
    /// [`device_kind::KEYBOARD`], else `NotPermitted`.
    pub const CONSOLE_READ: u64 = 40;
    /// `share_dupobj(share, ref_share, ref_obj)`: enters the object ⟨ref_share, ref_obj⟩
    /// into `share` again under a fresh id (a descriptor: one more reference, no new
    /// object; Corey §3.3, the talk's `dup`); returns the id. `share_delobj` of the id is
    /// `close`. Shares cannot be duplicated (`InvalidArgument`).
    pub const SHARE_DUPOBJ: u64 = 41;
    /// `thread_create(&ThreadCreate)`: a new thread (a user context on a root address
    /// range with its own registers, FPU state and share set) on a chosen core or where
    /// the scheduler places it; returns the thread object's id, placed in the given share.
    pub const THREAD_CREATE: u64 = 42;
    /// `thread_join(ref_share, ref_obj)`: waits until the thread ends; returns its
    /// [`pcore_status`] word (`EXITED | code`, `FAULTED | vector`, ...).
    pub const THREAD_JOIN: u64 = 43;
    /// `thread_status(ref_share, ref_obj)`: the thread's [`pcore_status`] word now
    /// (`RUNNING` while it lives).
    pub const THREAD_STATUS: u64 = 44;
    /// `yield()`: the caller goes to the back of its core's run queue.
    pub const YIELD: u64 = 45;
    /// `sleep(us)`: the caller sleeps at least `us` microseconds (at most one minute).
    pub const SLEEP: u64 = 46;
    /// `wait(addr, expected, timeout_us)`: if the 32-bit word at `addr` still holds
    /// `expected`, sleeps until a `wake` on that word or the timeout (0: none). Returns a
    /// [`wait_result`].
    pub const WAIT: u64 = 47;
    /// `wake(addr, n)`: wakes up to `n` threads of the caller's address space waiting on
    /// the word at `addr`, first come first woken; returns how many it woke on the
    /// caller's own core (waiters on other cores are woken by message, within `n`).
    pub const WAKE: u64 = 48;
    /// `thread_set_affinity(ref_share, ref_obj, mask)`: the cores (bit i: core i) the
    /// thread may run on; ⟨0, 0⟩ is the caller. A thread on a core outside the set moves
    /// at its next switch.
    pub const THREAD_SET_AFFINITY: u64 = 49;
    /// `thread_stat(ref_share, ref_obj, &mut ThreadStat)`: where the thread is and how
    /// often it moved; ⟨0, 0⟩ is the caller.
    pub const THREAD_STAT: u64 = 50;
    /// `obj_revoke(ref_share, ref_obj)`: takes the object back from every share and share
    /// set on every core, by two-phase commit among the cores (Multikernel §4.8), except
    /// the entry ⟨ref_share, ref_obj⟩ itself, which stays. Every other holder loses it
    /// before its next call names an object; entries made afterwards are not touched.
    /// Returns the cores that did not acknowledge it in time (bit i: core i; 0 when every
    /// core applied it). Shares cannot be revoked (`InvalidArgument`); `Busy` if the cores
    /// did not agree (another revocation kept colliding), with nothing changed.
    pub const OBJ_REVOKE: u64 = 51;
    /// `set_fs_base(base)`: the calling thread's FS base from now on (its thread-local
    /// storage pointer: `fs:[x]` reads `base + x`), kept with the thread's registers
    /// through every switch and migration. `base` must lie in the user half
    /// ([`crate::fs_base_allowed`]; 0 is allowed and means none), else `InvalidArgument`.
    /// Returns 0.
    pub const SET_FS_BASE: u64 = 52;
    /// `device_send(dev_share, dev_obj, buf, len)`: hands one Ethernet frame of `len`
    /// bytes at `buf` (destination MAC first, no checksum; 14 to 1514 bytes, else
    /// `InvalidArgument`) to the network device `dev` (a device object of a PCI function
    /// that has a driver: the virtio-net; another device is `NotPermitted`), on the
    /// caller's own core (a trap, as against a syscall device of a kernel core). `Busy`
    /// while every send buffer is in flight. Returns 0.
    pub const DEVICE_SEND: u64 = 53;
    /// `device_receive(dev_share, dev_obj, buf, len)`: the next Ethernet frame the network
    /// device `dev` received, copied to `buf` (cut to `len` bytes); returns the frame's
    /// whole length (more than `len`: it was cut), or 0 if none has come. Never waits.
    pub const DEVICE_RECEIVE: u64 = 54;
    /// `pcore_add_device(pcore_share, pcore_obj, dev_share, dev_obj)`: adds the device to
    /// the list a kernel core polls (Corey §4.4). A pcore that is running is `Busy`; a
    /// device a kernel core cannot poll is `InvalidArgument`; past
    /// [`crate::sysdev::PCORE_DEVICES_MAX`] devices `NoResources`.
    pub const PCORE_ADD_DEVICE: u64 = 55;
    /// `device_buf(dev_share, dev_obj, seg_share, seg_obj, offset | type << 56)`: feeds
    /// pages of a segment to a device (Corey §4.4): for a syscall device, its ring
    /// ([`crate::sysdev::buf_type::RING`], one page at `offset`) or its packet area
    /// (`PACKETS`, from `offset` to the segment's end, at most
    /// [`crate::sysdev::PACKET_AREA_MAX`] bytes). `offset` is page-aligned.
    pub const DEVICE_BUF: u64 = 56;
    /// `device_conf(dev_share, dev_obj, conf, value)`: configures a device (Corey §4.4);
    /// for a syscall device, [`crate::sysdev::conf`].
    pub const DEVICE_CONF: u64 = 57;
    /// `fs_open(share, path, path_len, flags)`: opens the disk's file or directory `path`
    /// (absolute, `/` first) as a new open-file object placed in `share` (Corey §5: the
    /// library OS keeps descriptors in shares); returns its id. [`crate::fs::open`] flags.
    pub const FS_OPEN: u64 = 58;
    /// `fs_read(file_share, file_obj, buf, len, offset)`: reads up to `len` bytes of the
    /// open file from byte `offset`; returns how many (0 at the end).
    pub const FS_READ: u64 = 59;
    /// `fs_write(file_share, file_obj, buf, len, offset)`: writes `len` bytes at `offset`
    /// ([`crate::fs::APPEND`]: at the end), growing the file; returns the bytes written
    /// (fewer only when the disk filled). The file must be open with `WRITE`.
    pub const FS_WRITE: u64 = 60;
    /// `fs_stat(file_share, file_obj, out)`: writes a [`crate::fs::Stat`] (7 words) at `out`.
    pub const FS_STAT: u64 = 61;
    /// `fs_truncate(file_share, file_obj, len)`: cuts or extends (with a hole) the file to
    /// `len` bytes. The file must be open with `WRITE`.
    pub const FS_TRUNCATE: u64 = 62;
    /// `fs_readdir(file_share, file_obj, first, buf, len)`: the directory's entries from
    /// number `first` on, as many as fit in `len` bytes, in [`crate::fs::DirRecord`]
    /// format; returns how many (0 past the last).
    pub const FS_READDIR: u64 = 63;
    /// `fs_mkdir(path, path_len)`: makes a directory.
    pub const FS_MKDIR: u64 = 64;
    /// `fs_remove(path, path_len)`: removes a file's name, or an empty directory.
    pub const FS_REMOVE: u64 = 65;
    /// `fs_rename(from, from_len, to, to_len)`: renames, replacing a file or an empty
    /// directory at `to`.
    pub const FS_RENAME: u64 = 66;
    /// `fs_sync(what)`: writes every changed block to the disk and flushes it; when this
    /// returns, a crash loses nothing written before the call. [`crate::fs::sync`] says
    /// whether the file system's free counters are rewritten too.
    pub const FS_SYNC: u64 = 67;
    /// `fs_statfs(out)`: writes a [`crate::fs::StatFs`] (9 words) at `out`.
    pub const FS_STATFS: u64 = 68;
    /// The highest call number.
    pub const LAST: u64 = FS_STATFS;
}

/// What `pcore_status` reports (one word): the state in the high 32 bits, a detail in the
/// low 32 (the exit code, the exception vector).
pub mod pcore_status {
    /// Never run, or its last context was collected.
    pub const IDLE: u64 = 0;
    /// A context was started and has not ended yet (it may still be queued).
    pub const RUNNING: u64 = 1 << 32;
    /// The context called `exit(code)`: `EXITED | code as u32`.
    pub const EXITED: u64 = 2 << 32;
    /// The context took an exception: `FAULTED | vector`.
    pub const FAULTED: u64 = 3 << 32;
    /// The context ran past its time limit.
    pub const TIMED_OUT: u64 = 4 << 32;
    /// The context was stopped by `pcore_halt`.
    pub const HALTED: u64 = 5 << 32;
    /// The context could not start (its program or address range was bad).
    pub const FAILED: u64 = 6 << 32;
    /// `RUNNING | POLLING`: a kernel core that has taken its devices and polls them
    /// (before, from `pcore_run` until it starts on its core, plain `RUNNING`).
    pub const POLLING: u64 = 1;
    /// The state part of a status word.
    pub const fn state(word: u64) -> u64 {
        word & !0xffff_ffff
    }
}

/// What `wait` returns.
pub mod wait_result {
    /// A `wake` woke the caller.
    pub const WOKEN: u64 = 0;
    /// The word did not hold `expected`: the caller did not sleep.
    pub const CHANGED: u64 = 1;
    /// The timeout passed first.
    pub const TIMED_OUT: u64 = 2;
}

/// `thread_create`'s `core` when the scheduler should place the thread.
pub const ANY_CORE: u64 = u64::MAX;

/// Kinds of device `device_list` reports.
pub mod device_kind {
    /// The serial console (COM1).
    pub const SERIAL: u64 = 1;
    /// The local APIC timer of a core.
    pub const TIMER: u64 = 2;
    /// The initial RAM disk (the programs' files).
    pub const INITRD: u64 = 3;
    /// The machine itself: its kernel console and power. Holding a device object of this
    /// kind is the capability `kernel_command` and `poweroff` ask for. Only the kernel
    /// makes one (for `init`, at boot); `device_alloc` of it is `NotPermitted`, and a
    /// holder hands it on through shares or `program_run`'s `give`.
    pub const MACHINE: u64 = 4;
    /// The keyboard: the serial console's input. Holding a device object of this kind is
    /// the capability `console_read` asks for, so only the shell reads what is typed. Only
    /// the kernel makes one (for `init`, at boot, its second start argument);
    /// `device_alloc` of it is `NotPermitted`.
    pub const KEYBOARD: u64 = 5;
    /// A PCI function the boot found (issue M12). Its hardware id is `PCI_HWID_BASE` plus
    /// its `bus << 8 | device << 3 | function`; its name, its vendor and device ids in hex
    /// (`1af41000`); `device_stat`'s `count` its class code (class, subclass, programming
    /// interface: `0x020000` is Ethernet), `detail` the address of its first BAR.
    pub const PCI: u64 = 6;
    /// The hardware id of PCI function 00:00.0 (see [`PCI`]).
    pub const PCI_HWID_BASE: u64 = 0x1_0000;
    /// A network device the kernel drives (the virtio-net, a PCI function: its hardware id
    /// as for [`PCI`]); `device_send` and `device_receive` take a device object of it.
    /// Its name is `virtio-n`; `device_stat`'s `count` the frames it received and sent,
    /// `detail` its MAC address (the first byte in the low bits).
    pub const NET: u64 = 7;
    /// A syscall device (Corey §4.4): a ring in a shared segment through which a program
    /// posts system calls to a kernel core. `device_alloc` of
    /// [`crate::sysdev::SYSCALL_HWID`] makes a new one each time; `device_stat`'s `count`
    /// the calls kernel cores served through every syscall device, `detail` how many
    /// syscall devices are live.
    pub const SYSCALL: u64 = 8;
    /// A block device the kernel drives (the virtio-blk, a PCI function: its hardware id
    /// as for [`PCI`]); its file system is what the `fs_*` calls reach. Its name is
    /// `virtio-b`; `device_stat`'s `count` the sectors it read and wrote, `detail` its
    /// size in sectors of 512 bytes.
    pub const BLOCK: u64 = 9;
}

/// Kernel cores and syscall devices (Corey §3.2, §4.4). A kernel core is a pcore started
/// with `pcore_run` and [`PcoreRun::KERNEL_CORE`]: instead of a user context it polls the
/// devices `pcore_add_device` listed, until `pcore_halt` or until its pcore object is
/// dropped. A syscall device is two URPC channels (`urpc::ChannelMemory<RING_SLOTS>`) in
/// one page of a segment the program shares with the kernel core: requests at
/// [`REQUEST_OFFSET`], replies at [`REPLY_OFFSET`]. A request's tag is the call
/// ([`call`]), its payload `[cookie, arg0, arg1, ...]`; the reply's tag is the same call
/// and its payload `[cookie, result]`, the result encoded as a trap's (`encode`).
pub mod sysdev {
    /// The hardware id `device_alloc` takes to make a new syscall device.
    pub const SYSCALL_HWID: u64 = 5;
    /// Slots in each of a syscall device's two channels.
    pub const RING_SLOTS: usize = 16;
    /// Where the request channel starts in the ring page.
    pub const REQUEST_OFFSET: usize = 0;
    /// Where the reply channel starts in the ring page.
    pub const REPLY_OFFSET: usize = 2048;
    /// Bytes of a ring (one page).
    pub const RING_BYTES: u64 = 4096;
    /// Most bytes of a packet area (`device_buf` with `PACKETS`).
    pub const PACKET_AREA_MAX: u64 = 256 * 1024;
    /// Most devices on one kernel core's list.
    pub const PCORE_DEVICES_MAX: usize = 8;

    /// What `device_buf` feeds a device (its fifth argument's top byte).
    pub mod buf_type {
        /// A syscall device's ring: one page.
        pub const RING: u64 = 1;
        /// A syscall device's packet area: packet buffers named by offset in calls.
        pub const PACKETS: u64 = 2;
    }

    /// The calls a kernel core serves through a syscall device.
    pub mod call {
        /// Does nothing; the result is 0 (measures the round trip).
        pub const NULL: u32 = 0;
        /// `[offset, len]`: sends the Ethernet frame at `offset` of the packet area on the
        /// kernel core's network device. Errors as the trap `device_send`.
        pub const NET_SEND: u32 = 1;
        /// `[offset, len]`: the next frame for this syscall device, copied to `offset` of
        /// the packet area (cut to `len`); its whole length, or 0 if none waits.
        pub const NET_RECEIVE: u32 = 2;
        /// `[offset, len]`: a receive buffer at `offset` of the packet area, handed to the
        /// kernel core (Corey §3.2: stacks "pass buffers to receive incoming packets" to
        /// it): answered only when a frame for this device comes, with its whole length
        /// (the frame copied there, cut to `len`). At most 32 wait at once (more: `Busy`);
        /// replies to other calls may pass them.
        pub const NET_RECEIVE_BUFFER: u32 = 3;
    }

    /// What `device_conf` sets on a syscall device (its third argument).
    pub mod conf {
        /// Which received frames go to this syscall device (its fourth argument): 0 every
        /// frame for no other device's address (one stack), else an IPv4 address as a
        /// number (10.0.2.15 is `0x0a00_020f`): frames for that address, and every ARP
        /// frame.
        pub const NET_ADDRESS: u64 = 1;
    }

    /// `device_buf`'s fifth argument: `offset` with `kind` in its top byte.
    pub const fn buf_arg(offset: u64, kind: u64) -> u64 {
        offset | kind << 56
    }
}

pub mod fs;

/// Modes of `segment_copy` (its fourth argument).
pub mod copy_mode {
    /// Every touched page is copied now.
    pub const PLAIN: u64 = 0;
    /// Pages are shared until either segment writes them (Corey §4.3, §5.1 `cfork`).
    pub const COW: u64 = 1;
}

/// What `page_faults` counts.
pub mod faults {
    /// The calling context's own faults (a thread, a `cfork` context).
    pub const CONTEXT: u64 = 0;
    /// Every context on the caller's root address range: the program's threads together
    /// (what `getrusage(RUSAGE_SELF)` counts on Linux).
    pub const ADDRESS_SPACE: u64 = 1;
}

/// Kinds of address range `ar_alloc` makes (its second argument).
pub mod ar_kind {
    /// A 1 GiB range, spliced into root ranges with `ar_set_ar`: a page-table subtree
    /// that every core whose root range includes it shares (Corey §3.1, §4.3).
    pub const SLOT: u64 = 0;
    /// A root range spanning the user half, which a pcore runs on (`pcore_run`).
    pub const ROOT: u64 = 1;
}

abi_enum! {
    /// The five kinds of Corey kernel objects (Corey §4, Figure 5), as `obj_get_name`
    /// reports them. The one definition: the kernel's object model (`crates/objects`) uses
    /// it too.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum ObjectKind: u8 {
        /// A lookup table of object ids (Corey §3.3).
        Share = 1,
        /// Physical memory pages (Corey §4.3).
        Segment = 2,
        /// A table of address mappings, a page-table subtree (Corey §3.1, §4.3).
        AddressRange = 3,
        /// A physical core (Corey §4.4).
        Pcore = 4,
        /// A hardware or syscall device (Corey §3.2, §4.4).
        Device = 5,
        /// A thread: a user context the per-core schedulers time-share and move between
        /// cores (AMPS §2; `thread_create`).
        Thread = 6,
        /// An open file or directory of the disk (`fs_open`; Corey §5).
        File = 7,
    }
}

/// Mapping flags for `ar_set_seg` / `ar_set_ar`.
pub mod map {
    /// Writable.
    pub const WRITE: u64 = 1;
    /// Executable.
    pub const EXEC: u64 = 2;
    // Copy-on-write is a property of a segment's pages (`segment_copy` with
    // `copy_mode::COW`), not of a mapping: `ar_set_seg` refuses any other flag bit.
}

abi_enum! {
    /// Why a call failed. The discriminants are the ABI (negated in `rax`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Error: i64 {
        /// No such system call.
        NoSuchCall = 1,
        /// A pointer or length does not name memory the caller may use that way.
        BadAddress = 2,
        /// An argument is out of range.
        InvalidArgument = 3,
        /// An object id names nothing the caller can reach.
        NoSuchObject = 4,
        /// Out of memory or another resource.
        NoResources = 5,
        /// The caller may not do this.
        NotPermitted = 6,
        /// The object or core is busy (a pcore already running a context).
        Busy = 7,
        /// Other cores did not answer in time (an agreement timed out, Multikernel §4.7);
        /// what they might still reach is kept, not reused.
        TimedOut = 8,
        /// A file or directory named does not exist.
        NotFound = 9,
        /// The name to create exists already.
        Exists = 10,
        /// A path component, or the target, is not a directory.
        NotADirectory = 11,
        /// The target is a directory, and the call needs a file.
        IsADirectory = 12,
        /// The directory to remove is not empty.
        NotEmpty = 13,
        /// A name is longer than the file system allows (255 bytes).
        NameTooLong = 14,
        /// The disk has no free block or inode left.
        NoSpace = 15,
        /// The file would grow past the largest the file system can hold.
        FileTooLarge = 16,
        /// No disk, or its file system is corrupt or unsupported (the boot log says why).
        NoFileSystem = 17,
        /// The disk failed a transfer.
        Io = 18,
        /// The file system or the open file is read-only.
        ReadOnly = 19,
    }
}

/// A call's result as the kernel returns it.
pub type SysResult = Result<u64, Error>;

/// Encodes a result into the `rax` word.
pub const fn encode(result: SysResult) -> u64 {
    match result {
        Ok(v) => v,
        Err(e) => (-(e as i64)) as u64,
    }
}

/// Decodes the `rax` word. Values in the top 4096 are errors (like Linux); unknown error
/// codes decode as `InvalidArgument` rather than being mistaken for successes.
pub const fn decode(word: u64) -> SysResult {
    let signed = word as i64;
    if signed < 0 && signed >= -4096 {
        match Error::from_code(-signed) {
            Some(e) => Err(e),
            None => Err(Error::InvalidArgument),
        }
    } else {
        Ok(word)
    }
}

/// Lowest address user programs are linked at.
pub const USER_BASE: u64 = 0x40_0000;
/// End (exclusive) of the user half of the address space.
pub const USER_END: u64 = 0x0000_8000_0000_0000;
/// Top of the initial user stack.
pub const USER_STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
/// Size of the initial user stack.
pub const USER_STACK_BYTES: u64 = 64 * 1024;

/// Whether a thread may have `base` as its FS base (`set_fs_base`): an address of the
/// user half, which is canonical. A kernel-half or non-canonical base is refused: the
/// first would point user code's `fs:` accesses at the kernel's addresses (they would
/// fault, but the kernel does not hand its addresses out), the second would make the
/// `wrmsr` that loads it fault in the kernel.
pub const fn fs_base_allowed(base: u64) -> bool {
    base < USER_END
}

/// TLB sets a layout should spread hot pages over: QEMU's soft TLB is direct-mapped on
/// virtual-address bits 12 and up and has at least 64 entries; hardware L1 TLBs index
/// their sets with the same low bits.
pub const TLB_SETS: u64 = 64;

/// The page offset at which the `n`th shared region of a program starts in its first
/// 1 GiB-aligned SLOT range (libatoll's `Placement::Shared`): 32 + (5n mod 31), so 31
/// regions in a row start in different TLB sets, none of them a set that the first page of
/// a slot, or any of the first 32 pages of a region aligned to 1 GiB or more (the heap),
/// falls in. At offset 0 every region's first page shared one set with the heap's first
/// page, and a loop touching a channel and its own heap state missed the TLB on every
/// access under TCG.
pub const fn shared_colour(n: u64) -> u64 {
    32 + n % 31 * 5 % 31
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_regions_start_in_tlb_sets_of_their_own() {
        let sets: [u64; 31] = core::array::from_fn(|n| shared_colour(n as u64) % TLB_SETS);
        for (i, set) in sets.iter().enumerate() {
            // Never the set of a 1 GiB-aligned page or of the heap's first 32 pages.
            assert!((32..TLB_SETS).contains(set), "{n}: {set}", n = i);
            assert!(!sets[..i].contains(set), "region {i} repeats set {set}");
        }
        assert_eq!(shared_colour(31), shared_colour(0));
        assert!(shared_colour(u64::MAX) < TLB_SETS);
    }

    #[test]
    fn results_round_trip() {
        for r in [Ok(0), Ok(42), Ok(u64::MAX / 2), Err(Error::BadAddress), Err(Error::NotPermitted)]
        {
            assert_eq!(decode(encode(r)), r);
        }
    }

    #[test]
    fn dir_records_round_trip_and_refuse_what_does_not_fit() {
        let mut buf = [0u8; 64];
        let a = fs::DirRecord { ino: 12, kind: fs::kind::FILE as u8, name: b"notes.txt" };
        let b = fs::DirRecord { ino: 2, kind: fs::kind::DIR as u8, name: b".." };
        let n = a.write(&mut buf).unwrap();
        let m = b.write(&mut buf[n..]).unwrap();
        let (got_a, rest) = fs::DirRecord::read(&buf[..n + m]).unwrap();
        let (got_b, rest) = fs::DirRecord::read(rest).unwrap();
        assert_eq!((got_a, got_b, rest.len()), (a, b, 0));
        assert_eq!(a.write(&mut buf[..a.len() - 1]), None);
        assert_eq!(fs::DirRecord::read(&buf[..n - 1]), None);
        let long = [b'x'; 256];
        assert_eq!(fs::DirRecord { ino: 1, kind: 1, name: &long }.write(&mut [0; 300]), None);
    }

    #[test]
    fn fs_words_round_trip() {
        let st = fs::Stat { ino: 1, kind: 2, size: 3, links: 4, allocated: 5, mtime: 6, perm: 7 };
        assert_eq!(fs::Stat::from_words(st.to_words()), st);
        let sf = fs::StatFs {
            block_size: 4096,
            blocks: 2,
            free_blocks: 3,
            inodes: 4,
            free_inodes: 5,
            cache_blocks: 6,
            driver: 7,
            remote_transfers: 8,
            private_blocks: 9,
        };
        assert_eq!(fs::StatFs::from_words(sf.to_words()), sf);
    }

    #[test]
    fn fs_base_must_be_in_the_user_half() {
        for ok in [0, 1, USER_BASE, USER_STACK_TOP, USER_END - 1] {
            assert!(fs_base_allowed(ok), "{ok:#x}");
        }
        // The first non-canonical address, the middle of the hole, the kernel half.
        for bad in [USER_END, 0x0000_8000_0000_1000, 0x1234_5678_9abc_def0, 0xffff_8000_0000_0000] {
            assert!(!fs_base_allowed(bad), "{bad:#x}");
        }
        assert!(!fs_base_allowed(u64::MAX));
    }

    /// Every value survives its code, no two share one, and codes around them are none.
    #[test]
    fn abi_enums_round_trip_through_their_codes() {
        for &kind in ObjectKind::ALL {
            assert_eq!(ObjectKind::from_code(kind.code()), Some(kind));
        }
        for &e in Error::ALL {
            assert_eq!(Error::from_code(e.code()), Some(e));
            assert_eq!(decode(encode(Err(e))), Err(e));
        }
        let kinds = (0..=u8::MAX).filter_map(ObjectKind::from_code).count();
        assert_eq!(kinds, ObjectKind::ALL.len());
        let errors = (-1000..=1000).filter_map(Error::from_code).count();
        assert_eq!(errors, Error::ALL.len());
        for unknown in [0, 8, 255] {
            assert_eq!(ObjectKind::from_code(unknown), None);
        }
        for unknown in [i64::MIN, -1, 0, 20, 4096, i64::MAX] {
            assert_eq!(Error::from_code(unknown), None);
        }
    }

    #[test]
    fn unknown_negative_codes_are_errors() {
        assert_eq!(decode((-99i64) as u64), Err(Error::InvalidArgument));
        assert_eq!(decode((-5000i64) as u64), Ok((-5000i64) as u64));
    }
}
