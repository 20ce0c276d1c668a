//! `fstest MODE`: checks the disk's files (issue M13, `libatoll::fs`). Exits 0 when every
//! check holds, 1 with `fstest MODE: FAIL <why>`, 2 on a bad mode, 77 (skipped) without a
//! disk.
//!
//! - `api`: every call works as documented (create, write, read, append, seek, truncate,
//!   rename, mkdir, readdir, remove, stat, statfs, map), and every bad argument gets its
//!   error: wild pointers, unknown flags, ids that name nothing or the wrong kind, paths
//!   that are relative, empty, too long, or go `..` past the root, names over 255 bytes,
//!   writes through a read-only descriptor or to a directory, removing the root; then
//!   the disk filled until `NoSpace`, the files already there intact, and emptied again.
//! - `race`: two threads on two cores write the same 64 KiB of one file, each its own
//!   byte, 50 times; every read between sees one write whole, never a mix.
//! - `kcore`: the disk driven by a kernel core on another core, then by the caller again;
//!   on three cores, a second kernel core with the disk on its list fails to start.
//! - `private`: a file made private to this core (after Corey §9): its blocks counted
//!   private, another core's reads and private opens `Busy`, removal `Busy`, and on close
//!   everything back in the shared cache, written through, readable from the other core.
//! - `nofs` (a disk whose image the kernel refused): every call is `NoFileSystem`.
//! - `persist-write`, then after a reboot `persist-read`: files written (and a directory
//!   renamed, a file removed, a file grown by appends past 1 MiB) before a `sync` are
//!   there, byte for byte, at the next boot.
//! - `loop N`: writes `/loop/<n>.txt` for n in 0..N, syncing after each and printing
//!   `FSTEST SYNCED <n>`, then `FSTEST DONE`: the harness kills the machine part way and
//!   checks every synced file with the host's tools.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use libatoll::abi::fs::{kind, open, ATOMIC_IO, PATH_MAX};
use libatoll::abi::{device_kind, DeviceInfo};
use libatoll::abi::{nr, Error};
use libatoll::fs::{self, File, SeekFrom};
use libatoll::kcore::KernelCore;
use libatoll::obj::{device_alloc, device_list, root_share, segment_alloc, share_delobj};
use libatoll::ObjRef;
use libatoll::{args, cores_online, pcore_current, println, syscall3, syscall5, Status};

const HELP: &str =
    "usage: fstest api | race | kcore | private | nofs | persist-write | persist-read | loop N";
/// What a check returns when it cannot run here (exit 77).
const SKIP: &str = "skip";

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mode = words.next().unwrap_or("");
    let result = match (mode, words.next()) {
        ("api", None) => api(),
        ("race", None) => race(),
        ("kcore", None) => through_kernel_core(),
        ("nofs", None) => without_a_file_system(),
        ("private", None) => private_file(),
        ("persist-write", None) => persist_write(),
        ("persist-read", None) => persist_read(),
        ("loop", Some(n)) => match n.parse::<u32>() {
            Ok(n) if n > 0 && n <= 10_000 => write_loop(n),
            _ => return usage(),
        },
        _ => return usage(),
    };
    match result {
        Ok(()) => {
            println!("fstest {mode}: ok");
            0
        }
        Err(why) if why == SKIP => {
            println!("fstest: skipped: no disk with a file system, or one core");
            libatoll::abi::EXIT_SKIPPED
        }
        Err(why) => {
            println!("fstest {mode}: FAIL {why}");
            1
        }
    }
}

fn usage() -> i32 {
    println!("{HELP}");
    2
}

/// Fails with `what` and the error.
fn check<T>(what: &str, r: Result<T, Error>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e:?}"))
}

/// Fails unless `r` is the error `want`.
fn expect_err<T: core::fmt::Debug>(
    what: &str,
    r: Result<T, Error>,
    want: Error,
) -> Result<(), String> {
    match r {
        Err(e) if e == want => Ok(()),
        other => Err(format!("{what}: got {other:?}, expected Err({want:?})")),
    }
}

