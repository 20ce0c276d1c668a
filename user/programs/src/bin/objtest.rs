//! `objtest`: exercises Corey's objects from user space — segments filled on first touch
//! through the root address range, shares and the share-set access check, nested ranges,
//! reference counts — and prints `objtest: ok` (or the first check that failed).
#![no_std]
#![no_main]

use libatoll::abi::{ar_kind, copy_mode, map, ArSetAr, ArSetSeg, Error, ObjectKind};
use libatoll::obj::{self, *};
use libatoll::{println, ObjRef};

const PAGE: u64 = 4096;
/// Where the test maps its segment (1 GiB: clear of the program image and stack).
const AT: u64 = 0x4000_0000;

macro_rules! check {
    ($cond:expr, $($what:tt)*) => {
        if !$cond {
            println!("objtest: FAILED: {}", format_args!($($what)*));
            return Err(Failed);
        }
    };
}

/// A check failed (and said which).
struct Failed;

type Step<T = ()> = Result<T, Failed>;

fn main() -> i32 {
    match run() {
        Ok(()) => {
            println!("objtest: ok ({} soft faults)", page_faults());
            0
        }
        Err(Failed) => 1,
    }
}

/// The checks, in order: each step builds on what the ones before made.
fn run() -> Step {
    let root = obj::root_share();
    let ar = ObjRef { share: root, object: obj::root_ar() };
    let (seg, set) = segment_fills_on_touch(root, ar)?;
    plain_copy(root, seg, set)?;
    let s2 = access_control(root, seg.object)?;
    let seg2 = nested_range(root, ar)?;
    references(root, ar, seg, s2, seg2)?;
    devices(root)
}

/// A 3-page segment mapped read-write at [`AT`]: pages fill with zeroes on first touch.
/// Returns the segment and its mapping.
fn segment_fills_on_touch(root: u64, ar: ObjRef) -> Step<(ObjRef, ArSetSeg)> {
    let seg_id = segment_alloc(root, 3 * PAGE).unwrap_or(0);
    let seg = ObjRef { share: root, object: seg_id };
    check!(seg_id != 0, "segment_alloc");
    check!(obj_get_name(seg) == Ok(ObjectKind::Segment as u64), "obj_get_name(segment)");
    check!(segment_get_nbytes(seg) == Ok(3 * PAGE), "segment_get_nbytes");
    let set = ArSetSeg {
        ar: [ar.share, ar.object],
        va: AT,
        seg: [seg.share, seg.object],
        first_page: 0,
        pages: 3,
        flags: map::WRITE,
    };
    check!(ar_set_seg(&set).is_ok(), "ar_set_seg");
    check!(ar_get(ar, AT + PAGE) == Ok(seg_id), "ar_get");
    let faults = page_faults();
    let p = AT as *mut u64;
    // SAFETY: the root range maps these pages read-write; the kernel fills them on touch.
    unsafe {
        check!(p.read_volatile() == 0, "a new page reads zero");
        p.write_volatile(0x1234);
        p.add(2 * 512).write_volatile(0x5678);
        check!(
            p.read_volatile() == 0x1234 && p.add(1024).read_volatile() == 0x5678,
            "writes stick"
        );
    }
    check!(
        page_faults() == faults + 2,
        "two pages touched, two soft faults ({} -> {})",
        faults,
        page_faults()
    );
    Ok((seg, set))
}

/// A plain copy: same contents now, independent afterwards.
fn plain_copy(root: u64, seg: ObjRef, set: ArSetSeg) -> Step {
    let seg_id = seg.object;
    let p = AT as *mut u64;
    let copy_id = segment_copy(root, seg, copy_mode::PLAIN).unwrap_or(0);
    check!(copy_id != 0 && copy_id != seg_id, "segment_copy");
    let copy_at = AT + (1 << 20);
    let map_copy = ArSetSeg { va: copy_at, seg: [root, copy_id], ..set };
    check!(ar_set_seg(&map_copy).is_ok(), "ar_set_seg(copy)");
    // SAFETY: both mapped read-write by the root range.
    unsafe {
        let c = copy_at as *mut u64;
        check!(c.read_volatile() == 0x1234, "the copy has the contents");
        check!(c.add(1024).read_volatile() == 0x5678, "the copy has the contents (page 2)");
        p.write_volatile(0x9999);
        check!(c.read_volatile() == 0x1234, "writing the original leaves the copy alone");
        p.write_volatile(0x1234);
    }
    Ok(())
}

/// Access control: a share outside the set, an object outside the share. Returns a share
/// reachable from the root share but not in the share set.
fn access_control(root: u64, seg_id: u64) -> Step<u64> {
    let stranger = ObjRef { share: root + 12345, object: seg_id };
    check!(obj_get_name(stranger) == Err(Error::NoSuchObject), "a share not in the set is refused");
    let s2 = share_alloc(root).unwrap_or(0);
    check!(s2 != 0, "share_alloc");
    check!(
        obj_get_name(ObjRef { share: s2, object: seg_id }) == Err(Error::NoSuchObject),
        "not in that share"
    );
    check!(self_drop(root) == Err(Error::NotPermitted), "the root share cannot be dropped");
    Ok(s2)
}

