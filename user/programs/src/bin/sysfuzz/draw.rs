//! What the fuzzer draws: raw arguments (the values that break kernels) and typed ones (a
//! reference to an object it made, of the right kind or not, through the right share or
//! not; a size, a length, a place in a range; an argument block), call by call.

use crate::call::{composed_arg, Block, Call, Kind};
use crate::fuzzer::{Fuzzer, GIB, PAGE, SCRATCH_BYTES, ZONE, ZONE_SLOTS};
use crate::text;
use libatoll::abi::{ar_kind, map, nr, sysdev, PcoreRun, USER_BASE, USER_END};

impl Fuzzer {
    /// A raw argument: the values that break kernels.
    pub fn argument(&mut self) -> u64 {
        let r = self.rng.next();
        match r % 16 {
            0 => 0,
            1 => self.rng.below(64),
            2 => self.scratch + self.rng.below(SCRATCH_BYTES),
            3 => USER_BASE + self.rng.below(0x8000),
            // A hole in the user half nothing maps.
            4 => 0x3000_0000 + self.rng.below(0x10_0000),
            5 => 0xffff_8000_0000_0000 + self.rng.below(1 << 40),
            6 => USER_END - self.rng.below(0x2000),
            7 => 0x8000_0000_0000_0000 | self.rng.next(),
            8 => u64::MAX - self.rng.below(16),
            9 => self.root,
            10 => self.pooled_of(None).unwrap_or(self.root_ar),
            11 => self.zone_pointer(),
            12 => self.stale(),
            13 => 1u64 << self.rng.below(64),
            14 => (1u64 << self.rng.below(64)).wrapping_sub(1),
            _ => self.rng.next(),
        }
    }

    /// A call with raw arguments; a composed block or text stands ready in case `guard`
    /// must replace the pointer.
    pub fn raw_call(&mut self, number: u64) -> Call {
        let mut call = self.typed_call(number);
        for x in call.a.iter_mut() {
            *x = self.argument();
        }
        if let Some(pos) = composed_arg(number) {
            call.block = Block::Raw(call.a[pos]);
        }
        call
    }

    /// A share to put an object in or reach one through.
    pub fn share(&mut self) -> u64 {
        match self.rng.below(16) {
            0..=9 => self.root,
            10..=11 => self.pooled_of(Some(Kind::Share)).unwrap_or(self.root),
            12 => self.set_share().unwrap_or(self.root),
            13 => self.stale(),
            _ => self.argument(),
        }
    }

    /// A reference ⟨share, object⟩, mostly to a pooled object of `kind`.
    pub fn reference(&mut self, kind: Option<Kind>) -> (u64, u64) {
        let root = self.root;
        match self.rng.below(20) {
            0..=9 => (root, self.pooled_of(kind).or_else(|| self.pooled_of(None)).unwrap_or(0)),
            10..=11 => (self.share(), self.pooled_of(kind).unwrap_or(0)),
            12..=13 => {
                let n = self.protected.len() as u64;
                (root, self.protected.get(self.rng.below(n) as usize).copied().unwrap_or(0))
            }
            14..=15 => (root, self.stale()),
            16 => (root, self.pooled_of(None).unwrap_or(0)),
            _ => (self.argument(), self.argument()),
        }
    }

    /// A reference to an address range: its own root range often.
    fn range_reference(&mut self, kind: Kind) -> (u64, u64) {
        if self.rng.one_in(3) {
            (self.root, self.root_ar)
        } else {
            self.reference(Some(kind))
        }
    }

    /// A pointer for the kernel to write through.
    pub fn out_pointer(&mut self) -> u64 {
        match self.rng.below(16) {
            0..=10 => self.scratch + self.rng.below(SCRATCH_BYTES / 2),
            11..=12 => self.zone_pointer(),
            13 => {
                let (start, end) = self.readonly[0];
                start + self.rng.below(end.saturating_sub(start))
            }
            _ => self.argument(),
        }
    }

    /// A length: mostly small, sometimes at a page boundary or far too big. Megabytes are
    /// rare: the kernel fills every page of a buffer (up to 64 MiB) before it copies, and
    /// under TCG that takes milliseconds.
    pub fn length(&mut self) -> u64 {
        match self.rng.below(32) {
            0..=15 => self.rng.below(256),
            16..=21 => self.rng.below(4 * PAGE),
            22..=23 => PAGE * self.rng.below(20) + self.rng.below(3),
            24..=25 => SCRATCH_BYTES + self.rng.below(2) * PAGE,
            // Past what the kernel fills ahead of a copy, up to the top.
            26..=28 => (64 << 20) + self.rng.below(u64::MAX - (64 << 20)),
            29 if self.rng.one_in(4) => 1 << (16 + self.rng.below(11)),
            _ => self.argument(),
        }
    }

