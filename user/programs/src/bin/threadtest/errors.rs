//! `errors`: bad arguments to every thread call are refused with the right error.

use super::Check;
use core::sync::atomic::AtomicU32;
use libatoll::abi::{nr, Error, ThreadCreate};
use libatoll::thread::{self};
use libatoll::{cores_online, pcore_current, syscall3, Status};

pub(crate) fn errors() -> Check {
    let word = AtomicU32::new(0);
    let addr = &word as *const AtomicU32 as u64;
    let err = |r: libatoll::abi::SysResult| r.err();
    if err(syscall3(nr::WAIT, addr + 1, 0, 1)) != Some(Error::InvalidArgument) {
        return Err("wait on an unaligned word was not refused");
    }
    if err(syscall3(nr::WAIT, 0x3000_0000, 0, 1)) != Some(Error::BadAddress) {
        return Err("wait on an unmapped word was not BadAddress");
    }
    if err(syscall3(nr::WAIT, addr, 1 << 40, 1)) != Some(Error::InvalidArgument) {
        return Err("wait for a value past 32 bits was not refused");
    }
    if err(syscall3(nr::SLEEP, 60_000_001, 0, 0)) != Some(Error::InvalidArgument) {
        return Err("a sleep over a minute was not refused");
    }
    if err(syscall3(nr::THREAD_JOIN, 0, 0, 0)) != Some(Error::InvalidArgument) {
        return Err("joining itself was not refused");
    }
    if err(syscall3(nr::THREAD_JOIN, libatoll::obj::root_share(), 12345, 0))
        != Some(Error::NoSuchObject)
    {
        return Err("joining a thread that does not exist was not NoSuchObject");
    }
    if err(syscall3(nr::THREAD_SET_AFFINITY, 0, 0, 0)) != Some(Error::InvalidArgument) {
        return Err("an empty affinity was not refused");
    }
    if err(syscall3(nr::THREAD_STAT, 0, 0, 0x10)) != Some(Error::BadAddress) {
        return Err("thread_stat to a wild pointer was not BadAddress");
    }
    if err(syscall3(nr::THREAD_CREATE, 0x10, 0, 0)) != Some(Error::BadAddress) {
        return Err("thread_create from a wild pointer was not BadAddress");
    }
    let root = libatoll::obj::root_share();
    let ar = libatoll::obj::root_ar();
    let create = |args: ThreadCreate| {
        let words = args.to_words();
        syscall3(nr::THREAD_CREATE, words.as_ptr() as u64, 0, 0)
    };
    let base = ThreadCreate {
        share: root,
        core: libatoll::abi::ANY_CORE,
        entry: 0x40_0000,
        stack: 0,
        ar: [root, ar],
        ..ThreadCreate::default()
    };
    if err(create(ThreadCreate { core: 64, ..base })) != Some(Error::InvalidArgument) {
        return Err("a thread on core 64 was not refused");
    }
    let here = pcore_current() as u64;
    let elsewhere = ThreadCreate { core: here, affinity: !(1 << here), ..base };
    if cores_online() > 1 && err(create(elsewhere)) != Some(Error::InvalidArgument) {
        return Err("a thread started outside its affinity was not refused");
    }
    if err(create(ThreadCreate { ar: [root, 999], ..base })) != Some(Error::NoSuchObject) {
        return Err("a thread on a range that does not exist was not NoSuchObject");
    }
    if err(create(ThreadCreate { entry: 1 << 63, ..base })) != Some(Error::InvalidArgument) {
        return Err("a thread entering the kernel half was not refused");
    }
    if err(create(ThreadCreate { nshares: 9, ..base })) != Some(Error::InvalidArgument) {
        return Err("nine shares were not refused");
    }
    // A thread that faults ends with its fault; the program goes on.
    let bad = thread::spawn(|| {
        // SAFETY: deliberately wild: the thread must fault, and only it.
        unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
        0
    })
    .map_err(|_| "spawn failed")?;
    if bad.join() != Status::Faulted(14) {
        return Err("a faulting thread did not end Faulted(14)");
    }
    Ok(())
}