/// `Err("no disk")` when there is no file system to test.
fn need_disk() -> Result<(), String> {
    match fs::statfs() {
        Ok(_) => Ok(()),
        Err(Error::NoFileSystem) => Err(SKIP.into()),
        Err(e) => Err(format!("statfs: {e:?}")),
    }
}

/// Removes `path` and everything under it (a test's leftovers from an earlier run).
fn remove_tree(path: &str) -> Result<(), String> {
    match fs::stat(path) {
        Err(Error::NotFound) => return Ok(()),
        Err(e) => return Err(format!("stat {path}: {e:?}")),
        Ok(st) if st.kind == kind::DIR => {
            for e in check("read_dir", fs::read_dir(path))? {
                remove_tree(&format!("{path}/{}", e.name))?;
            }
        }
        Ok(_) => {}
    }
    check(&format!("remove {path}"), fs::remove(path))
}

/// The bytes of test file `n`: a length and a pattern both derived from `n`, so the host
/// can check them (xtask's disk test computes the same).
fn pattern(n: u32) -> Vec<u8> {
    let len = 1000 + (n as usize * 4099) % 30000;
    (0..len).map(|i| ((i + n as usize * 31) % 251) as u8).collect()
}

fn api() -> Result<(), String> {
    need_disk()?;
    remove_tree("/fstest")?;
    check("mkdir", fs::mkdir("/fstest"))?;
    writes_and_reads()?;
    directories()?;
    bad_arguments()?;
    full_disk()?;
    remove_tree("/fstest")?;
    check("sync", fs::sync())
}

/// Create, write, read back, append, seek, truncate with a hole, stat, map.
fn writes_and_reads() -> Result<(), String> {
    let data = pattern(7);
    check("write", fs::write("/fstest/a", &data))?;
    if check("read", fs::read("/fstest/a"))? != data {
        return Err("a file read back differs".into());
    }
    let mut f = check("append", File::append("/fstest/a"))?;
    check("append write", f.write_all(b"tail"))?;
    let st = check("stat", f.stat())?;
    if st.size != data.len() as u64 + 4 || st.kind != kind::FILE || st.links != 1 {
        return Err(format!("stat after append: {st:?}"));
    }
    let mut f = check("open", File::open("/fstest/a"))?;
    check("seek", f.seek(SeekFrom::End(-4)))?;
    let mut tail = [0u8; 8];
    if check("read tail", f.read(&mut tail))? != 4 || &tail[..4] != b"tail" {
        return Err(format!("read after seek: {tail:?}"));
    }
    expect_err("seek before 0", f.seek(SeekFrom::Current(-100_000)), Error::InvalidArgument)?;
    // A truncate past the end leaves a hole that reads as zeros.
    let w = check("open for writing", File::open_in(root_share(), "/fstest/a", open::WRITE))?;
    check("truncate down", w.set_len(10))?;
    check("truncate up", w.set_len(100_000))?;
    let back = check("read after truncate", fs::read("/fstest/a"))?;
    if back.len() != 100_000 || back[..10] != data[..10] || back[10..].iter().any(|&b| b != 0) {
        return Err("truncate: the first 10 bytes kept and zeros after".into());
    }
    // A file mapped as a segment holds its bytes.
    let mem = check("map", w.map())?;
    // SAFETY: `map` mapped `mem.bytes` bytes at `mem.va`, ours alone.
    let mapped = unsafe { core::slice::from_raw_parts(mem.va as *const u8, 100_000) };
    let same = mapped == &back[..];
    mem.free();
    if !same {
        return Err("the mapped file differs from the file".into());
    }
    // A write of more than one atomic piece goes in whole.
    let big: Vec<u8> = (0..3 * ATOMIC_IO as usize + 5).map(|i| (i % 253) as u8).collect();
    check("big write", fs::write("/fstest/big", &big))?;
    if check("big read", fs::read("/fstest/big"))? != big {
        return Err("a 196 KiB file read back differs".into());
    }
    // Exclusive create of an existing file, and a missing file without CREATE.
    let flags = open::CREATE | open::EXCLUSIVE;
    expect_err("exclusive", File::open_in(root_share(), "/fstest/a", flags), Error::Exists)?;
    expect_err("missing", File::open("/fstest/missing"), Error::NotFound)?;
    Ok(())
}

