//! User programs: loading one from the initrd into a fresh address space, running it in
//! ring 3 on the calling core until it exits or faults, and its system calls.
//!
//! A core runs one program at a time (Corey §4.4: pcores are space-multiplexed). While it
//! does, the core's monitor does not poll; messages wait in its channels until the program
//! ends.

pub mod corey;
pub mod elf;
pub mod initrd;
pub mod space;

use crate::arch::cpu;
use crate::arch::paging;
use crate::arch::trap::{TrapFrame, EXCEPTION_NAMES};
use crate::arch::user_entry::{self, KernelContext, SyscallFrame};
use crate::percpu::this_core;
use crate::println;
use abi::{nr, Error, SysResult, USER_STACK_BYTES, USER_STACK_TOP};
use alloc::string::String;
use space::{Access, AddressSpace};

/// How a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// It called `exit(code)`.
    Exited(i32),
    /// It took exception `vector` and was stopped.
    Faulted(u8),
    /// It ran past its time limit and was stopped.
    TimedOut,
}

impl ExitStatus {
    fn encode(self) -> u64 {
        match self {
            ExitStatus::Exited(code) => code as u32 as u64,
            ExitStatus::Faulted(vector) => 1 << 32 | vector as u64,
            ExitStatus::TimedOut => 2 << 32,
        }
    }

    fn decode(word: u64) -> ExitStatus {
        match word >> 32 {
            1 => ExitStatus::Faulted(word as u8),
            2 => ExitStatus::TimedOut,
            _ => ExitStatus::Exited(word as u32 as i32),
        }
    }
}

/// What the core's running program's system calls need.
pub struct Running {
    name: String,
    args: String,
    /// Console output not yet ended by a newline: printed a whole line at a time, so
    /// program output never runs into the kernel's own lines.
    line: alloc::vec::Vec<u8>,
    space: *mut AddressSpace,
    context: *const KernelContext,
    objects: corey::ProgramObjects,
    /// TSC value past which the program is stopped.
    deadline: u64,
}

/// Time limit of a program started with [`run`] (ten minutes).
const DEFAULT_LIMIT_US: u64 = 600_000_000;

/// Longest argument string a program gets.
const ARGS_MAX: usize = 256;
/// Bytes copied from user memory per step of a console write.
const WRITE_MAX: usize = 1024;
/// Longest console line a program prints before it is broken.
const LINE_MAX: usize = 200;

/// Loads program `name` from the initrd and runs it on this core until it ends.
pub fn run(name: &str, args: &str) -> Result<ExitStatus, Error> {
    run_with_limit(name, args, DEFAULT_LIMIT_US)
}

/// Like [`run`], stopping the program (`TimedOut`) once it has run for `limit_us`: the
/// timer tick checks, so a program that never makes a system call cannot keep its core.
pub fn run_with_limit(name: &str, args: &str, limit_us: u64) -> Result<ExitStatus, Error> {
    // One program per core at a time (a pcore runs one context).
    if this_core().user.with(|slot| slot.is_some()) {
        return Err(Error::NotPermitted);
    }
    let image = initrd::find(name).ok_or(Error::NoSuchObject)?;
    // cpio aligns file data to 4 bytes; the ELF parser wants 8.
    let aligned: alloc::vec::Vec<u64>;
    let image = if image.as_ptr().align_offset(8) == 0 {
        image
    } else {
        let mut words = alloc::vec![0u64; image.len().div_ceil(8)];
        for (word, chunk) in words.iter_mut().zip(image.chunks(8)) {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_le_bytes(bytes);
        }
        aligned = words;
        // SAFETY: viewing the u64 buffer as its first `image.len()` bytes.
        unsafe { core::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), image.len()) }
    };
    let kernel_pml4 = crate::mem::heap::kernel_pml4();
    let mut space = AddressSpace::new(kernel_pml4)?;
    let entry = elf::load(&mut space, image)?;
    let mut page = USER_STACK_TOP - USER_STACK_BYTES;
    while page < USER_STACK_TOP {
        space.map_zeroed(page, Access::ReadWrite)?;
        page += 4096;
    }
    let objects = corey::start_program()?;
    let mut context = KernelContext::default();
    let core = this_core();
    core.user.with(|slot| {
        *slot = Some(Running {
            name: name.into(),
            args: args.chars().take(ARGS_MAX).collect(),
            line: alloc::vec::Vec::new(),
            space: &mut space,
            context: &context,
            objects,
            deadline: cpu::rdtsc()
                .saturating_add(limit_us.saturating_mul(crate::arch::timer::tsc_hz() / 1_000_000)),
        })
    });
    // SAFETY: the space maps the program and stack for user mode and the kernel half like
    // the kernel tables; we switch back before it is dropped.
    unsafe { paging::activate(space.pml4()) };
    // The stack pointer sits as if `_start` had been called (8 below a 16-byte boundary).
    // SAFETY: `context` lives on this frame until `run_user` returns; RSP0 is this core's.
    let word =
        unsafe { user_entry::run_user(&mut context, entry, USER_STACK_TOP - 8, core.rsp0_slot()) };
    // SAFETY: the kernel tables map everything the kernel uses.
    unsafe { paging::activate(kernel_pml4) };
    // A program that left through an exception or a system call left interrupts off.
    cpu::enable_interrupts();
    if let Some(running) = core.user.with(|slot| slot.take()) {
        if !running.line.is_empty() {
            crate::println!("{}", String::from_utf8_lossy(&running.line));
        }
        drop(space);
        corey::end_program(running.objects);
    }
    Ok(ExitStatus::decode(word))
}

