//! The disk runs of `make test` (issue M13): a run's virtio-blk disk (`Run::disk`), made
//! before it boots and checked with e2fsprogs after it, and the crash test that kills QEMU
//! while the guest writes.
//!
//! Images are kept in `target/test-logs/` beside the logs, so a failure can be looked
//! into with `e2fsck -fn` or `debugfs`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{print_tail, Run};
use crate::disk;
use crate::qemu::{self, Serial, Vm};
use crate::tally::Tally;
use crate::{build, Result};

/// Where a test run's disk image comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Image {
    /// Built afresh from the repository's `disk/` into `target/test-logs/<label>.img`.
    Fresh,
    /// The image the run of this label left (`target/test-logs/<label>.img`), as it left
    /// it: the run is skipped when there is none.
    After(&'static str),
    /// Built afresh, then its superblock damaged ([`damage`]): the kernel must refuse to
    /// mount it, with the reason.
    Damaged,
}

/// Byte of the image where the superblock's `s_blocks_per_group` lies (the superblock
/// starts at byte 1024).
const BLOCKS_PER_GROUP_AT: u64 = 1024 + 32;

/// Damages `image`'s superblock: `s_blocks_per_group` set to `0xffff_ffff`, more than a
/// block bitmap can hold, which the file system must refuse ("blocks per group out of
/// range").
fn damage(image: &Path) -> Result {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(image)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    f.seek(SeekFrom::Start(BLOCKS_PER_GROUP_AT))
        .and_then(|_| f.write_all(&[0xff; 4]))
        .map_err(|e| format!("damaging {}: {e}", image.display()))
}

/// The check of a damaged image's run: the boot log says the mount was refused, and why.
pub(super) fn mount_refused_with_reason(_image: &Path, log: &str) -> Result {
    match log.lines().find(|l| l.contains("disk: not mounted:")) {
        Some(line) if line.contains("blocks per group out of range") => Ok(()),
        Some(line) => Err(format!("refused for another reason: {}", line.trim())),
        None => Err("the boot log has no `disk: not mounted:` line".into()),
    }
}