    /// A segment size.
    fn size(&mut self) -> u64 {
        match self.rng.below(12) {
            0 => 0,
            1..=4 => self.rng.below(4 * PAGE),
            5..=7 => PAGE * self.rng.below(64) + self.rng.below(3),
            8 => PAGE * self.rng.below(1 << 14),
            9 => 1 << (30 + self.rng.below(12)),
            _ => self.argument(),
        }
    }

    /// An address in the zone (mostly in the first pages of a slot, where mappings go).
    pub fn zone_pointer(&mut self) -> u64 {
        ZONE + self.rng.below(ZONE_SLOTS) * GIB + self.rng.below(2 << 20)
    }

    /// A place in an address range: page-aligned mostly.
    pub fn range_va(&mut self, own_root: bool) -> u64 {
        let va = match self.rng.below(8) {
            _ if own_root => self.zone_pointer(),
            0 => 0,
            1 => USER_BASE,
            2 => GIB * self.rng.below(8),
            3 => self.rng.below(USER_END),
            4 => USER_END - PAGE * (1 + self.rng.below(4)),
            5 => self.argument(),
            _ => self.rng.below(2 * GIB),
        };
        if self.rng.one_in(8) {
            va
        } else {
            va & !(PAGE - 1)
        }
    }

    /// A page count for a mapping.
    fn pages(&mut self) -> u64 {
        match self.rng.below(8) {
            0 => 0,
            1..=4 => 1 + self.rng.below(16),
            5 => 1 + self.rng.below(1024),
            6 => (GIB / PAGE) + self.rng.below(2),
            _ => self.argument(),
        }
    }

    /// Mapping flags: the valid ones mostly, and a bit no call knows.
    fn flags(&mut self) -> u64 {
        self.rng.pick(&[0, map::WRITE, map::EXEC, map::WRITE | map::EXEC, map::WRITE, 4, 1 << 63])
    }

    /// A core number: an online one mostly.
    fn core(&mut self) -> u64 {
        match self.rng.below(8) {
            0 => self.cores + self.rng.below(3),
            1 => self.argument(),
            _ => self.rng.below(self.cores),
        }
    }

    /// A reference that might be the machine device: rarely the real one.
    fn machine_reference(&mut self) -> (u64, u64) {
        match (self.machine, self.rng.below(8)) {
            (Some(m), 0) => (self.root, m),
            // The right object through a share that does not hold it.
            (Some(m), 1) => (self.share(), m),
            (_, 2..=3) => self.reference(Some(Kind::Device)),
            _ => self.reference(None),
        }
    }

    /// A call with typed arguments: plain ones, a text, or an argument block.
    pub fn typed_call(&mut self, number: u64) -> Call {
        let mut call = Call::new(number, [0; 5]);
        match number {
            nr::AR_SET_SEG => call.words[..8].copy_from_slice(&self.set_seg_words()),
            nr::AR_SET_AR => call.words[..6].copy_from_slice(&self.set_ar_words()),
            nr::PCORE_RUN => call.words = self.pcore_run_words(),
            nr::THREAD_CREATE => call.words = self.thread_create_words(),
            nr::WRITE
            | nr::FILE_OPEN
            | nr::PROGRAM_RUN
            | nr::KERNEL_COMMAND
            | nr::POWEROFF
            | nr::FS_OPEN
            | nr::FS_MKDIR
            | nr::FS_REMOVE
            | nr::FS_RENAME => self.text_call(&mut call),
            _ => call.a = self.typed_arguments(number),
        }
        // Now and then a wild pointer instead of the composed block or text.
        if composed_arg(number).is_some() && self.rng.one_in(8) {
            call.block = Block::Raw(self.argument());
        }
        call
    }