/// mkdir, readdir, rename across directories, remove.
fn directories() -> Result<(), String> {
    check("mkdir d", fs::mkdir("/fstest/d"))?;
    expect_err("mkdir again", fs::mkdir("/fstest/d"), Error::Exists)?;
    for i in 0..40 {
        check("many", fs::write(&format!("/fstest/d/file-{i:02}"), b"x"))?;
    }
    let names = check("read_dir", fs::read_dir("/fstest/d"))?;
    if names.len() != 40 || names.iter().any(|e| e.kind != kind::FILE) {
        return Err(format!("read_dir listed {} entries", names.len()));
    }
    check("rename", fs::rename("/fstest/d/file-00", "/fstest/moved"))?;
    if check("read moved", fs::read("/fstest/moved"))? != b"x" {
        return Err("rename lost the contents".into());
    }
    expect_err("old name", fs::stat("/fstest/d/file-00"), Error::NotFound)?;
    expect_err("remove full dir", fs::remove("/fstest/d"), Error::NotEmpty)?;
    expect_err("readdir of a file", fs::read_dir("/fstest/moved"), Error::NotADirectory)?;
    expect_err("path through a file", fs::stat("/fstest/moved/x"), Error::NotADirectory)?;
    // `..` past the root stays at the root (as on Unix).
    let root = check("stat /", fs::stat("/"))?;
    let above = check("stat /../..", fs::stat("/../.."))?;
    if root.ino != above.ino {
        return Err("/../.. is not the root".into());
    }
    Ok(())
}