/// A test run's disk.
#[derive(Clone, Copy, Debug)]
pub(super) struct TestDisk {
    /// Where its image comes from.
    pub image: Image,
    /// `Some(n)`: a crash test instead of one judged run: `n` iterations, each on a fresh
    /// image, each QEMU killed at a random moment (see [`crash_test`]); the kernel's
    /// verdict is not judged.
    pub kill_iterations: Option<u32>,
    /// The check of the image once QEMU has ended, given the serial log: the test
    /// `<label>/<name>`, in a crash test `<label>/<name>-<k>` for iteration `k`.
    pub check: (&'static str, fn(image: &Path, log: &str) -> Result),
}

/// The test line's marker of a file the guest has written and synced: `FSTEST SYNCED <n>`
/// says `/loop/<n>.txt` is on the disk, holding [`loop_file`]`(n)`.
const SYNCED: &str = "FSTEST SYNCED ";

/// The guest's line when its write loop finished before QEMU was killed.
const DONE: &str = "FSTEST DONE";

/// The longest wait between the first synced file and the kill, in milliseconds.
const MAX_KILL_DELAY_MS: u64 = 1500;

/// `e2fsck` is killed after this long (a 64 MiB image takes well under a second).
const E2FSCK_TIMEOUT: Duration = Duration::from_secs(120);

/// `debugfs` is killed after this long (it reads one small file).
const DEBUGFS_TIMEOUT: Duration = Duration::from_secs(30);

/// The bytes the guest's write loop puts in `/loop/<n>.txt`: `1000 + (n * 4099) % 30000`
/// of them (sizes that end anywhere in a block, across the first indirect block), byte
/// `i` being `(i + n * 31) % 251` (a prime period, so no block repeats its neighbour's
/// contents). The kernel's `user.files_write_loop` writes the same.
pub(super) fn loop_file(n: u64) -> Vec<u8> {
    let len = 1000 + (n * 4099) % 30000;
    (0..len).map(|i| ((i + n * 31) % 251) as u8).collect()
}

/// The `n` of every complete `FSTEST SYNCED <n>` line of `log`, sorted, each once. A line
/// still being written when QEMU was killed is not complete and does not count; text
/// before the marker (another core's output) is allowed, after the number none.
pub(super) fn synced_files(log: &str) -> Vec<u64> {
    let complete = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    let mut found: Vec<u64> = complete
        .lines()
        .filter_map(|line| line.split_once(SYNCED))
        .filter_map(|(_, n)| n.trim_end().parse().ok())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// A judged run's disk image, or why the run is skipped.
pub(super) enum Prepared {
    /// The image, ready to boot.
    Ready(PathBuf),
    /// The image of an earlier run is needed and missing (that run was not selected, or
    /// could not build it): the reason to print.
    Skip(String),
}

/// The image of a judged run: built afresh, or the earlier run's.
pub(super) fn prepare(label: &str, disk: &TestDisk, log_dir: &Path) -> Result<Prepared> {
    match disk.image {
        Image::Fresh | Image::Damaged => {
            let image = log_dir.join(format!("{label}.img"));
            disk::build_image(&build::root().join("disk"), &image)?;
            if disk.image == Image::Damaged {
                damage(&image)?;
            }
            Ok(Prepared::Ready(image))
        }
        Image::After(earlier) => {
            let image = log_dir.join(format!("{earlier}.img"));
            if image.is_file() {
                Ok(Prepared::Ready(image))
            } else {
                Ok(Prepared::Skip(format!("needs {earlier}'s image")))
            }
        }
    }
}

/// Prints `PASS <label>/<name>` or `FAIL <label>/<name>: <why>` and counts it.
pub(super) fn count(label: &str, name: &str, outcome: &Result, tally: &mut Tally) {
    match outcome {
        Ok(()) => {
            println!("PASS {label}/{name}");
            tally.passed += 1;
        }
        Err(why) => {
            println!("FAIL {label}/{name}: {why}");
            tally.failed += 1;
        }
    }
}

/// What e2fsck's exit code means (its manual's list; the codes are bits).
fn fsck_meaning(code: i32) -> &'static str {
    match code {
        0 => "no errors",
        1 => "errors corrected",
        2 => "errors corrected, reboot needed",
        c if c & 4 != 0 => "errors left uncorrected",
        c if c & 8 != 0 => "operational error",
        _ => "usage error, cancelled or a library error",
    }
}

/// Runs `e2fsck <flag> image`: its exit code and output.
fn e2fsck(flag: &str, image: &Path) -> Result<disk::ToolOutput> {
    disk::run_tool("e2fsck", &[flag.as_ref(), image.as_os_str()], E2FSCK_TIMEOUT)
}

/// `<label>/fsck`: `e2fsck -fn` finds the image clean (exit 0), i.e. the kernel's file
/// system left it consistent and its counters right.
pub(super) fn fsck_is_clean(image: &Path, _log: &str) -> Result {
    let out = e2fsck("-fn", image)?;
    if out.code == 0 {
        return Ok(());
    }
    Err(format!("e2fsck -fn exited {} ({}):\n{}", out.code, fsck_meaning(out.code), out.tail(20)))
}

/// A crash test's check: `e2fsck -fy` repairs the image (exit 0 or 1), `e2fsck -fn` then
/// finds it clean, and every file a `FSTEST SYNCED` line of `log` names holds exactly
/// [`loop_file`]'s bytes (as `debugfs -R "cat /loop/<n>.txt"` reads them).
pub(super) fn synced_files_are_intact(image: &Path, log: &str) -> Result {
    let repair = e2fsck("-fy", image)?;
    if repair.code > 1 {
        return Err(format!(
            "e2fsck -fy exited {} ({}):\n{}",
            repair.code,
            fsck_meaning(repair.code),
            repair.tail(20)
        ));
    }
    let check = e2fsck("-fn", image)?;
    if check.code != 0 {
        return Err(format!(
            "after e2fsck -fy (exit {}), e2fsck -fn exited {} ({}):\n{}",
            repair.code,
            check.code,
            fsck_meaning(check.code),
            check.tail(20)
        ));
    }
    let synced = synced_files(log);
    if synced.is_empty() {
        return Err("no FSTEST SYNCED line in the log".into());
    }
    let mut wrong = Vec::new();
    for &n in &synced {
        let path = format!("/loop/{n}.txt");
        let cat = disk::run_tool(
            "debugfs",
            &["-R".as_ref(), format!("cat {path}").as_ref(), image.as_os_str()],
            DEBUGFS_TIMEOUT,
        )?;
        let want = loop_file(n);
        if cat.code != 0 || cat.stdout != want {
            wrong.push(format!("{path}: {}", differs(&cat.stdout, &want, &cat)));
        }
    }
    if wrong.is_empty() {
        let (first, last) = (synced[0], synced[synced.len() - 1]);
        println!(
            "    {}: e2fsck -fy exit {} ({}), then clean; {} synced files intact ({first}..={last})",
            image.display(),
            repair.code,
            fsck_meaning(repair.code),
            synced.len()
        );
        return Ok(());
    }
    let shown = wrong.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    Err(format!("{} of {} synced files differ: {shown}", wrong.len(), synced.len()))
}

/// How a file read back differs from what it should hold (debugfs's complaint, if any).
fn differs(got: &[u8], want: &[u8], cat: &disk::ToolOutput) -> String {
    let complaint = String::from_utf8_lossy(&cat.stderr)
        .lines()
        .filter(|l| !l.starts_with("debugfs "))
        .collect::<Vec<_>>()
        .join(" ");
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    let what = match first {
        Some(i) => format!("byte {i} is {}, expected {}", got[i], want[i]),
        None => format!("{} bytes, expected {}", got.len(), want.len()),
    };
    match (cat.code, complaint.trim()) {
        (0, "") => what,
        (code, complaint) => format!("{what} (debugfs exit {code}: {complaint})"),
    }
}

/// A small random generator for the kill delays (SplitMix64): one number an iteration
/// needs no crate, and the seed is printed.
struct SplitMix(u64);

impl SplitMix {
    /// The next number.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The crash test (`disk-kill`): `iterations` times, on a fresh image each, boot `vm`
/// (the write loop), wait for the log's first `FSTEST SYNCED` (at most `timeout`), wait a
/// random 0 to 1500 ms more and kill QEMU; then the run's check of the image. Each
/// iteration is one test; its log and image are `<label>-<k>.log` and `<label>-<k>.img`.
pub(super) fn crash_test(
    run: &Run,
    disk: &TestDisk,
    iterations: u32,
    vm: &Vm,
    log_dir: &Path,
    timeout: Duration,
    tally: &mut Tally,
) {
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut random = SplitMix(seed);
    println!("== {}: {iterations} iterations, kill delays from seed {seed:#x}", run.label);
    for k in 1..=iterations {
        let delay = Duration::from_millis(random.next() % (MAX_KILL_DELAY_MS + 1));
        let log = log_dir.join(format!("{}-{k}.log", run.label));
        let image = log_dir.join(format!("{}-{k}.img", run.label));
        let outcome = crash_iteration(run, disk, k, vm, (&log, &image), timeout, delay);
        count(run.label, &format!("{}-{k}", disk.check.0), &outcome, tally);
        if outcome.is_err() && log.is_file() {
            print_tail(&log, 40);
        }
    }
}

/// Iteration `k` of [`crash_test`]: QEMU writes `log`, the disk is `image`.
fn crash_iteration(
    run: &Run,
    disk: &TestDisk,
    k: u32,
    vm: &Vm,
    (log, image): (&Path, &Path),
    timeout: Duration,
    delay: Duration,
) -> Result {
    disk::build_image(&build::root().join("disk"), image)?;
    let mut vm = vm.clone();
    vm.extra.extend(disk::qemu_args(image));
    let file = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let copy = file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let mut command = vm.command(Serial::Stdout);
    command.stdin(Stdio::null()).stdout(file).stderr(copy);
    let mut child = qemu::spawn(&mut command)?;
    let start = Instant::now();
    loop {
        // Whether QEMU has ended is asked before the log is read, so a line it wrote just
        // before ending is seen.
        let ended = child.try_wait().map_err(|e| format!("waiting for QEMU: {e}"))?;
        if !synced_files(&qemu::read_log(log)).is_empty() {
            break;
        }
        if let Some(status) = ended {
            return Err(format!("QEMU ended ({status}) before any FSTEST SYNCED line"));
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no FSTEST SYNCED line within {} s", timeout.as_secs()));
        }
        thread::sleep(Duration::from_millis(10));
    }
    let first = start.elapsed();
    let ending = qemu::wait(&mut child, delay)?;
    let text = qemu::read_log(log);
    let finished = text.lines().any(|l| l.contains(DONE));
    let how = if ending.timed_out {
        format!("killed {} ms after it", delay.as_millis())
    } else if finished {
        "the guest finished (FSTEST DONE) before the kill".to_string()
    } else {
        let status = ending.status.map_or("a signal".into(), |c| format!("exit {c}"));
        return Err(format!("QEMU ended by itself ({status}) without {DONE}"));
    };
    println!(
        "    {} iteration {k}: first FSTEST SYNCED at {:.1} s, {how}; {} files synced",
        run.label,
        first.as_secs_f64(),
        synced_files(&text).len()
    );
    (disk.check.1)(image, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_files_have_their_length_and_pattern() {
        let zero = loop_file(0);
        assert_eq!(zero.len(), 1000);
        assert_eq!(&zero[..3], &[0, 1, 2]);
        assert_eq!(zero[251], 0);
        let one = loop_file(1);
        assert_eq!(one.len(), 1000 + 4099);
        assert_eq!(one[0], 31);
        assert_eq!(one[250 - 31], 250);
        assert_eq!(one[251 - 31], 0);
        // 8 * 4099 = 32792 wraps at 30000.
        assert_eq!(loop_file(8).len(), 1000 + 2792);
        assert_eq!(loop_file(9)[0], (9 * 31 % 251) as u8);
    }

    #[test]
    fn only_complete_synced_lines_count() {
        let log = "boot\r\nFSTEST SYNCED 0\r\ninit: FSTEST SYNCED 2\nFSTEST SYNCED 1\n\
                   FSTEST SYNCED 1\nFSTEST SYNCED x\nFSTEST SYNCED 3 extra\nFSTEST SYNCED 1";
        // The last line, cut by the kill, could have been `... 12`.
        assert_eq!(synced_files(log), [0, 1, 2]);
        assert_eq!(synced_files("FSTEST SYNCED 4"), Vec::<u64>::new());
        assert_eq!(synced_files(""), Vec::<u64>::new());
    }

    #[test]
    fn delays_spread_over_the_range() {
        let mut random = SplitMix(7);
        let delays: Vec<u64> = (0..100).map(|_| random.next() % (MAX_KILL_DELAY_MS + 1)).collect();
        assert!(delays.iter().all(|&d| d <= MAX_KILL_DELAY_MS));
        assert!(delays.iter().any(|&d| d < 300) && delays.iter().any(|&d| d > 1200), "{delays:?}");
        // The same seed gives the same delays.
        assert_eq!(SplitMix(7).next(), SplitMix(7).next());
    }

    #[test]
    fn a_missing_earlier_image_skips_the_run() {
        let dir = std::env::temp_dir().join(format!("xtask-prepare-{}", std::process::id()));
        let disk = TestDisk {
            image: Image::After("disk-write"),
            kill_iterations: None,
            check: crate::test::runs::FSCK,
        };
        let Prepared::Skip(why) = prepare("disk-read", &disk, &dir).unwrap() else {
            panic!("a missing image was taken as ready");
        };
        assert_eq!(why, "needs disk-write's image");
    }

    #[test]
    fn fsck_codes_are_explained() {
        assert_eq!(fsck_meaning(1), "errors corrected");
        assert_eq!(fsck_meaning(4), "errors left uncorrected");
        assert_eq!(fsck_meaning(12), "errors left uncorrected");
        assert_eq!(fsck_meaning(8), "operational error");
    }

    #[test]
    fn a_file_that_differs_is_described() {
        let ok = disk::ToolOutput { code: 0, stdout: Vec::new(), stderr: Vec::new() };
        assert_eq!(differs(&[1, 2, 9], &[1, 2, 3], &ok), "byte 2 is 9, expected 3");
        assert_eq!(differs(&[1, 2], &[1, 2, 3], &ok), "2 bytes, expected 3");
        let missing = disk::ToolOutput {
            code: 0,
            stdout: Vec::new(),
            stderr: b"debugfs 1.47.0 (5-Feb-2023)\n/loop/3.txt: File not found by ext2_lookup \n"
                .to_vec(),
        };
        assert_eq!(
            differs(&[], &[1], &missing),
            "0 bytes, expected 1 (debugfs exit 0: /loop/3.txt: File not found by ext2_lookup)"
        );
    }

    /// Needs e2fsprogs; skipped (with a note) without it. An image with the synced files
    /// passes the crash check; one missing a file fails it, naming the file.
    #[test]
    fn the_crash_check_reads_the_files_back() {
        if disk::TOOLS.iter().any(|t| disk::find_tool(t).is_none()) {
            eprintln!("skipped: e2fsprogs is not installed");
            return;
        }
        let dir = std::env::temp_dir().join(format!("xtask-crash-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/loop")).unwrap();
        for n in 0..3 {
            std::fs::write(dir.join(format!("src/loop/{n}.txt")), loop_file(n)).unwrap();
        }
        let image = dir.join("disk.img");
        disk::build_image(&dir.join("src"), &image).unwrap();
        let log = "FSTEST SYNCED 0\nFSTEST SYNCED 1\nFSTEST SYNCED 2\n";
        let checked = synced_files_are_intact(&image, log);
        let missing = synced_files_are_intact(&image, "FSTEST SYNCED 1\nFSTEST SYNCED 5\n");
        let clean = fsck_is_clean(&image, log);
        std::fs::remove_dir_all(&dir).unwrap();
        checked.unwrap();
        clean.unwrap();
        let why = missing.unwrap_err();
        assert!(why.starts_with("1 of 2 synced files differ: /loop/5.txt: 0 bytes"), "{why}");
    }
}