/// The running program's details, for a system call or a fault.
fn with_running<R>(f: impl FnOnce(&Running, &AddressSpace) -> R) -> Option<R> {
    with_running_mut(|r, space| f(r, space))
}

/// The running program, mutable (its objects, its page tables).
fn with_running_mut<R>(f: impl FnOnce(&mut Running, &mut AddressSpace) -> R) -> Option<R> {
    this_core().user.with(|slot| {
        slot.as_mut().map(|r| {
            // SAFETY: `space` points into `run`'s frame, live while the program runs, and
            // only this core, inside this `with`, reaches it.
            let space = unsafe { &mut *r.space };
            f(r, space)
        })
    })
}

/// Leaves the running program with `status` (from a system call or an exception).
fn leave(status: ExitStatus) -> ! {
    let Some(context) = with_running(|r, _| r.context) else {
        println!("user: no program is running on core {}", this_core().index);
        cpu::halt_forever()
    };
    // SAFETY: the context of the `run_user` call active on this core's stack; we are in
    // the kernel on that stack (a system call or an interrupt from the program).
    unsafe { user_entry::leave_user(context, status.encode()) }
}

/// An exception in user mode. A page fault on a page the program's root address range maps
/// is a soft fault: the page is filled and mapped, and the program goes on. Anything else
/// is reported and stops the program; the core goes on.
pub fn on_exception(frame: &TrapFrame) {
    let vector = frame.vector as u8;
    let cr2 = if vector == crate::arch::trap::VECTOR_PAGE_FAULT { cpu::cr2() } else { 0 };
    let not_present = frame.error & 1 == 0;
    if vector == crate::arch::trap::VECTOR_PAGE_FAULT && not_present {
        let write = frame.error & 2 != 0;
        if with_running_mut(|r, space| corey::soft_fault(&mut r.objects, space, cr2, write))
            == Some(true)
        {
            return;
        }
    }
    let name = with_running(|r, _| r.name.clone()).unwrap_or_default();
    println!(
        "USER FAULT core={} program={} vector={} ({}) error={:#x} rip={:#x} cr2={:#x} cs={:#x} rsp={:#x} rflags={:#x}",
        this_core().index,
        name,
        vector,
        EXCEPTION_NAMES[vector as usize],
        frame.error,
        frame.rip,
        cr2,
        frame.cs,
        frame.rsp,
        frame.rflags
    );
    leave(ExitStatus::Faulted(vector))
}

/// A timer tick that interrupted user mode (after its EOI): stops the program if it has
/// run past its time limit.
pub fn on_tick_in_user() {
    if with_running(|r, _| cpu::rdtsc() > r.deadline) == Some(true) {
        let name = with_running(|r, _| r.name.clone()).unwrap_or_default();
        println!("USER TIMEOUT core={} program={}", this_core().index, name);
        leave(ExitStatus::TimedOut);
    }
}

/// Entry from `syscall_entry`: runs one system call, returns the result word.
#[no_mangle]
extern "C" fn syscall_dispatch(frame: &mut SyscallFrame) -> u64 {
    // `sysret` to a non-canonical address would fault in ring 0 on the user's stack.
    if frame.rip >= paging::USER_END {
        leave(ExitStatus::Faulted(13));
    }
    let result: SysResult = match frame.rax {
        nr::NULL => Ok(0),
        nr::WRITE => write(frame.rdi, frame.rsi),
        nr::EXIT => leave(ExitStatus::Exited(frame.rdi as i32)),
        nr::PCORE_CURRENT => Ok(this_core().index as u64),
        nr::CYCLES => Ok(cpu::rdtsc()),
        nr::ARGS => args(frame.rdi, frame.rsi),
        nr::ROOT_SHARE..=nr::PAGE_FAULTS => object_call(frame),
        nr::LOCALITY_GET => locality_get(frame.rdi, frame.rsi),
        nr::SEGMENT_COPY => object_call(frame),
        _ => Err(Error::NoSuchCall),
    };
    abi::encode(result)
}