    /// The arguments of a call that takes no text or block: each of the kind the call
    /// wants, mostly.
    fn typed_arguments(&mut self, number: u64) -> [u64; 5] {
        let mut a = [0u64; 5];
        match number {
            nr::EXIT => a[0] = self.rng.next(),
            nr::ARGS | nr::FILE_LIST => {
                a[0] = self.out_pointer();
                a[1] = self.length();
            }
            // The keyboard is a capability the fuzzer never holds: any device reference.
            nr::CONSOLE_READ => {
                (a[0], a[1]) = self.machine_reference();
                a[2] = self.out_pointer();
                a[3] = self.length();
            }
            nr::SHARE_ALLOC | nr::SELF_DROP => a[0] = self.share(),
            nr::SHARE_ADDOBJ => {
                a[0] = self.share();
                (a[1], a[2]) = self.reference(None);
            }
            nr::SHARE_DELOBJ | nr::OBJ_GET_NAME => (a[0], a[1]) = self.reference(None),
            // A revocation is an agreement among every core (all serialised, each core's
            // calls waiting while one is prepared there): drawn as often as the other
            // calls, sixteen fuzzers would spend their run in it. Seven in eight name a
            // stale object, refused at once.
            nr::OBJ_REVOKE => {
                (a[0], a[1]) = self.reference(None);
                if self.rng.below(8) != 0 {
                    a[1] = self.stale();
                }
            }
            nr::SHARE_DUPOBJ => {
                a[0] = self.share();
                (a[1], a[2]) = self.reference(None);
            }
            nr::SET_ADD_SHARE => (a[0], a[1]) = self.reference(Some(Kind::Share)),
            nr::SEGMENT_ALLOC => (a[0], a[1]) = (self.share(), self.size()),
            nr::SEGMENT_GET_NBYTES => (a[0], a[1]) = self.reference(Some(Kind::Segment)),
            nr::SEGMENT_SET_NBYTES => {
                (a[0], a[1]) = self.reference(Some(Kind::Segment));
                a[2] = self.size();
            }
            nr::SEGMENT_COPY => {
                a[0] = self.share();
                (a[1], a[2]) = self.reference(Some(Kind::Segment));
                a[3] = self.rng.pick(&[0, 0, 1, 1, 2, u64::MAX]);
            }
            nr::SEGMENT_READ => {
                (a[0], a[1]) = self.reference(Some(Kind::Segment));
                (a[2], a[3], a[4]) = (self.length(), self.out_pointer(), self.length());
            }
            nr::AR_ALLOC => {
                a[0] = self.share();
                a[1] = self.rng.pick(&[ar_kind::SLOT, ar_kind::ROOT, 2, u64::MAX]);
            }
            nr::AR_GET => {
                (a[0], a[1]) = self.range_reference(Kind::Slot);
                a[2] = self.argument();
            }
            nr::AR_MAPPINGS => {
                (a[0], a[1]) = self.range_reference(Kind::Slot);
                (a[2], a[3]) = (self.out_pointer(), self.rng.below(80));
            }
            nr::LOCALITY_GET => (a[0], a[1]) = (self.core(), self.out_pointer()),
            nr::PCORE_ALLOC => (a[0], a[1]) = (self.share(), self.core()),
            nr::PCORE_STATUS | nr::PCORE_HALT => (a[0], a[1]) = self.reference(Some(Kind::Pcore)),
            nr::PCORE_SET_INTERVAL => {
                (a[0], a[1]) = self.reference(Some(Kind::Pcore));
                a[2] = self.rng.pick(&[0, 9, 10, 11, 99, 100, 1000, 1001, u64::MAX]);
            }
            nr::DEVICE_LIST => (a[0], a[1]) = (self.out_pointer(), self.rng.below(40)),
            nr::THREAD_JOIN | nr::THREAD_STATUS => (a[0], a[1]) = self.thread_reference(),
            nr::THREAD_SET_AFFINITY => {
                (a[0], a[1]) = self.thread_reference();
                a[2] = match self.rng.below(4) {
                    0 => self.argument(),
                    _ => 1 + self.rng.below((1 << self.cores.min(16)) - 1),
                };
            }
            nr::THREAD_STAT => {
                (a[0], a[1]) = self.thread_reference();
                a[2] = self.out_pointer();
            }
            nr::SLEEP => a[0] = self.rng.pick(&[0, 1, 100, 2000, 60_000_001, u64::MAX]),
            nr::WAIT => {
                let zone = self.zone_pointer();
                a[0] = self.rng.pick(&[self.scratch, self.scratch + 2, zone]);
                a[1] = self.rng.pick(&[0, 1, u64::from(u32::MAX) + 1]);
                a[2] = self.rng.pick(&[0, 1, 500, 60_000_001]);
            }
            nr::WAKE => {
                let wild = self.argument();
                a[0] = self.rng.pick(&[self.scratch, self.scratch + 2, wild]);
                a[1] = self.rng.pick(&[0, 1, u64::MAX]);
            }
            nr::DEVICE_ALLOC => {
                a[0] = self.share();
                a[1] = match self.nic_hwid {
                    Some(nic) if self.rng.one_in(4) => nic,
                    _ if self.rng.one_in(8) => self.argument(),
                    _ => self.rng.below(8),
                };
            }
            // A frame out or in: any device (the NIC among those the fuzzer holds), a
            // pointer of any kind, a length around the frame's bounds.
            nr::DEVICE_SEND | nr::DEVICE_RECEIVE => {
                (a[0], a[1]) = self.reference(Some(Kind::Device));
                a[2] =
                    if number == nr::DEVICE_RECEIVE { self.out_pointer() } else { self.argument() };
                a[3] = self.rng.pick(&[0, 13, 14, 60, 1514, 1515, 4096, u64::MAX]);
            }
            // A kernel core's devices and a syscall device's buffers (Corey §4.4).
            nr::PCORE_ADD_DEVICE => {
                (a[0], a[1]) = self.reference(Some(Kind::Pcore));
                (a[2], a[3]) = self.reference(Some(Kind::Device));
            }
            nr::DEVICE_BUF => {
                (a[0], a[1]) = self.reference(Some(Kind::Device));
                (a[2], a[3]) = self.reference(Some(Kind::Segment));
                a[4] = match self.rng.below(4) {
                    0 => sysdev::buf_arg(0, sysdev::buf_type::RING),
                    1 => sysdev::buf_arg(PAGE * self.rng.below(3), sysdev::buf_type::PACKETS),
                    2 => sysdev::buf_arg(self.rng.below(3 * PAGE), self.rng.below(4)),
                    _ => self.argument(),
                };
            }
            nr::DEVICE_CONF => {
                (a[0], a[1]) = self.reference(Some(Kind::Device));
                a[2] = self.rng.pick(&[sysdev::conf::NET_ADDRESS, 0, 2, u64::MAX]);
                a[3] = self.rng.pick(&[0, 0x0a00_020f, 1 << 32, u64::MAX]);
            }
            nr::DEVICE_STAT => {
                (a[0], a[1]) = self.machine_reference();
                a[2] = self.out_pointer();
            }
            // The disk's open files: the fuzzer keeps none, so any reference (mostly the
            // wrong kind), buffers of every sort, offsets near the format's limits.
            nr::FS_READ | nr::FS_WRITE | nr::FS_READDIR => {
                (a[0], a[1]) = self.reference(None);
                (a[2], a[3]) = (self.out_pointer(), self.length());
                a[4] = self.rng.pick(&[0, 1, 4095, 1 << 32, u64::MAX - 1, u64::MAX]);
            }
            nr::FS_STAT | nr::FS_TRUNCATE => {
                (a[0], a[1]) = self.reference(None);
                a[2] = if number == nr::FS_STAT { self.out_pointer() } else { self.length() };
            }
            nr::FS_SYNC => a[0] = self.rng.pick(&[0, 1, 2, u64::MAX]),
            nr::FS_STATFS => a[0] = self.out_pointer(),
            _ => {
                for x in a.iter_mut() {
                    *x = self.argument();
                }
            }
        }
        a
    }