/// Nested range: a second segment through a range spliced in at 2 GiB; returns it.
fn nested_range(root: u64, ar: ObjRef) -> Step<u64> {
    let inner = ar_alloc(root, ar_kind::SLOT).unwrap_or(0);
    let seg2 = segment_alloc(root, PAGE).unwrap_or(0);
    check!(inner != 0 && seg2 != 0, "ar_alloc/segment_alloc");
    let inner_ref = [root, inner];
    let set2 = ArSetSeg {
        ar: inner_ref,
        va: 0,
        seg: [root, seg2],
        first_page: 0,
        pages: 1,
        flags: map::WRITE,
    };
    check!(ar_set_seg(&set2).is_ok(), "ar_set_seg(inner)");
    let splice =
        ArSetAr { ar: [ar.share, ar.object], va: 2 << 30, child: inner_ref, flags: map::WRITE };
    check!(ar_set_ar(&splice).is_ok(), "ar_set_ar");
    let cycle = ArSetAr { ar: inner_ref, va: 0, child: [ar.share, ar.object], flags: 0 };
    check!(ar_set_ar(&cycle) == Err(Error::InvalidArgument), "a cycle of ranges is refused");
    // SAFETY: mapped read-write through the nested range.
    unsafe {
        let q = (2u64 << 30) as *mut u64;
        q.write_volatile(77);
        check!(q.read_volatile() == 77, "nested range page");
    }
    Ok(seg2)
}

/// References: the root share and the range both hold the segment `seg`; dropping the
/// share's reference keeps the mapping alive. Then bad arguments are errors.
fn references(root: u64, ar: ObjRef, seg: ObjRef, s2: u64, seg2: u64) -> Step {
    let p = AT as *mut u64;
    // s2 is reachable through the root share but not in the share set: it cannot be named.
    check!(
        share_addobj(s2, seg) == Err(Error::NoSuchObject),
        "a share outside the set is not writable"
    );
    check!(share_delobj(seg).is_ok(), "share_delobj(root)");
    check!(obj_get_name(seg) == Err(Error::NoSuchObject), "the segment is out of the root share");
    // SAFETY: the range still maps the segment (it holds a reference).
    unsafe { check!(p.read_volatile() == 0x1234, "the range keeps the segment alive") };
    // Bad arguments are errors.
    let bad = ArSetSeg {
        ar: [ar.share, ar.object],
        va: AT + 1,
        seg: [root, seg2],
        first_page: 0,
        pages: 1,
        flags: 0,
    };
    check!(ar_set_seg(&bad) == Err(Error::InvalidArgument), "an unaligned mapping is refused");
    check!(segment_alloc(root, u64::MAX) == Err(Error::NoResources), "a huge segment is refused");
    Ok(())
}

/// Devices (Corey §4.4): the serial console, the initrd, the machine, the keyboard, a
/// timer per core and the PCI functions, the NIC among them if there is one (the machine
/// and keyboard are capabilities: nobody allocates them); a device object reports its
/// counters.
fn devices(root: u64) -> Step {
    use libatoll::abi::device_kind::{NET, PCI, PCI_HWID_BASE, SYSCALL, TIMER};
    let mut devices = [libatoll::abi::DeviceInfo::default(); 64];
    let n = libatoll::obj::device_list(&mut devices).unwrap_or(0).min(devices.len());
    let listed = &devices[..n];
    let timers = listed.iter().filter(|d| d.kind == TIMER).count();
    let pci = listed.iter().filter(|d| d.kind == PCI || d.kind == NET).count();
    let syscall = listed.iter().filter(|d| d.kind == SYSCALL).count();
    check!(
        timers == libatoll::cores_online() && syscall == 1 && n == 5 + timers + pci,
        "device_list: serial, initrd, machine, keyboard, syscall, one timer per core, PCI functions"
    );
    // q35's host bridge is 00:00.0; a PCI device object reports its class code.
    let bridge = libatoll::obj::device_alloc(root, PCI_HWID_BASE);
    let stat = bridge.and_then(|id| libatoll::obj::device_stat(ObjRef::new(root, id)));
    check!(stat.is_ok_and(|s| s.kind == PCI && s.count == 0x06_00_00), "the PCI host bridge");
    if let Ok(id) = bridge {
        let _ = libatoll::obj::share_delobj(ObjRef::new(root, id));
    }
    // The keyboard is a capability too (issue M14): only `init` reads what is typed.
    check!(
        devices[..n].iter().any(|d| d.kind == libatoll::abi::device_kind::KEYBOARD)
            && libatoll::obj::device_alloc(root, 4) == Err(Error::NotPermitted),
        "the keyboard is listed and cannot be allocated"
    );
    check!(libatoll::keyboard().is_none(), "a program the kernel did not start holds no keyboard");
    let mut typed = [0u8; 8];
    let serial_ref = ObjRef::new(root, libatoll::obj::device_alloc(root, 1).unwrap_or(0));
    check!(
        libatoll::console_read(serial_ref, &mut typed) == Err(Error::NotPermitted)
            && libatoll::console_read(ObjRef::new(root, 0), &mut typed) == Err(Error::NotPermitted),
        "console_read without the keyboard is refused"
    );
    let _ = libatoll::obj::share_delobj(serial_ref);
    check!(
        devices[..n].iter().any(|d| d.kind == libatoll::abi::device_kind::MACHINE)
            && libatoll::obj::device_alloc(root, 3) == Err(Error::NotPermitted),
        "the machine device is listed and cannot be allocated"
    );
    check!(
        libatoll::obj::device_alloc(root, 12345) == Err(Error::InvalidArgument),
        "no such device"
    );
    let serial = libatoll::obj::device_alloc(root, devices[0].hwid);
    check!(serial.is_ok(), "device_alloc");
    let stat = serial.and_then(|id| libatoll::obj::device_stat(ObjRef::new(root, id)));
    check!(stat.is_ok_and(|s| s.count > 0), "the console has written bytes");
    Ok(())
}

libatoll::main!(main);