/// `write(ptr, len)`: the whole buffer is checked first, then copied in pieces into the
/// program's line buffer; control characters other than newline and tab become `.`.
fn write(ptr: u64, len: u64) -> SysResult {
    let mut buf = [0u8; WRITE_MAX];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(WRITE_MAX as u64) as usize;
        with_running(|_, space| {
            if done == 0 {
                space.check(ptr, len, false)?;
            }
            space.copy_in(ptr + done, &mut buf[..n])
        })
        .ok_or(Error::NotPermitted)??;
        for &b in &buf[..n] {
            emit(match b {
                b'\n' | b'\t' | 0x20..=0x7e | 0x80..=0xff => b,
                _ => b'.',
            });
        }
        done += n as u64;
    }
    Ok(len)
}

/// Corey's object calls (Figure 5), on the running program's share set.
fn object_call(frame: &SyscallFrame) -> SysResult {
    let (a, b, c) = (frame.rdi, frame.rsi, frame.rdx);
    with_running_mut(|r, space| {
        let p = &mut r.objects;
        match frame.rax {
            nr::ROOT_SHARE => Ok(p.root_share.0),
            nr::ROOT_AR => Ok(p.root_ar.0),
            nr::SHARE_ALLOC => corey::share_alloc(p, a),
            nr::SHARE_ADDOBJ => corey::share_addobj(p, a, b, c),
            nr::SHARE_DELOBJ => corey::share_delobj(p, a, b),
            nr::SELF_DROP => corey::self_drop(p, a),
            nr::OBJ_GET_NAME => corey::obj_get_name(p, a, b),
            nr::SEGMENT_ALLOC => corey::segment_alloc(p, a, b),
            nr::SEGMENT_GET_NBYTES => corey::segment_get_nbytes(p, a, b),
            nr::SEGMENT_SET_NBYTES => corey::segment_set_nbytes(p, space, a, b, c),
            nr::AR_ALLOC => corey::ar_alloc(p, a),
            nr::AR_SET_SEG => {
                let mut words = [0u8; 64];
                space.copy_in(a, &mut words)?;
                corey::ar_set_seg(p, space, abi::ArSetSeg::from_words(le_words(&words)))
            }
            nr::AR_SET_AR => {
                let mut words = [0u8; 48];
                space.copy_in(a, &mut words)?;
                corey::ar_set_ar(p, space, abi::ArSetAr::from_words(le_words(&words)))
            }
            nr::AR_GET => corey::ar_get(p, a, b, c),
            nr::PAGE_FAULTS => Ok(p.fault_count),
            nr::SEGMENT_COPY => corey::segment_copy(p, a, b, c),
            _ => Err(Error::NoSuchCall),
        }
    })
    .ok_or(Error::NotPermitted)?
}

/// `locality_get(core, out)`: the core's place and costs, from the SKB.
fn locality_get(core: u64, out: u64) -> SysResult {
    let target = crate::percpu::core(usize::try_from(core).map_err(|_| Error::InvalidArgument)?)
        .ok_or(Error::InvalidArgument)?;
    let me = this_core().index;
    let skb = crate::knowledge::get();
    let locality = abi::Locality {
        package: target.location.package as u64,
        core: target.location.core as u64,
        smt: target.location.smt as u64,
        node: target.node as u64,
        latency_cycles: skb.and_then(|s| s.latency(me, target.index)).unwrap_or(0),
        compute_speed: skb.and_then(|s| s.compute_speed(target.index)).unwrap_or(0),
    };
    let mut bytes = [0u8; 48];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(locality.to_words()) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    with_running(|_, space| space.copy_out(out, &bytes)).ok_or(Error::NotPermitted)??;
    Ok(0)
}

/// Little-endian words from bytes.
fn le_words<const N: usize>(bytes: &[u8]) -> [u64; N] {
    let mut words = [0u64; N];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    }
    words
}

/// Adds one byte to the program's line; prints the line at a newline or when it is long.
fn emit(byte: u8) {
    let full = this_core().user.with(|slot| {
        let r = slot.as_mut()?;
        if byte != b'\n' {
            r.line.push(byte);
        }
        (byte == b'\n' || r.line.len() >= LINE_MAX).then(|| core::mem::take(&mut r.line))
    });
    if let Some(line) = full {
        crate::println!("{}", String::from_utf8_lossy(&line));
    }
}

fn args(ptr: u64, len: u64) -> SysResult {
    with_running(|r, space| {
        space.check(ptr, len, true)?;
        let bytes = r.args.as_bytes();
        let n = bytes.len().min(len as usize);
        space.copy_out(ptr, &bytes[..n]).map(|_| n as u64)
    })
    .ok_or(Error::NotPermitted)?
}
