//! `fdtest`: descriptors in shares (libatoll's `FdTable` over `share_dupobj`, the talk's
//! file-descriptor example). A `dup`ped descriptor names the same open file, not a copy,
//! and shares its offset; closing the original leaves the `dup` readable; a closed
//! descriptor names nothing; descriptors work across shares (a shared table) and are
//! released with the share; bad shares, unknown objects and shares are refused; `dup`
//! until the kernel says `NoResources`, then every descriptor closes. Prints `fdtest: ok`
//! (or the first check that failed); the kernel test checks every core balances after.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::abi::{Error, ObjectKind};
use libatoll::fd::FdTable;
use libatoll::obj::{self, *};
use libatoll::{println, ObjRef};

/// The file every check reads (this program, always in the initrd).
const FILE: &str = "fdtest";
/// More `dup`s than one core's object cap (16,384) allows, so the loop must be refused.
const DUP_BOUND: usize = 40_000;

macro_rules! check {
    ($cond:expr, $($what:tt)*) => {
        if !$cond {
            return Err(alloc::format!($($what)*));
        }
    };
}

fn main() -> i32 {
    match private_table()
        .and_then(|_| same_object())
        .and_then(|_| shared_table())
        .and_then(|_| refusals())
        .and_then(|_| until_full())
    {
        Ok(()) => {
            println!("fdtest: ok");
            0
        }
        Err(why) => {
            println!("fdtest: FAILED: {why}");
            1
        }
    }
}

/// `n` bytes of the file from `at`, read straight from its segment.
fn bytes_at(fd: ObjRef, at: u64, n: usize) -> Vec<u8> {
    let mut buf = alloc::vec![0u8; n];
    let got = segment_read(fd, at, &mut buf).unwrap_or(0) as usize;
    buf.truncate(got);
    buf
}

/// Open, read, `dup` (the offset is shared), close the original, read on, close.
fn private_table() -> Result<(), alloc::string::String> {
    let mut t = FdTable::private();
    let root = t.share();
    let fd = t.open(FILE).map_err(|e| alloc::format!("open: {e:?}"))?;
    let size = t.size(fd).unwrap_or(0);
    check!(size > 64, "the file has {size} bytes");
    let mut a = [0u8; 16];
    check!(t.read(fd, &mut a) == Ok(16), "read 16");
    check!(
        a[..] == bytes_at(ObjRef::new(root, fd), 0, 16)[..],
        "read gives the file's first bytes"
    );
    let dup = t.dup(fd).map_err(|e| alloc::format!("dup: {e:?}"))?;
    check!(dup != fd, "dup returned the same id");
    check!(obj_get_name(ObjRef::new(root, dup)) == Ok(ObjectKind::Segment as u64), "dup's kind");
    check!(t.size(dup) == Ok(size), "dup's size");
    // The dup reads on from the shared offset, and moves it for the original too.
    let mut b = [0u8; 16];
    check!(t.read(dup, &mut b) == Ok(16), "read 16 through the dup");
    check!(b[..] == bytes_at(ObjRef::new(root, fd), 16, 16)[..], "the dup shares the offset");
    check!(t.read(fd, &mut b) == Ok(16), "read 16 through the original");
    check!(b[..] == bytes_at(ObjRef::new(root, fd), 32, 16)[..], "the original saw the dup's read");
    // A dup of the dup; closing the original keeps both readable.
    let dup2 = t.dup(dup).map_err(|e| alloc::format!("dup of a dup: {e:?}"))?;
    check!(t.close(fd).is_ok(), "close the original");
    check!(
        obj_get_name(ObjRef::new(root, fd)) == Err(Error::NoSuchObject),
        "closed fd names nothing"
    );
    check!(t.close(fd) == Err(Error::NoSuchObject), "closing twice is refused");
    check!(t.read(dup2, &mut b) == Ok(16), "read through the dup after the original closed");
    check!(b[..] == bytes_at(ObjRef::new(root, dup), 48, 16)[..], "the dups kept the offset");
    check!(t.close(dup).is_ok() && t.close(dup2).is_ok(), "close the dups");
    check!(t.read(dup2, &mut b) == Err(Error::NoSuchObject), "a closed dup reads nothing");
    Ok(())
}