    /// The text and arguments of a call that reads a text: bytes to print, a file name, a
    /// program line, a console line (`poweroff` gets one too, which it ignores).
    fn text_call(&mut self, call: &mut Call) {
        let a = &mut call.a;
        match call.number {
            nr::WRITE => {
                call.text = text::junk(&mut self.rng);
                a[1] = call.text.len as u64;
            }
            nr::FILE_OPEN => {
                a[0] = self.share();
                call.text = text::file_name(&mut self.rng, &self.files);
                a[2] = call.text.len as u64;
            }
            nr::PROGRAM_RUN => {
                (a[0], a[1]) = self.reference(Some(Kind::Pcore));
                call.text = text::program_line(&mut self.rng);
                a[3] = text::length_for(&mut self.rng, &call.text);
                a[4] = self.give();
            }
            nr::FS_OPEN => {
                a[0] = self.share();
                call.text = text::path(&mut self.rng);
                a[2] = text::length_for(&mut self.rng, &call.text);
                a[3] = self.rng.pick(&[0, 1, 3, 2 | 8, 2 | 4, 16, 1 | 16, 8, 4, 32, u64::MAX]);
            }
            nr::FS_MKDIR | nr::FS_REMOVE | nr::FS_RENAME => {
                call.text = text::path(&mut self.rng);
                a[1] = text::length_for(&mut self.rng, &call.text);
                // `fs_rename`'s second path (`a[2]`, `a[3]`) is left null or wild: the
                // kernel must check the first and refuse the second.
                a[2] = self.rng.pick(&[0, 0xdead_0000, 0xffff_8000_0000_0000]);
                a[3] = self.rng.pick(&[0, 5, 4096]);
            }
            _ => {
                (a[0], a[1]) = self.machine_reference();
                call.text = text::console_line(&mut self.rng);
                a[3] = text::length_for(&mut self.rng, &call.text);
            }
        }
    }

