//! The system-call dispatcher ([`syscall_dispatch`]): one table from call number to
//! handler, the revocation barrier in front of calls that name objects, and the calls
//! that belong to no other room (console, files, devices, locality).

use super::program::{pcore_halt, pcore_run, program_run, CAPTURE};
use super::trap::stop_if_due;
use crate::arch::cpu;
use crate::arch::paging;
use crate::arch::user_entry::SyscallFrame;
use crate::corey;
use crate::corey::device as devices;
use crate::corey::revocation::{self, CAUGHT_UP};
use crate::corey::space::AddressSpace;
use crate::corey::user_memory::{copy_out, read_string, read_words, write_words};
use crate::drivers::virtio_net::{self, NetError};
use crate::initrd;
use crate::param::{CAPTURE_MAX, LINE_MAX, WRITE_CALL_MAX, WRITE_MAX};
use crate::percpu::this_core;
use crate::sched::{self, leave, with_running, with_running_mut};
use crate::thread::ExitStatus;
use abi::{nr, Error, SysResult};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Entry from `syscall_entry`: runs one system call, returns the result word.
#[no_mangle]
extern "C" fn syscall_dispatch(frame: &mut SyscallFrame) -> u64 {
    // `sysret` to a non-canonical address would fault in ring 0 on the user's stack.
    if frame.rip >= paging::USER_END {
        leave(ExitStatus::Faulted(13));
    }
    let (a, b, c) = (frame.rdi, frame.rsi, frame.rdx);
    // Calls that may name objects first see the revocations this core committed.
    let names_objects = !matches!(
        frame.rax,
        nr::NULL | nr::CYCLES | nr::PCORE_CURRENT | nr::WRITE | nr::EXIT | nr::SET_FS_BASE
    );
    let barrier = if names_objects { revocation_barrier() } else { Ok(()) };
    let result: SysResult = match frame.rax {
        _ if barrier.is_err() => Err(Error::Busy),
        nr::NULL => Ok(0),
        nr::WRITE => write(a, b),
        nr::EXIT => leave(ExitStatus::Exited(a as i32)),
        nr::PCORE_CURRENT => Ok(this_core().index as u64),
        nr::CYCLES => Ok(cpu::rdtsc()),
        nr::ARGS => args(a, b),
        nr::LOCALITY_GET => locality_get(a, b),
        nr::PROGRAM_RUN => program_run(frame, a, b, c, frame.r10, frame.r8),
        nr::CORES_ONLINE => Ok(crate::smp::online_cores().len() as u64),
        nr::KERNEL_COMMAND => kernel_command(a, b, c, frame.r10),
        nr::POWEROFF => poweroff(a, b),
        nr::CONSOLE_READ => console_read(a, b, c, frame.r10),
        nr::FILE_LIST => file_list(a, b),
        nr::DEVICE_LIST => device_list(a, b),
        nr::PCORE_HALT => pcore_halt(a, b),
        nr::THREAD_CREATE => sched::thread_create(a),
        nr::THREAD_JOIN => sched::thread_join(frame, a, b),
        nr::THREAD_STATUS => sched::thread_status(a, b),
        nr::YIELD => sched::yield_now(frame),
        nr::SLEEP => sched::sleep(frame, a),
        nr::WAIT => sched::wait(frame, a, b, c),
        nr::WAKE => sched::wake(a, b),
        nr::THREAD_SET_AFFINITY => sched::set_affinity(frame, a, b, c),
        nr::THREAD_STAT => sched::thread_stat(a, b, c),
        nr::SET_FS_BASE => sched::set_fs_base(a),
        nr::DEVICE_SEND => device_send(a, b, c, frame.r10),
        nr::DEVICE_RECEIVE => device_receive(a, b, c, frame.r10),
        nr::FS_OPEN..=nr::FS_STATFS => super::files::call(frame),
        nr::ROOT_SHARE..=nr::PAGE_FAULTS
        | nr::SEGMENT_COPY..=nr::SEGMENT_READ
        | nr::SHARE_DUPOBJ
        | nr::OBJ_REVOKE
        | nr::PCORE_ADD_DEVICE..=nr::DEVICE_CONF => object_call(frame),
        _ => Err(Error::NoSuchCall),
    };
    // Only a call that took steps can have outlived a tick's checks (a plain load keeps
    // the null call's path short).
    let core = this_core();
    if core.stepped.load(Ordering::Relaxed) {
        core.stepped.store(false, Ordering::Relaxed);
        stop_if_due();
    }
    abi::encode(result)
}

