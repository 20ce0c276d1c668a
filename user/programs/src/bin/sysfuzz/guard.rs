//! The rules that keep the fuzzer (and the machine) alive while it calls everything,
//! applied to every call just before it is made. A rule changes an argument only where
//! the call would otherwise end the fuzzer, end the machine, corrupt the fuzzer's own
//! memory, or start something that runs without bound; everything else, however wrong,
//! goes to the kernel as drawn. Each rule says why.
//!
//! None of them hides a kernel path (issue M14): `sleep` and `wait` go as drawn (a long
//! one to a parker thread, `park.rs`); its own segments grow (and are put back), never
//! shrink; pcores and threads are revoked like any object; the console gets `asym`,
//! `retype`, `sched`, `tlb` and `bench` lines with accepted values (`launch.rs`), and its
//! own affinity goes as drawn (it takes its core back at each poll).

use crate::call::{block_words, composed_arg, Block, Call, Kind};
use crate::fuzzer::{
    Fuzzer, Mode, ARMED_EVERY, GIB, PAGE, SCRATCH_BYTES, ZONE, ZONE_END, ZONE_SLOTS, ZONE_TOUCH_MAX,
};
use crate::rng::Rng;
use crate::started::{exit_entry, is_entry};
use crate::text::{self, TEXT_BYTES};
use libatoll::abi::{self, map, nr, USER_BASE, USER_END};

/// Longest line the kernel reads (`read_string`); a longer length is refused unread.
const LINE_MAX: u64 = 256;

/// Makes `call` safe to make (see the module comment).
pub fn check(f: &mut Fuzzer, call: &mut Call) {
    objects(f, call);
    out_buffer(f, call);
    text(f, call);
    block(f, call);
    f.zone_pages += zone_pages(f, call);
}

/// Where a pointer points, as far as the fuzzer's own memory goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Below the user base or past the user half: no program can read or write it.
    Outside,
    /// Its scratch mapping.
    Scratch,
    /// The zone of its root range.
    Zone,
    /// One of its read-only mappings.
    ReadOnly,
    /// Anything else in the user half: its stack, heap, data, or nothing.
    Own,
}

fn class(f: &Fuzzer, p: u64) -> Class {
    if !(USER_BASE..USER_END).contains(&p) {
        Class::Outside
    } else if (f.scratch..f.scratch + SCRATCH_BYTES).contains(&p) {
        Class::Scratch
    } else if (ZONE..ZONE_END).contains(&p) {
        Class::Zone
    } else if f.in_readonly(p, 1) {
        Class::ReadOnly
    } else {
        Class::Own
    }
}