    /// `ar_set_seg`'s block: its own root range (in the zone) or a pooled range, a pooled
    /// segment, and pages, flags and a first page of every sort.
    fn set_seg_words(&mut self) -> [u64; 8] {
        let (s, o) = self.range_reference(Kind::Slot);
        let va = self.range_va(o == self.root_ar);
        let (ss, so) = self.reference(Some(Kind::Segment));
        let first = if self.rng.one_in(8) { self.argument() } else { self.rng.below(8) };
        [s, o, va, ss, so, first, self.pages(), self.flags()]
    }

    /// `ar_set_ar`'s block: a slot range spliced into its own root range (a zone slot) or a
    /// pooled range.
    fn set_ar_words(&mut self) -> [u64; 6] {
        let (s, o) = self.range_reference(Kind::Root);
        let va = if o == self.root_ar {
            ZONE + self.rng.below(ZONE_SLOTS) * GIB
        } else {
            self.range_va(false) & !(GIB - 1)
        };
        let (cs, co) = self.reference(Some(Kind::Slot));
        [s, o, va, cs, co, self.flags()]
    }

    /// What `program_run` gives the program: nothing mostly, else an object of the root
    /// share (the machine device too: `hello` and `fault` never use it) or a bad id.
    pub fn give(&mut self) -> u64 {
        match self.rng.below(8) {
            0..=3 => 0,
            4 => self.pooled_of(None).unwrap_or(0),
            5 => self.machine.unwrap_or(self.root_ar),
            6 => self.stale(),
            _ => self.argument(),
        }
    }

    /// `pcore_run`'s block: a pooled pcore; an entry, stack and range of every sort
    /// (`guard` keeps the launches that could run code to the safe ones).
    /// A thread to join, ask about or move: one it made mostly, its own (⟨0, 0⟩) now and
    /// then, or any reference.
    fn thread_reference(&mut self) -> (u64, u64) {
        match self.rng.below(8) {
            0 => (0, 0),
            1 => self.reference(None),
            _ => self.reference(Some(Kind::Thread)),
        }
    }

    /// `thread_create`'s block: [share, core, entry, stack, ar_share, ar, arg, nshares,
    /// shares..., affinity].
    fn thread_create_words(&mut self) -> [u64; 17] {
        let mut w = self.pcore_run_words();
        w[0] = self.share();
        w[1] = match self.rng.below(4) {
            0 => self.argument(),
            1 => libatoll::abi::ANY_CORE,
            _ => self.core(),
        };
        w[16] = match self.rng.below(4) {
            0 => self.argument(),
            _ => 0,
        };
        w
    }

    fn pcore_run_words(&mut self) -> [u64; 17] {
        let (ps, po) = self.reference(Some(Kind::Pcore));
        // A kernel core (Corey §4.4): every field but the pcore empty, or some not.
        if self.rng.one_in(8) {
            let mut w = [0u64; 17];
            (w[0], w[1], w[16]) = (ps, po, PcoreRun::KERNEL_CORE);
            if self.rng.one_in(4) {
                w[2 + self.rng.below(14) as usize] = self.argument();
            }
            return w;
        }
        let entry = match self.rng.below(4) {
            0 => crate::started::exit_entry(),
            1 => crate::started::halt_entry(),
            _ => self.argument(),
        };
        let (rs, ro) = self.range_reference(Kind::Root);
        let nshares = if self.rng.one_in(8) { self.argument() } else { self.rng.below(4) };
        let mut w = [
            ps,
            po,
            entry,
            self.argument(),
            rs,
            ro,
            self.argument(),
            nshares,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            self.rng.pick(&[0, 0, 0, 2, u64::MAX]),
        ];
        for share in w[8..16].iter_mut() {
            *share = match self.rng.below(4) {
                0 => self.set_share().unwrap_or(self.root),
                1 => self.share(),
                _ => self.argument(),
            };
        }
        w
    }
}