/// Revocation's barrier before a call that may name objects (`objects::revoke`): while a
/// revocation is prepared on this core the call waits for its decision (so no new entry
/// of the object appears behind a scrub; `Busy` if none comes in time), then the caller's
/// share set catches up with the revocations this core committed.
pub(super) fn revocation_barrier() -> Result<(), Error> {
    if crate::twophase::revocation_prepared_here() {
        let start = cpu::rdtsc();
        while crate::twophase::revocation_prepared_here() {
            if crate::arch::timer::us_since(start) > crate::param::TWO_PHASE_TIMEOUT_US {
                return Err(Error::Busy);
            }
            crate::monitor::poll();
            // Its coordinator may have faulted: then the participants decide among them.
            crate::twophase::resolve_orphans();
            crate::monitor::step(); // not seconds with interrupts off
        }
    }
    if revocation::revocations_committed() != 0 {
        with_running_mut(|r, _| revocation::catch_up(&mut r.objects));
    }
    CAUGHT_UP.with(|c| *c = revocation::revocations_committed());
    Ok(())
}

/// `write(ptr, len)`: prints at most [`WRITE_CALL_MAX`] bytes and returns the count. Those
/// bytes are checked first, then copied in pieces into the program's line buffer; control
/// characters other than newline and tab become `.`.
pub(super) fn write(ptr: u64, len: u64) -> SysResult {
    let len = len.min(WRITE_CALL_MAX);
    let mut buf = [0u8; WRITE_MAX];
    let mut done = 0;
    while done < len {
        if done > 0 {
            crate::monitor::step();
        }
        let n = (len - done).min(WRITE_MAX as u64) as usize;
        with_running_mut(|r, space| {
            if done == 0 {
                corey::fault_in(&mut r.objects, space, ptr, len, false);
                space.check(ptr, len, false)?;
            }
            space.copy_in(ptr + done, &mut buf[..n])
        })
        .ok_or(Error::NotPermitted)??;
        for &b in &buf[..n] {
            emit(match b {
                // Backspace too: the shell's line editing echoes it.
                b'\n' | b'\t' | 0x08 | 0x20..=0x7e | 0x80..=0xff => b,
                _ => b'.',
            });
        }
        done += n as u64;
    }
    Ok(len)
}

/// Corey's object calls (Figure 5), on the running context's share set.
pub(super) fn object_call(frame: &SyscallFrame) -> SysResult {
    let (a, b, c, d, e) = (frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8);
    with_running_mut(|r, space| {
        let p = &mut r.objects;
        match frame.rax {
            nr::ROOT_SHARE => Ok(p.set.root_id().0),
            nr::ROOT_AR => Ok(p.root_ar.id().0),
            nr::SHARE_ALLOC => corey::share_alloc(p, a),
            nr::SHARE_ADDOBJ => corey::share_addobj(p, a, b, c),
            nr::SHARE_DELOBJ => corey::share_delobj(p, a, b),
            nr::SHARE_DUPOBJ => corey::share_dupobj(p, a, b, c),
            nr::OBJ_REVOKE => revocation::obj_revoke(p, a, b),
            nr::SELF_DROP => corey::self_drop(p, a),
            nr::OBJ_GET_NAME => corey::obj_get_name(p, a, b),
            nr::SEGMENT_ALLOC => corey::segment_alloc(p, a, b),
            nr::SEGMENT_GET_NBYTES => corey::segment_get_nbytes(p, a, b),
            nr::SEGMENT_SET_NBYTES => corey::segment_set_nbytes(p, a, b, c),
            nr::SEGMENT_COPY => corey::segment_copy(p, a, b, c, d),
            nr::SEGMENT_READ => corey::segment_read(p, space, a, b, c, d, e),
            nr::AR_ALLOC => corey::ar_alloc(p, a, b),
            nr::AR_SET_SEG => {
                let w = read_words::<8>(p, space, a)?;
                corey::ar_set_seg(p, abi::ArSetSeg::from_words(w))
            }
            nr::AR_SET_AR => {
                let w = read_words::<6>(p, space, a)?;
                corey::ar_set_ar(p, abi::ArSetAr::from_words(w))
            }
            nr::AR_GET => corey::ar_get(p, a, b, c),
            nr::AR_MAPPINGS => ar_mappings(p, space, a, b, c, d),
            nr::PAGE_FAULTS => match a {
                abi::faults::CONTEXT => Ok(p.fault_count),
                abi::faults::ADDRESS_SPACE => Ok(corey::range_faults(&p.root_ar)),
                _ => Err(Error::InvalidArgument),
            },
            nr::SET_ADD_SHARE => corey::set_add_share(p, a, b),
            nr::FILE_OPEN => {
                let name = read_string(p, space, b, c)?;
                let data = initrd::find(&name).ok_or(Error::NoSuchObject)?;
                corey::segment_from(p, a, data)
            }
            nr::PCORE_ALLOC => corey::pcore_alloc(p, a, b),
            nr::PCORE_RUN => pcore_run(p, space, a),
            nr::PCORE_STATUS => corey::pcore_status(p, a, b),
            nr::PCORE_SET_INTERVAL => corey::pcore_set_interval(p, a, b, c),
            nr::DEVICE_ALLOC => corey::device_alloc(p, a, b),
            nr::PCORE_ADD_DEVICE => corey::pcore_add_device(p, a, b, c, d),
            nr::DEVICE_BUF => corey::device_buf(p, a, b, c, d, e),
            nr::DEVICE_CONF => corey::device_conf(p, a, b, c, d),
            nr::DEVICE_STAT => {
                let hwid = corey::device_hwid(p, a, b)?;
                let st = devices::stat(hwid).ok_or(Error::NoSuchObject)?;
                write_words(p, space, c, &[st.hwid, st.kind, st.count, st.detail])?;
                Ok(0)
            }
            _ => Err(Error::NoSuchCall),
        }
    })
    .ok_or(Error::NotPermitted)?
}