/// Object arguments of the calls that destroy, resize or hand on.
fn objects(f: &mut Fuzzer, call: &mut Call) {
    let a = &mut call.a;
    match call.number {
        // Its own memory, range and started pcores stay in its root share: its heap grows
        // through ⟨root, range⟩, and a pcore it let go of could not be halted.
        nr::SHARE_DELOBJ if a[0] == f.root && f.must_keep(a[1]) => a[1] = f.stale(),
        // A fuzzing thread's object, in whichever share (see `WORKERS`), and the home share
        // every thread of the program names its range, stacks and thread objects through
        // (without it no thread starts and no join finds its thread).
        nr::SHARE_DELOBJ | nr::OBJ_REVOKE if f.is_worker(a[1]) || is_home(a[1]) => a[1] = f.stale(),
        nr::SELF_DROP if is_home(a[0]) => a[0] = f.stale(),
        // One of its own segments (image, stack, heap, scratch, the cover) may grow, not
        // shrink: shrinking would cut memory it runs on. It grows as drawn (a huge size
        // reaches the kernel's memory checks) and is put back to its size at the next
        // poll (`Fuzzer::restore_sizes`).
        nr::SEGMENT_SET_NBYTES if f.is_protected(a[1]) => match f.own_size(a[1]) {
            Some(size) => {
                a[2] = a[2].max(size);
                f.regrow.push((a[1], size));
            }
            None => a[1] = f.stale(),
        },
        // The machine device stays in the root share alone, so the one reference that
        // works is ⟨root, machine⟩, which `poweroff` never gets (next rule) and no
        // context it starts can reach; a sibling's pcore likewise (a context given the
        // share could halt that fuzzer).
        nr::SHARE_ADDOBJ if f.machine == Some(a[2]) || f.is_sibling(a[2]) => a[2] = f.stale(),
        // A descriptor is another id for its object, which the guards here, by id, would
        // not know: none for its own objects, its range, the machine, or any pcore (a
        // pcore's second id would keep it from the core's other users after `forget`).
        nr::SHARE_DUPOBJ
            if f.must_keep(a[2])
                || f.machine == Some(a[2])
                || a[2] == f.root_ar
                || f.kind_of(a[2]) == Some(Kind::Pcore) =>
        {
            a[2] = f.stale()
        }
        // A revocation takes every other entry of the object, on every core: never its own
        // memory or range (its threads reach the range, and the heap grows, through the
        // entry in the threads' home share) nor the machine device (`init` holds it too).
        // Its pcores, started or not, and its threads it revokes like any object.
        nr::OBJ_REVOKE if f.is_protected(a[1]) || f.machine == Some(a[1]) || a[1] == f.root_ar => {
            a[1] = f.stale()
        }
        // A segment fed to a device as a ring is cleared, and its pages stay the device's:
        // never its own memory.
        nr::DEVICE_BUF if f.is_protected(a[3]) => a[3] = f.stale(),
        // `poweroff` with the machine device ends the machine: every other reference.
        nr::POWEROFF if f.machine == Some(a[1]) => {
            a[1] = f.pooled_of(Some(Kind::Device)).unwrap_or(f.root_ar)
        }
        // Its FS base points at its thread block (`libatoll::tls`), which its thread-locals
        // need: a base the kernel would take (one in the user half) becomes the block's
        // own, so the call changes nothing; any other goes as drawn, to be refused.
        nr::SET_FS_BASE if abi::fs_base_allowed(a[0]) => a[0] = libatoll::tls::block_address(),
        // A sibling fuzzer's pcore (`--cores`): halting it would end that fuzzer.
        nr::PCORE_HALT if f.is_sibling(a[1]) => a[1] = f.stale(),
        // Only on its own core or one of `--others`: a program sent to a core that runs
        // another fuzzer waits there, holding that core's pcore, until the fuzzer ends.
        nr::PROGRAM_RUN if !f.may_start_on(a[1]) => a[1] = f.stale(),
        // A child's burst holds no pcore, so it starts nothing it would have to wait for:
        // a core that does not exist.
        nr::PCORE_ALLOC if f.mode == Mode::Child => a[1] = f.cores + a[1] % 4,
        nr::KERNEL_COMMAND if f.machine == Some(a[1]) && !call.trusted => {
            // With the capability the console prints: at most one line per
            // `ARMED_EVERY` calls keeps the log readable.
            if !crate::with("console") || (f.armed_at != 0 && f.steps - f.armed_at < ARMED_EVERY) {
                a[1] = f.stale();
            } else {
                f.armed_at = f.steps.max(1);
                f.stats.console_lines += 1;
            }
        }
        _ => {}
    }
}

/// (pointer argument, length argument, bytes per unit) of the calls that write to user
/// memory.
fn out_buffer_of(number: u64) -> Option<(usize, Option<usize>, u64)> {
    Some(match number {
        nr::ARGS | nr::FILE_LIST => (0, Some(1), 1),
        nr::CONSOLE_READ => (2, Some(3), 1),
        nr::DEVICE_LIST => (0, Some(1), 32),
        nr::LOCALITY_GET => (1, None, 48),
        nr::AR_MAPPINGS => (2, Some(3), 48),
        nr::DEVICE_STAT => (2, None, 32),
        nr::THREAD_STAT => (2, None, 40),
        nr::SEGMENT_READ => (3, Some(4), 1),
        nr::DEVICE_RECEIVE => (2, Some(3), 1),
        _ => return None,
    })
}