/// Every bad argument gets its error, and nothing changes.
fn bad_arguments() -> Result<(), String> {
    let share = root_share();
    let path = "/fstest/a";
    let (p, l) = (path.as_ptr() as u64, path.len() as u64);
    let open_raw = |ptr, len, flags| syscall5(nr::FS_OPEN, share, ptr, len, flags, 0);
    expect_err("wild path pointer", open_raw(0xdead_0000, 5, 0), Error::BadAddress)?;
    expect_err("kernel path pointer", open_raw(0xffff_8000_0000_0000, 5, 0), Error::BadAddress)?;
    expect_err("unknown flag", open_raw(p, l, 1 << 20), Error::InvalidArgument)?;
    expect_err(
        "private directory",
        open_raw("/fstest".as_ptr() as u64, 7, open::PRIVATE),
        Error::InvalidArgument,
    )?;
    expect_err("exclusive alone", open_raw(p, l, open::EXCLUSIVE), Error::InvalidArgument)?;
    expect_err("truncate read-only", open_raw(p, l, open::TRUNCATE), Error::InvalidArgument)?;
    expect_err("empty path", open_raw(p, 0, 0), Error::InvalidArgument)?;
    expect_err("relative path", File::open("fstest/a"), Error::InvalidArgument)?;
    let long = "/x".repeat(PATH_MAX as usize);
    expect_err("path too long", File::open(&long), Error::NameTooLong)?;
    let name = format!("/fstest/{}", "n".repeat(256));
    expect_err("name too long", fs::write(&name, b""), Error::NameTooLong)?;
    expect_err("bad share", File::open_in(12345, path, 0), Error::NoSuchObject)?;
    // A segment is not an open file.
    let seg = check("segment", segment_alloc(share, 4096))?;
    let mut buf = [0u8; 16];
    let read_raw = |obj, ptr, len| syscall5(nr::FS_READ, share, obj, ptr, len, 0);
    expect_err(
        "segment as file",
        read_raw(seg, buf.as_mut_ptr() as u64, 16),
        Error::InvalidArgument,
    )?;
    expect_err(
        "no such object",
        read_raw(99_999, buf.as_mut_ptr() as u64, 16),
        Error::NoSuchObject,
    )?;
    let f = check("open", File::open(path))?;
    let obj = f.descriptor().object;
    expect_err("wild read buffer", read_raw(obj, 0x10, 16), Error::BadAddress)?;
    expect_err(
        "read into the kernel",
        read_raw(obj, 0xffff_8000_0000_0000, 16),
        Error::BadAddress,
    )?;
    expect_err("write read-only", f.write_at(b"no", 0), Error::ReadOnly)?;
    expect_err("truncate read-only", f.set_len(0), Error::ReadOnly)?;
    let w = check("open for writing", File::open_in(share, path, open::WRITE))?;
    let write_raw = |ptr, len| syscall5(nr::FS_WRITE, share, w.descriptor().object, ptr, len, 0);
    expect_err("wild write buffer", write_raw(0xdead_0000, 100), Error::BadAddress)?;
    expect_err("write past the limit", w.write_at(b"x", u64::MAX - 1), Error::FileTooLarge)?;
    expect_err(
        "open dir for writing",
        File::open_in(share, "/fstest", open::WRITE),
        Error::IsADirectory,
    )?;
    expect_err("remove root", fs::remove("/"), Error::InvalidArgument)?;
    expect_err(
        "stat to kernel",
        syscall3(nr::FS_STAT, share, obj, 0xffff_8000_0000_0000),
        Error::BadAddress,
    )?;
    expect_err("statfs to nowhere", syscall3(nr::FS_STATFS, 8, 0, 0), Error::BadAddress)?;
    let dir = check("open dir", File::open("/fstest"))?;
    let tiny =
        syscall5(nr::FS_READDIR, share, dir.descriptor().object, 0, buf.as_mut_ptr() as u64, 4);
    expect_err("readdir into 4 bytes", tiny, Error::InvalidArgument)?;
    // The file is as it was.
    if check("size", f.stat())?.size != 100_000 {
        return Err("a refused call changed the file".into());
    }
    Ok(())
}