/// `ar_mappings(ar, buf, max)`: the range's mappings, at most `max` written to `buf`
/// (48 bytes each); returns how many there are.
fn ar_mappings(
    p: &mut corey::ProgramObjects,
    space: &mut AddressSpace,
    rs: u64,
    ro: u64,
    buf: u64,
    max: u64,
) -> SysResult {
    // At most what the caller has room for is collected.
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let (total, listed) = corey::ar_mappings(p, rs, ro, max)?;
    // Written out a few at a time from the stack: no second copy on the heap. The whole
    // destination is checked first, so a bad one copies nothing.
    let len = (listed.len() * 48) as u64;
    corey::fault_in(p, space, buf, len, true);
    space.check(buf, len, true)?;
    const AT_ONCE: usize = 32;
    let mut bytes = [0u8; AT_ONCE * 48];
    for (i, chunk) in listed.chunks(AT_ONCE).enumerate() {
        let words = chunk.iter().flat_map(|m| m.to_words());
        let n = chunk.len() * 48;
        for (slot, word) in bytes[..n].chunks_exact_mut(8).zip(words) {
            slot.copy_from_slice(&word.to_le_bytes());
        }
        let at = buf.saturating_add((i * AT_ONCE * 48) as u64);
        copy_out(p, space, at, &bytes[..n])?;
    }
    Ok(total as u64)
}

/// Checks that ⟨share, obj⟩ names a machine device in the running context's share set:
/// the capability `kernel_command` and `poweroff` ask for.
pub(super) fn check_machine(share: u64, obj: u64) -> Result<(), Error> {
    match with_running(|r, _| corey::holds_device(&r.objects, share, obj, devices::MACHINE)) {
        Some(true) => Ok(()),
        _ => Err(Error::NotPermitted),
    }
}

/// `poweroff(machine_share, machine_obj)`.
pub(super) fn poweroff(share: u64, obj: u64) -> SysResult {
    check_machine(share, obj)?;
    // Powering off unmounts the disk: what programs wrote is on it, even unsynced.
    match crate::storage::sync() {
        Ok(()) | Err(Error::NoFileSystem) => {}
        Err(e) => crate::println!("poweroff: the disk's sync failed: {e:?}"),
    }
    crate::print::flush();
    crate::arch::power::power_off()
}