/// A descriptor names the object itself: a resize through one is seen through the other
/// (a copy, as `dup` once made, would keep its size).
fn same_object() -> Result<(), alloc::string::String> {
    let root = root_share();
    let seg = segment_alloc(root, 4096).map_err(|e| alloc::format!("segment_alloc: {e:?}"))?;
    let fd = share_dupobj(root, ObjRef::new(root, seg)).map_err(|e| alloc::format!("{e:?}"))?;
    let resized = segment_set_nbytes(ObjRef::new(root, seg), 3 * 4096);
    let seen = segment_get_nbytes(ObjRef::new(root, fd));
    let _ = share_delobj(ObjRef::new(root, seg));
    let _ = share_delobj(ObjRef::new(root, fd));
    check!(
        resized.is_ok() && seen == Ok(3 * 4096),
        "the descriptor's size is {seen:?}, not the object's"
    );
    Ok(())
}

/// A shared table: a descriptor of a root-share file placed in it, read through it after
/// the original closed; a descriptor left in the share is released with it.
fn shared_table() -> Result<(), alloc::string::String> {
    let root = root_share();
    let mut private = FdTable::private();
    let mut shared = FdTable::new_shared().map_err(|e| alloc::format!("share_new: {e:?}"))?;
    let fd = private.open(FILE).map_err(|e| alloc::format!("open: {e:?}"))?;
    let there = share_dupobj(shared.share(), ObjRef::new(root, fd))
        .map_err(|e| alloc::format!("dup into the shared table: {e:?}"))?;
    let again = shared.dup(there).map_err(|e| alloc::format!("dup in the shared table: {e:?}"))?;
    check!(private.close(fd).is_ok(), "close the original");
    let mut a = [0u8; 8];
    check!(shared.read(again, &mut a) == Ok(8), "read through the shared table");
    check!(a[..] == bytes_at(ObjRef::new(shared.share(), there), 0, 8)[..], "it reads the file");
    check!(shared.close(again).is_ok(), "close in the shared table");
    // `there` stays in the share; freeing the share releases it and the file.
    obj::share_free(shared.share());
    check!(
        obj_get_name(ObjRef::new(shared.share(), there)) == Err(Error::NoSuchObject),
        "the freed table still names its descriptor"
    );
    Ok(())
}

/// Bad shares, unknown objects, shares and descriptors of nothing are refused.
fn refusals() -> Result<(), alloc::string::String> {
    let root = root_share();
    let seg = segment_alloc(root, 4096).map_err(|e| alloc::format!("segment_alloc: {e:?}"))?;
    let share = share_alloc(root).map_err(|e| alloc::format!("share_alloc: {e:?}"))?;
    let cases = [
        (root + 4321, ObjRef::new(root, seg), Error::NoSuchObject, "a share outside the set"),
        (share, ObjRef::new(root, seg), Error::NoSuchObject, "a share held but not in the set"),
        (root, ObjRef::new(root, 0), Error::NoSuchObject, "object 0"),
        (root, ObjRef::new(root, u64::MAX), Error::NoSuchObject, "an unknown object"),
        (
            root,
            ObjRef::new(root + 4321, seg),
            Error::NoSuchObject,
            "a reference through a share outside the set",
        ),
        (root, ObjRef::new(root, share), Error::InvalidArgument, "a share"),
        (root, ObjRef::new(root, root), Error::NoSuchObject, "the root share"),
    ];
    let mut failed = None;
    for (into, what, want, case) in cases {
        let got = share_dupobj(into, what);
        if got != Err(want) {
            failed = Some(alloc::format!("share_dupobj of {case}: {got:?}, expected {want:?}"));
            if let Ok(id) = got {
                let _ = share_delobj(ObjRef::new(into, id));
            }
            break;
        }
    }
    let _ = share_delobj(ObjRef::new(root, seg));
    let _ = share_delobj(ObjRef::new(root, share));
    failed.map_or(Ok(()), Err)
}

/// `dup` until the kernel refuses with `NoResources` (the cap on a core's kernel
/// metadata), then close every descriptor.
fn until_full() -> Result<(), alloc::string::String> {
    let root = root_share();
    let fd = file_open(root, FILE).map_err(|e| alloc::format!("open: {e:?}"))?;
    let mut fds = Vec::new();
    let mut last = Ok(0);
    for _ in 0..DUP_BOUND {
        last = share_dupobj(root, ObjRef::new(root, fd));
        match last {
            Ok(new) => fds.push(new),
            Err(_) => break,
        }
    }
    let closed = fds.iter().all(|&d| share_delobj(ObjRef::new(root, d)).is_ok());
    let _ = share_delobj(ObjRef::new(root, fd));
    check!(last == Err(Error::NoResources), "dup {} times ended {last:?}", fds.len());
    check!(closed, "closing the descriptors");
    Ok(())
}

libatoll::main!(main);