/// The kernel writes only where the fuzzer keeps nothing: its scratch mapping (whose
/// neighbours are unmapped, so an overlong length is refused as a whole), the zone (at
/// most `ZONE_TOUCH_MAX` bytes a call: see `zone_pages`), read-only pages and addresses
/// outside the user half (refused). A pointer into
/// its stack, heap or data goes to the scratch mapping instead.
fn out_buffer(f: &mut Fuzzer, call: &mut Call) {
    let Some((ptr, len, unit)) = out_buffer_of(call.number) else { return };
    let a = &mut call.a;
    match class(f, a[ptr]) {
        Class::Outside | Class::Scratch | Class::ReadOnly => {}
        Class::Zone => {
            if let Some(len) = len {
                let most = ZONE_TOUCH_MAX / unit;
                if a[len] > most {
                    a[len] %= most + 1;
                }
            }
        }
        Class::Own => a[ptr] = f.scratch + a[ptr] % PAGE,
    }
}

/// The most pages `call` can fill in the zone: the kernel fills a buffer's pages before it
/// copies, and pages of the pooled segments mapped there hold frames until the segments
/// go. The fuzzer purges its pool past a budget, so a small machine keeps the frames its
/// own copy-on-write faults need (below a reserve the kernel stops a program that faults).
fn zone_pages(f: &Fuzzer, call: &Call) -> u64 {
    let mut pages = 0;
    if let Some((ptr, len, unit)) = out_buffer_of(call.number) {
        if class(f, call.a[ptr]) == Class::Zone {
            let bytes = len.map_or(unit, |len| call.a[len].saturating_mul(unit));
            pages += bytes.min(ZONE_TOUCH_MAX) / PAGE + 2;
        }
    }
    // A text read there is at most 256 bytes (the kernel refuses a longer line unread).
    if let Block::Raw(p) = call.block {
        if composed_arg(call.number).is_some() && class(f, p) == Class::Zone {
            pages += 2;
        }
    }
    pages
}

/// Texts the kernel acts on. A `program_run` line, and a console line sent with the
/// capability, comes from the call's own buffer (checked here) or from an address no
/// program can read: never from memory the kernel wrote (its scratch holds file contents
/// such as `init`'s) or that it cannot check. `write` prints what it reads: a short piece.
fn text(f: &mut Fuzzer, call: &mut Call) {
    match call.number {
        nr::PROGRAM_RUN => vet(f, call, 3, text::harmless_program, text::program_line),
        nr::KERNEL_COMMAND if f.machine == Some(call.a[1]) && !call.trusted => {
            let cores = f.cores;
            vet(f, call, 3, |b, files| text::harmless_console(b, files, cores), text::console_line)
        }
        // A piece of its own memory (files it read land in its scratch) is at most 8
        // bytes: whole words of a program's strings would read like messages in the log.
        nr::WRITE => match call.block {
            Block::Composed => call.a[1] %= 65,
            Block::Raw(p) if class(f, p) != Class::Outside => call.a[1] %= 9,
            Block::Raw(_) => {}
        },
        _ => {}
    }
}

/// Makes the text of `call` (length in argument `len`) one the fuzzer made and found
/// harmless; replaces it with a fresh `make` until it is.
fn vet(
    f: &mut Fuzzer,
    call: &mut Call,
    len: usize,
    harmless: impl Fn(&[u8], &[alloc::string::String]) -> bool,
    make: fn(&mut Rng) -> text::Text,
) {
    if let Block::Raw(p) = call.block {
        if class(f, p) == Class::Outside {
            return;
        }
        call.block = Block::Composed;
    }
    let mut n = call.a[len];
    // Past `LINE_MAX` the kernel refuses the length before it reads a byte.
    while n <= LINE_MAX && !harmless(&call.text.bytes[..(n as usize).min(TEXT_BYTES)], &f.files) {
        call.text = make(&mut f.rng);
        n = call.text.len as u64;
        call.a[len] = n;
    }
}

