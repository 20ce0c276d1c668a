//! `badptr`: passes wild pointers and lengths to system calls. Every one must come back as
//! an error code (`BadAddress`/`NoSuchCall`), never a kernel fault. Prints `badptr: ok`.
//! The first cases are the basic calls; the rest are the object calls that read or write
//! user memory, given valid objects so that only the pointer is wrong. The machine calls
//! (`kernel_command`, `poweroff`) are refused without the machine device; if the program
//! was given it, a wild pointer is next.
#![no_std]
#![no_main]

extern crate alloc;

use libatoll::abi::{nr, Error};
use libatoll::obj::{device_alloc, file_open, pcore_alloc, root_ar, root_share, share_delobj};
use libatoll::{cores_online, pcore_current, println, syscall5, ObjRef};

/// The kernel half: never the user's.
const KERNEL: u64 = 0xffff_8000_0000_0000;
/// User memory nothing maps.
const UNMAPPED: u64 = 0x3000_0000;

fn main() -> i32 {
    let root = root_share();
    // Valid objects, so each call gets past its object checks to the pointer.
    // Any core's pcore will do (the shell holds its own core's while it lends it to us).
    let pcore = (0..cores_online())
        .map(|k| (pcore_current() + k) % cores_online())
        .find_map(|core| pcore_alloc(root, core).ok());
    let (Ok(file), Ok(dev)) = (file_open(root, "badptr"), device_alloc(root, 1)) else {
        println!("badptr: could not make the objects the cases need");
        return 1;
    };
    let mut cases: alloc::vec::Vec<(u64, [u64; 5], Error)> = alloc::vec![
        (nr::WRITE, [0, 10, 0, 0, 0], Error::BadAddress), // null
        (nr::WRITE, [KERNEL, 8, 0, 0, 0], Error::BadAddress), // kernel half
        (nr::WRITE, [0x7fff_ffff_fff0, 0x100, 0, 0, 0], Error::BadAddress), // crosses the end
        (nr::WRITE, [0x1000, u64::MAX, 0, 0, 0], Error::BadAddress), // length overflows
        (nr::WRITE, [UNMAPPED, 16, 0, 0, 0], Error::BadAddress), // unmapped user memory
        (nr::ARGS, [0x40_0000, 16, 0, 0, 0], Error::BadAddress), // read-only code page
        (9999, [0; 5], Error::NoSuchCall),                // no such call
        (nr::AR_SET_SEG, [UNMAPPED, 0, 0, 0, 0], Error::BadAddress),
        (nr::AR_SET_AR, [KERNEL, 0, 0, 0, 0], Error::BadAddress),
        (nr::PCORE_RUN, [0, 0, 0, 0, 0], Error::BadAddress),
        (nr::LOCALITY_GET, [0, KERNEL, 0, 0, 0], Error::BadAddress),
        (nr::DEVICE_LIST, [0, 4, 0, 0, 0], Error::BadAddress),
        (nr::DEVICE_STAT, [root, dev, KERNEL, 0, 0], Error::BadAddress),
        (nr::AR_MAPPINGS, [root, root_ar(), UNMAPPED, 4, 0], Error::BadAddress),
        (nr::FILE_LIST, [KERNEL, 100, 0, 0, 0], Error::BadAddress),
        (nr::FILE_OPEN, [root, 0, 5, 0, 0], Error::BadAddress),
        (nr::SEGMENT_READ, [root, file, 0, KERNEL, 64], Error::BadAddress),
        (nr::FILE_OPEN, [root, 0x40_0000, 1 << 20, 0, 0], Error::InvalidArgument), // too long
        // The machine calls want the machine device: no reference, a wrong device, a
        // wild one are all refused before any pointer is read; nobody allocates it.
        (nr::KERNEL_COMMAND, [0, 0, 0x40_0000 - 4096, 4, 0], Error::NotPermitted),
        (nr::KERNEL_COMMAND, [root, dev, UNMAPPED, 4, 0], Error::NotPermitted),
        (nr::POWEROFF, [0, 0, 0, 0, 0], Error::NotPermitted),
        (nr::POWEROFF, [root, dev, 0, 0, 0], Error::NotPermitted),
        (nr::POWEROFF, [KERNEL, u64::MAX, 0, 0, 0], Error::NotPermitted),
        (nr::DEVICE_ALLOC, [root, 3, 0, 0, 0], Error::NotPermitted),
        // A wait on a word it cannot read (issue M14: it once left its waiter bit set).
        (nr::WAIT, [UNMAPPED, 0, 0, 0, 0], Error::BadAddress),
        (nr::WAIT, [KERNEL, 0, 1000, 0, 0], Error::BadAddress),
        (nr::CONSOLE_READ, [0, 0, UNMAPPED, 4, 0], Error::NotPermitted),
    ];
    // Given the machine device (the kernel test runs it both ways), the pointer is next.
    if let Some(m) = libatoll::machine() {
        cases.push((nr::KERNEL_COMMAND, [m.share, m.object, UNMAPPED, 4, 0], Error::BadAddress));
        cases.push((nr::KERNEL_COMMAND, [m.share, m.object, KERNEL, 8, 0], Error::BadAddress));
    }
    // (On one core under the shell there is no pcore to spare: the case is left out.)
    if let Some(pcore) = pcore {
        cases.push((nr::PROGRAM_RUN, [root, pcore, UNMAPPED, 5, 0], Error::BadAddress));
    }
    let mut code = 0;
    for (i, &(number, [a, b, c, d, e], expected)) in cases.iter().enumerate() {
        let got = syscall5(number, a, b, c, d, e);
        if got != Err(expected) {
            println!("badptr: case {i} (call {number}): expected {expected:?}, got {got:?}");
            code = 1;
        }
    }
    for id in [file, dev].into_iter().chain(pcore) {
        let _ = share_delobj(ObjRef::new(root, id));
    }
    if code == 0 {
        println!("badptr: ok");
    }
    code
}

libatoll::main!(main);