/// `kernel_command(machine_share, machine_obj, line, len)`: one line of the kernel console.
pub(super) fn kernel_command(share: u64, obj: u64, ptr: u64, len: u64) -> SysResult {
    check_machine(share, obj)?;
    let line = with_running_mut(|r, space| read_string(&mut r.objects, space, ptr, len))
        .ok_or(Error::NotPermitted)??;
    devices::count_machine_command();
    // The console's own `run` would start programs on this core through a remote call to
    // itself, which waits forever while this program holds the core.
    if line.split_whitespace().next() == Some("run") {
        return Err(Error::NotPermitted);
    }
    let console = KERNEL_CONSOLE.get().ok_or(Error::NoSuchCall)?;
    // One line at a time, machine-wide: a line that works on other cores (`sched`, `asym`,
    // `retype`, `bench`) waits in `smp::run_on` for their calls, and a core inside a
    // system call serves calls only when it returns, so two such lines on two cores
    // waited for each other until a timeout (found by the unguarded fuzzer, issue M14).
    if CONSOLE_LINE.swap(true, Ordering::Acquire) {
        return Err(Error::Busy);
    }
    // The console printed why it refused a line. A line that waited in vain for other
    // cores (a report or change sent to a core busy in a long call) is `TimedOut`, not a
    // bad line: the caller may try it again.
    let unanswered = crate::monitor::stats().calls_timed_out;
    let result = console(&line).map(|_| 0).map_err(|_| {
        if crate::monitor::stats().calls_timed_out > unanswered {
            Error::TimedOut
        } else {
            Error::InvalidArgument
        }
    });
    CONSOLE_LINE.store(false, Ordering::Release);
    result
}

/// Set while a `kernel_command` line runs (see there): the one machine-wide flag a
/// program's console line takes, as the serial console it prints to is one.
pub(super) static CONSOLE_LINE: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);

/// Runs one kernel-console line and reports a refusal on the console itself; `Err` is its
/// answer to a line it refused.
pub type ConsoleExecute = fn(&str) -> Result<(), String>;

/// What runs a `kernel_command` line: the kernel console's `execute`, installed at boot
/// (the console sits above this layer).
pub(super) static KERNEL_CONSOLE: spin::Once<ConsoleExecute> = spin::Once::new();

/// Installs the kernel console for `kernel_command` (once, at boot).
pub fn set_kernel_console(execute: ConsoleExecute) {
    KERNEL_CONSOLE.call_once(|| execute);
}

/// `console_read(keyboard_share, keyboard_obj, buf, len)`: bytes typed so far, without
/// waiting; ⟨keyboard_share, keyboard_obj⟩ must name the keyboard device (the kernel gives
/// it to `init` alone), so no other program reads keystrokes meant for the shell. A
/// program that reads wants what it printed so far (a prompt, an echo) on the screen: its
/// unfinished line is printed first, as stdio flushes before input.
pub(super) fn console_read(share: u64, obj: u64, ptr: u64, len: u64) -> SysResult {
    match with_running(|r, _| corey::holds_device(&r.objects, share, obj, devices::KEYBOARD)) {
        Some(true) => {}
        _ => return Err(Error::NotPermitted),
    }
    let pending = sched::with_current(|r| core::mem::take(&mut r.line));
    if let Some(bytes) = pending.filter(|b| !b.is_empty()) {
        crate::print!("{}", String::from_utf8_lossy(&bytes));
    }
    let mut bytes = Vec::new();
    while (bytes.len() as u64) < len.min(256) {
        match crate::arch::serial::try_read_byte() {
            Some(b) => bytes.push(b),
            None => break,
        }
    }
    with_running_mut(|r, space| copy_out(&mut r.objects, space, ptr, &bytes))
        .ok_or(Error::NotPermitted)??;
    devices::count_keyboard_bytes(bytes.len() as u64);
    Ok(bytes.len() as u64)
}

/// Whether the caller holds ⟨share, obj⟩, a device object of the started network device.
fn holds_nic(share: u64, obj: u64) -> Result<(), Error> {
    let nic = virtio_net::info().ok_or(Error::NotPermitted)?;
    match with_running(|r, _| corey::device_hwid(&r.objects, share, obj)) {
        Some(Ok(hwid)) if hwid == nic.hwid => Ok(()),
        Some(Err(e)) => Err(e),
        _ => Err(Error::NotPermitted),
    }
}