/// Filling the disk: writes go in until `NoSpace`, the files already there are intact,
/// and removing the filler gives the space back.
fn full_disk() -> Result<(), String> {
    let before = check("statfs", fs::statfs())?;
    let kept = check("read a", fs::read("/fstest/a"))?;
    let fill = check("create fill", File::create("/fstest/fill"))?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut at = 0u64;
    // Bounded by the disk's size: at most its blocks' worth of chunks, and one more.
    let most = before.blocks * before.block_size / chunk.len() as u64 + 2;
    let mut refused = None;
    for _ in 0..most {
        match fill.write_at(&chunk, at) {
            Ok(n) if n > 0 => at += n as u64,
            Ok(_) => return Err("a write on a full disk wrote nothing without an error".into()),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    if refused != Some(Error::NoSpace) {
        return Err(format!("filling the disk ended with {refused:?} after {at} bytes"));
    }
    if check("read a again", fs::read("/fstest/a"))? != kept {
        return Err("a file changed while the disk filled".into());
    }
    expect_err("create on a full disk", fs::write("/fstest/more", &[1u8; 8192]), Error::NoSpace)?;
    drop(fill);
    check("remove fill", fs::remove("/fstest/fill"))?;
    let _ = fs::remove("/fstest/more");
    let after = check("statfs after", fs::statfs())?;
    if after.free_blocks + 16 < before.free_blocks {
        return Err(format!(
            "{} free blocks before, {} after",
            before.free_blocks, after.free_blocks
        ));
    }
    println!("fstest: the disk filled after {} MiB; NoSpace, and the space came back", at >> 20);
    Ok(())
}

/// Two threads on two cores write the same 64 KiB; every read sees one write whole.
fn race() -> Result<(), String> {
    need_disk()?;
    if cores_online() < 2 {
        return Err(SKIP.into()); // nothing to race on one core
    }
    remove_tree("/race")?;
    check("mkdir", fs::mkdir("/race"))?;
    check("create", fs::write("/race/f", &vec![b'0'; ATOMIC_IO as usize]))?;
    let me = pcore_current();
    let other = (0..cores_online()).find(|&c| c != me).unwrap_or(0);
    let writer = |byte: u8| {
        move || -> i32 {
            let data = vec![byte; ATOMIC_IO as usize];
            let Ok(f) = File::open_in(root_share(), "/race/f", open::WRITE) else { return 1 };
            for _ in 0..50 {
                if f.write_at(&data, 0).is_err() {
                    return 1;
                }
            }
            0
        }
    };
    let a = check("thread a", libatoll::thread::Builder::new().core(me).spawn(writer(b'a')))?;
    let b = check("thread b", libatoll::thread::Builder::new().core(other).spawn(writer(b'b')))?;
    let f = check("open", File::open("/race/f"))?;
    let mut buf = vec![0u8; ATOMIC_IO as usize];
    let mut reads = 0;
    let busy = |s: Status| matches!(s, Status::Idle | Status::Running);
    while busy(a.status()) || busy(b.status()) || reads == 0 {
        check("read", f.read_at(&mut buf, 0))?;
        if buf.iter().any(|&x| x != buf[0]) {
            return Err(format!("a read saw a mix of writes (first byte {})", buf[0]));
        }
        reads += 1;
    }
    let (sa, sb) = (a.join(), b.join());
    if !sa.ok() || !sb.ok() {
        return Err(format!("writers ended {sa:?} and {sb:?}"));
    }
    println!("fstest race: {reads} reads, each one write whole");
    remove_tree("/race")
}

/// The disk driven by a kernel core on another core (Corey §3.2, §4.4): while it runs,
/// every transfer goes to it (`statfs` counts them) and files read back right; once it
/// stops, the calling core drives the disk again.
fn through_kernel_core() -> Result<(), String> {
    need_disk()?;
    if cores_online() < 2 {
        return Err(SKIP.into());
    }
    let mut list = [DeviceInfo::default(); 64];
    let n = check("device_list", device_list(&mut list))?;
    let disk = list[..n.min(64)].iter().find(|d| d.kind == device_kind::BLOCK);
    let disk = disk.ok_or("device_list has no disk")?;
    let root = root_share();
    let dev = ObjRef::new(root, check("device_alloc", device_alloc(root, disk.hwid))?);
    let me = pcore_current();
    let other = (0..cores_online()).find(|&c| c != me).unwrap_or(0);
    remove_tree("/kcore")?;
    check("mkdir", fs::mkdir("/kcore"))?;
    let kernel_core = check("kernel core", KernelCore::start(other, &[dev]))?;
    // One disk, one driver: a second kernel core with the disk on its list fails to start
    // (on three cores and more: it needs a core of its own).
    if let Some(third) = (0..cores_online()).find(|&c| c != me && c != other) {
        let second = KernelCore::start(third, &[dev]);
        if second.is_ok() {
            return Err("a second kernel core took the disk another one drives".into());
        }
    }
    let st = check("statfs", fs::statfs())?;
    if st.driver != other as u64 + 1 {
        return Err(format!(
            "statfs says core {} drives the disk, not {other}",
            st.driver as i64 - 1
        ));
    }
    let data = pattern(3);
    for i in 0..8 {
        check("write", fs::write(&format!("/kcore/{i}"), &data))?;
    }
    check("sync", fs::sync())?;
    let after = check("statfs", fs::statfs())?;
    if after.remote_transfers <= st.remote_transfers {
        return Err("the sync wrote nothing through the kernel core".into());
    }
    for i in 0..8 {
        if check("read", fs::read(&format!("/kcore/{i}")))? != data {
            return Err(format!("/kcore/{i} read back wrong through the kernel core"));
        }
    }
    kernel_core.stop();
    let st = check("statfs", fs::statfs())?;
    if st.driver != 0 {
        return Err("a stopped kernel core still drives the disk".into());
    }
    check("write after", fs::write("/kcore/after", &data))?;
    check("sync after", fs::sync())?;
    if check("statfs", fs::statfs())?.remote_transfers != st.remote_transfers {
        return Err("transfers still went to a stopped kernel core".into());
    }
    let _ = share_delobj(dev);
    println!("fstest kcore: {} transfers through core {other}", after.remote_transfers);
    remove_tree("/kcore")
}

/// Runs `work` on a thread on core `core`; its exit code.
fn on_core(core: usize, work: fn() -> i32) -> Result<i32, String> {
    let t = check("thread", libatoll::thread::Builder::new().core(core).spawn(work))?;
    match t.join() {
        Status::Exited(code) => Ok(code),
        other => Err(format!("the thread on core {core} ended {other:?}")),
    }
}

/// A file private to this core (after Corey §9).
fn private_file() -> Result<(), String> {
    need_disk()?;
    if cores_online() < 2 {
        return Err(SKIP.into());
    }
    let me = pcore_current();
    let other = (0..cores_online()).find(|&c| c != me).unwrap_or(0);
    remove_tree("/private")?;
    check("mkdir", fs::mkdir("/private"))?;
    let mut data: Vec<u8> = (0..10u32).flat_map(pattern).collect();
    data.truncate(64 * 1024);
    check("write", fs::write("/private/f", &data))?;
    let before = check("statfs", fs::statfs())?.private_blocks;
    let flags = open::WRITE | open::PRIVATE;
    let f = check("open private", File::open_in(root_share(), "/private/f", flags))?;
    let held = check("statfs", fs::statfs())?.private_blocks;
    if held < before + 16 {
        return Err(format!("{} private blocks after a private open of 16, {before} before", held));
    }
    // Blocks written through it become private too.
    let more = pattern(9);
    check("private write", f.write_at(&more, data.len() as u64))?;
    data.extend_from_slice(&more);
    if check("statfs", fs::statfs())?.private_blocks <= held {
        return Err("a private file's new blocks are not private".into());
    }
    let mut back = vec![0u8; data.len()];
    if check("private read", f.read_at(&mut back, 0))? != data.len() || back != data {
        return Err("a private file read back wrong".into());
    }
    // Another core may not touch it meanwhile.
    let busy = on_core(other, || {
        let mut buf = [0u8; 16];
        let read = File::open("/private/f").and_then(|f| f.read_at(&mut buf, 0));
        let private = File::open_in(root_share(), "/private/f", open::PRIVATE);
        match (read, private.map(|_| ())) {
            (Err(Error::Busy), Err(Error::Busy)) => 0,
            _ => 1,
        }
    })?;
    if busy != 0 {
        return Err("another core read or privately opened a file private to this core".into());
    }
    expect_err("remove a private file", fs::remove("/private/f"), Error::Busy)?;
    check("sync", fs::sync())?;
    drop(f);
    if check("statfs", fs::statfs())?.private_blocks != before {
        return Err("closing the private file left blocks private".into());
    }
    // Back in the shared cache, written through: the other core reads what this one wrote.
    WANT.store(data.len() as u64, core::sync::atomic::Ordering::Relaxed);
    let same = on_core(other, || {
        let want = WANT.load(core::sync::atomic::Ordering::Relaxed) as usize;
        let mut expect: Vec<u8> = (0..10u32).flat_map(pattern).collect();
        expect.truncate(64 * 1024);
        expect.extend_from_slice(&pattern(9));
        match fs::read("/private/f") {
            Ok(got) if got.len() == want && got == expect => 0,
            _ => 1,
        }
    })?;
    if same != 0 {
        return Err("after close, another core read other bytes than the private writes".into());
    }
    remove_tree("/private")
}

/// The private file's length, for the check on the other core.
static WANT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Where the kernel refused the disk's image: every file call says `NoFileSystem`, and
/// nothing else happens (skipped where there is a file system).
fn without_a_file_system() -> Result<(), String> {
    if fs::statfs().is_ok() {
        return Err(SKIP.into());
    }
    let none = Error::NoFileSystem;
    expect_err("statfs", fs::statfs(), none)?;
    expect_err("open", File::open("/README"), none)?;
    expect_err("create", File::create("/new"), none)?;
    expect_err("mkdir", fs::mkdir("/d"), none)?;
    expect_err("remove", fs::remove("/README"), none)?;
    expect_err("rename", fs::rename("/a", "/b"), none)?;
    expect_err("sync", fs::sync(), none)?;
    expect_err("read_dir", fs::read_dir("/"), none)?;
    Ok(())
}

/// What `persist-write` leaves and `persist-read` checks.
fn persisted() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for n in 0..5 {
        files.push((format!("/persist/kept/{n}.bin"), pattern(n)));
    }
    let mut log = Vec::new();
    for i in 0..200u32 {
        log.extend_from_slice(format!("line {i}: {}\n", "=".repeat(i as usize % 70)).as_bytes());
    }
    files.push(("/persist/log.txt".into(), log));
    let big: Vec<u8> =
        (0..1_200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    files.push(("/persist/big.bin".into(), big));
    files
}

fn persist_write() -> Result<(), String> {
    need_disk()?;
    remove_tree("/persist")?;
    check("mkdir", fs::mkdir("/persist"))?;
    check("mkdir tmp", fs::mkdir("/persist/tmp"))?;
    for (path, data) in persisted() {
        // The log grows by appends; the others are written at once, under a temporary
        // directory renamed into place (the rename must persist too).
        let path = path.replace("/persist/kept/", "/persist/tmp/");
        if path.ends_with("log.txt") {
            for line in data.split_inclusive(|&b| b == b'\n') {
                check("append", File::append(&path).and_then(|mut f| f.write_all(line)))?;
            }
        } else {
            check("write", fs::write(&path, &data))?;
        }
    }
    check("doomed", fs::write("/persist/tmp/doomed", b"gone after reboot"))?;
    check("remove", fs::remove("/persist/tmp/doomed"))?;
    check("rename dir", fs::rename("/persist/tmp", "/persist/kept"))?;
    check("sync", fs::sync())
}

fn persist_read() -> Result<(), String> {
    need_disk()?;
    for (path, data) in persisted() {
        let got = check(&path, fs::read(&path))?;
        if got != data {
            return Err(format!(
                "{path}: {} bytes differ from the {} written",
                got.len(),
                data.len()
            ));
        }
    }
    expect_err("removed file", fs::stat("/persist/kept/doomed"), Error::NotFound)?;
    expect_err("renamed dir", fs::stat("/persist/tmp"), Error::NotFound)?;
    let names = check("read_dir", fs::read_dir("/persist"))?;
    if names.len() != 3 {
        return Err(format!("/persist holds {} names, not 3", names.len()));
    }
    Ok(())
}

fn write_loop(n: u32) -> Result<(), String> {
    need_disk()?;
    match fs::mkdir("/loop") {
        Ok(()) | Err(Error::Exists) => {}
        Err(e) => return Err(format!("mkdir /loop: {e:?}")),
    }
    for i in 0..n {
        check("write", fs::write(&format!("/loop/{i}.txt"), &pattern(i)))?;
        check("sync", fs::sync())?;
        println!("FSTEST SYNCED {i}");
    }
    println!("FSTEST DONE");
    Ok(())
}
libatoll::main!(main);