/// Argument blocks (`ar_set_seg`, `ar_set_ar`, `pcore_run`). One the fuzzer composed is
/// fixed where it must be; a raw pointer is left to the kernel if it points where no
/// program reads, read and checked if it points into scratch or read-only memory, and
/// replaced by the composed block otherwise (its stack and heap hold its own ids: read
/// there, a block could name its own range and image).
fn block(f: &mut Fuzzer, call: &mut Call) {
    let n = block_words(call.number);
    if n == 0 {
        return;
    }
    if let Block::Raw(p) = call.block {
        let bytes = 8 * n as u64;
        let readable = match class(f, p) {
            Class::Outside => return,
            Class::Scratch => p + bytes <= f.scratch + SCRATCH_BYTES,
            Class::ReadOnly => f.in_readonly(p, bytes),
            Class::Zone | Class::Own => false,
        };
        if !readable {
            call.block = Block::Composed;
        } else {
            let mut words = [0u64; 17];
            for (i, w) in words[..n].iter_mut().enumerate() {
                // SAFETY: `[p, p + 8n)` lies in the scratch mapping or a read-only
                // mapping of this program (checked above), both mapped and readable.
                *w = unsafe { core::ptr::read_unaligned((p as *const u64).add(i)) };
            }
            // Kept either way: what the kernel reads is what `after` looks at.
            if fix_block(f, call.number, &mut words) {
                call.block = Block::Composed;
            }
            call.words = words;
            return;
        }
    }
    let mut words = call.words;
    fix_block(f, call.number, &mut words);
    call.words = words;
}

/// Fixes an argument block; returns whether it changed anything.
fn fix_block(f: &mut Fuzzer, number: u64, w: &mut [u64; 17]) -> bool {
    let before = *w;
    match number {
        // [ar_share, ar, va, seg_share, seg, first_page, pages, flags]
        nr::AR_SET_SEG => {
            // A writable alias of its own memory would let the kernel (through a buffer
            // there) or a context write into it.
            if f.is_protected(w[4]) {
                w[7] &= !map::WRITE;
            }
            // Its own range: only inside the zone, so no edit unmaps its image, stack,
            // heap or scratch.
            if w[1] == f.root_ar {
                let va = (ZONE + w[2] % (ZONE_END - ZONE)) & !(PAGE - 1);
                let room = (ZONE_END - va) / PAGE;
                if !(ZONE..ZONE_END).contains(&w[2]) || w[6] > (ZONE_END - w[2]) / PAGE {
                    w[2] = va;
                    w[6] = w[6].min(room);
                }
            }
            // The range a context is about to start on maps nothing it could execute.
            if w[1] == f.launch_range && f.launch_range != 0 {
                w[7] &= !map::EXEC;
            }
        }
        // [ar_share, ar, va, child_share, child, flags]
        nr::AR_SET_AR => {
            if w[1] == f.root_ar && !(ZONE..ZONE_END).contains(&w[2]) {
                w[2] = ZONE + (w[2] % ZONE_SLOTS) * GIB;
            }
            if w[1] == f.launch_range && f.launch_range != 0 {
                w[5] &= !map::EXEC;
            }
        }
        // [pcore_share, pcore, entry, stack, ar_share, ar, arg, nshares, shares...]
        nr::PCORE_RUN => {
            if !f.may_start_on(w[1]) {
                w[1] = f.stale();
            }
            if w[5] == f.root_ar {
                // On its own range a context runs only the two-instruction entries: a
                // random entry would run its code, or garbage, in its memory.
                if !is_entry(w[2]) {
                    w[2] = exit_entry();
                }
            } else if f.maybe_pcore(w[1]) && (w[5] != f.launch_range || f.launch_range == 0) {
                // Anywhere else a context starts only on the fresh range a scenario built
                // with nothing executable in it (the context faults at once): a pooled
                // range may map code (`file_open` of a program, a copy of its own image).
                w[5] = f.pooled_of(Some(Kind::Slot)).unwrap_or(0);
            }
        }
        // [share, core, entry, stack, ar_share, ar, arg, nshares, shares..., affinity]
        nr::THREAD_CREATE => {
            if w[5] == f.root_ar {
                // In its own memory a thread runs only the exit entry (the self-halt entry
                // would halt a pcore; anything else runs its code, or garbage, there).
                w[2] = exit_entry();
            } else if w[5] != f.launch_range || f.launch_range == 0 {
                // Elsewhere only on the fresh range a scenario built (nothing executable:
                // the thread faults at once), or a slot range (refused: not a root).
                w[5] = f.pooled_of(Some(Kind::Slot)).unwrap_or(0);
            }
        }
        _ => {}
    }
    *w != before
}

/// Whether `id` is the program's home share (not its root share).
fn is_home(id: u64) -> bool {
    let home = libatoll::obj::home_share();
    id != 0 && id == home && home != libatoll::obj::root_share()
}