/// `device_send(dev, buf, len)`: one Ethernet frame to the network device, from this core.
pub(super) fn device_send(share: u64, obj: u64, ptr: u64, len: u64) -> SysResult {
    holds_nic(share, obj)?;
    if !(14..=virtio_net::MAX_FRAME as u64).contains(&len) {
        return Err(Error::InvalidArgument);
    }
    let mut frame = [0u8; virtio_net::MAX_FRAME];
    let frame = &mut frame[..len as usize];
    with_running_mut(|r, space| {
        corey::fault_in(&mut r.objects, space, ptr, len, false);
        space.copy_in(ptr, frame)
    })
    .ok_or(Error::NotPermitted)??;
    virtio_net::send(frame).map(|_| 0).map_err(NetError::to_abi)
}

/// `device_receive(dev, buf, len)`: the next frame the network device received, if any.
pub(super) fn device_receive(share: u64, obj: u64, ptr: u64, len: u64) -> SysResult {
    holds_nic(share, obj)?;
    let mut frame = [0u8; virtio_net::MAX_FRAME];
    let Some(whole) = virtio_net::receive(&mut frame) else { return Ok(0) };
    let n = whole.min(len as usize).min(frame.len());
    // A bad buffer loses this frame (it was taken off the device): the caller's fault.
    with_running_mut(|r, space| copy_out(&mut r.objects, space, ptr, &frame[..n]))
        .ok_or(Error::NotPermitted)??;
    Ok(whole as u64)
}

/// `file_list(buf, len)`: the initrd's names, one per line.
pub(super) fn file_list(ptr: u64, len: u64) -> SysResult {
    let mut text = String::new();
    for (name, _) in initrd::files() {
        text.push_str(name);
        text.push('\n');
    }
    let n = (len as usize).min(text.len());
    with_running_mut(|r, space| copy_out(&mut r.objects, space, ptr, &text.as_bytes()[..n]))
        .ok_or(Error::NotPermitted)??;
    Ok(text.len() as u64)
}

/// `device_list(buf, max)`.
pub(super) fn device_list(ptr: u64, max: u64) -> SysResult {
    let all = devices::list();
    let n = (max as usize).min(all.len());
    let words: Vec<u64> = all[..n].iter().flat_map(|d| [d.hwid, d.kind, d.core, d.name]).collect();
    with_running_mut(|r, space| write_words(&mut r.objects, space, ptr, &words))
        .ok_or(Error::NotPermitted)??;
    Ok(all.len() as u64)
}

/// `locality_get(core, out)`: the core's place and costs, from the SKB.
pub(super) fn locality_get(core: u64, out: u64) -> SysResult {
    let target = crate::percpu::core(usize::try_from(core).map_err(|_| Error::InvalidArgument)?)
        .ok_or(Error::InvalidArgument)?;
    let me = this_core().index;
    let skb = crate::skb_replica::get();
    let locality = abi::Locality {
        package: target.location.package as u64,
        core: target.location.core as u64,
        smt: target.location.smt as u64,
        node: target.node as u64,
        latency_cycles: skb.and_then(|s| s.latency(me, target.index)).unwrap_or(0),
        compute_speed: crate::knowledge::compute_speed(target.index).unwrap_or(0),
        // One value for the machine: the boot core's (CPUID or its chase).
        llc_bytes: crate::sched::last_level_cache_bytes(),
    };
    with_running_mut(|r, space| write_words(&mut r.objects, space, out, &locality.to_words()))
        .ok_or(Error::NotPermitted)??;
    Ok(0)
}

/// Adds one byte to the program's line; prints the line at a newline or when it is long.
pub(super) fn emit(byte: u8) {
    let full = sched::with_current(|r| {
        if byte != b'\n' {
            r.line.push(byte);
        }
        (byte == b'\n' || r.line.len() >= LINE_MAX).then(|| core::mem::take(&mut r.line))
    })
    .flatten();
    if let Some(line) = full {
        let line = String::from_utf8_lossy(&line);
        CAPTURE.with(|c| {
            if let Some(kept) = c.as_mut().filter(|k| k.len() + line.len() < CAPTURE_MAX) {
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        crate::println!("{line}");
    }
}

pub(super) fn args(ptr: u64, len: u64) -> SysResult {
    with_running_mut(|r, space| {
        corey::fault_in(&mut r.objects, space, ptr, len, true);
        space.check(ptr, len, true)?;
        let bytes = r.args.as_bytes();
        let n = bytes.len().min(len as usize);
        space.copy_out(ptr, &bytes[..n]).map(|_| n as u64)
    })
    .ok_or(Error::NotPermitted)?
}
