//! `init [LINE]`: the shell, which the kernel starts on core 0 at boot. With a line it runs
//! that line (or its parts separated by `;`, in turn) and powers off (`make run CMD=...`);
//! otherwise it prompts `atoll> ` and
//! runs what is typed. Its own commands are below; any other line goes to the kernel
//! console (`mem`, `monitor`, `bench urpc 2000`, `tests`, ...). The kernel gives `init`
//! the machine device (`libatoll::machine()`): the capability those kernel commands and
//! `poweroff` need, which other programs do not have.
#![no_std]
#![no_main]

extern crate alloc;

mod files;

use alloc::string::String;
use alloc::vec::Vec;
use libatoll::abi::{device_kind, DeviceInfo, Error};
use libatoll::cfork::patiently;
use libatoll::cores::parse_cores;
use libatoll::fd::FdTable;
use libatoll::obj::{self, pcore_alloc, program_run, root_share, share_delobj};
use libatoll::{args, cores_online, kernel_command, locality_get, pcore_current, print, println};
use libatoll::{LineReader, ObjRef, Status};

/// (name, help) of the shell's own commands, in the order `help` shows them.
const COMMANDS: &[(&str, &str)] = &[
    ("help", "this list"),
    ("ls", "ls [DIR]: the files in the initrd, or in directory DIR of the disk (ls /)"),
    ("cat", "cat FILE: print an initrd file, or a disk file (/README)"),
    ("write", "write FILE TEXT: make disk file FILE hold TEXT and a newline"),
    ("append", "append FILE TEXT: add TEXT and a newline at the end of disk file FILE"),
    ("mkdir", "mkdir DIR: make a directory on the disk"),
    ("rm", "rm PATH: remove a disk file, or an empty directory"),
    ("mv", "mv FROM TO: rename on the disk"),
    ("df", "the disk's size, free space and buffer cache"),
    ("sync", "write every changed block to the disk"),
    ("run", "run [-c CORES] PROGRAM [ARGS]: run a program once on each listed core (e.g. -c 0-3)"),
    ("cores", "each core: package/core/SMT, NUMA node, latency from here, compute speed, LLC"),
    ("devices", "the devices (Corey's device_list) and their counters (device_stat)"),
    ("skb", "the system knowledge base (kernel console)"),
    ("poweroff", "power the machine off"),
];

/// Longest input line.
const LINE_MAX: usize = 256;

fn main() -> i32 {
    let line = args::arg_string();
    if !line.trim().is_empty() {
        // `make run CMD="a; b"` (and `make bench`) may give several lines.
        for part in line.split(';') {
            execute(part.trim());
        }
        poweroff();
        return 0;
    }
    // Only the shell the kernel started holds the keyboard: a second `init` (`run -c 1
    // init`) would otherwise take every later keystroke from the first.
    let Some(keyboard) = libatoll::keyboard() else {
        println!("init: this shell does not hold the keyboard (the first shell does); bye");
        return 1;
    };
    let mut reader = LineReader::new(keyboard);
    let mut buf = [0u8; LINE_MAX];
    loop {
        print!("atoll> ");
        let len = reader.read_line(&mut buf);
        execute(core::str::from_utf8(&buf[..len]).unwrap_or(""));
    }
}

/// Runs one command line.
fn execute(line: &str) {
    let mut words = line.split_whitespace();
    match words.next() {
        None => {}
        Some("help") => {
            for (name, help) in COMMANDS {
                println!("  {name:<9} {help}");
            }
            println!(
                "  (anything else goes to the kernel console: mem, monitor, bench, tests, uptime)"
            );
        }
        Some("ls") => match words.next() {
            Some(dir) => files::ls(dir),
            None => ls(),
        },
        Some("cat") => match words.next() {
            Some(file) if file.starts_with('/') => files::cat(file),
            Some(file) => cat(file),
            None => println!("usage: cat FILE"),
        },
        Some(command @ ("write" | "append" | "mkdir" | "rm" | "mv" | "df" | "sync")) => {
            files::command(command, line)
        }
        Some("run") => run(line),
        Some("cores") => cores(),
        Some("devices") => devices(),
        Some("poweroff") => {
            println!("powering off");
            poweroff();
        }
        // `skb` and everything else: the kernel console's commands.
        Some(_) => {
            let Some(machine) = libatoll::machine() else {
                return println!("{line}: this shell does not hold the machine device");
            };
            match kernel_command(machine, line) {
                // The console explained a line it refused itself.
                Ok(_) | Err(Error::InvalidArgument) => {}
                Err(e) => println!("{line}: {e:?}"),
            }
        }
    }
}

/// Powers the machine off with the machine device; says why if it cannot.
fn poweroff() {
    match libatoll::machine() {
        Some(machine) => {
            if let Err(e) = libatoll::poweroff(machine) {
                println!("poweroff: {e:?}");
            }
        }
        None => println!("poweroff: this shell does not hold the machine device"),
    }
}

/// `ls`: the initrd's file names (the disk's are `ls /`).
fn ls() {
    let mut names = alloc::vec![0u8; 1024];
    loop {
        match libatoll::file_list(&mut names) {
            // Cut short: ask again with room for the whole list.
            Ok(needed) if needed as usize > names.len() => names.resize(needed as usize, 0),
            Ok(needed) => {
                names.truncate(needed as usize);
                break;
            }
            Err(e) => return println!("ls: {e:?}"),
        }
    }
    let mut table = FdTable::private();
    for name in core::str::from_utf8(&names).unwrap_or("").lines() {
        // The size comes from the file's segment (opened and closed again).
        let size = table.open(name).and_then(|fd| {
            let size = table.size(fd);
            let _ = table.close(fd);
            size
        });
        match size {
            Ok(bytes) => println!("  {name:<16} {bytes:>8} bytes"),
            Err(_) => println!("  {name}"),
        }
    }
    println!("  (the disk's files: ls /)");
}

/// `cat FILE`: reads the file through a descriptor in the private table (the root
/// share: nobody else uses it, Corey §3.3).
fn cat(file: &str) {
    let mut table = FdTable::private();
    let fd = match table.open(file) {
        Ok(fd) => fd,
        Err(e) => return println!("cat: {file}: {e:?}"),
    };
    let mut buf = [0u8; 512];
    let (mut first, mut ended_line) = (true, true);
    loop {
        match table.read(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) if first && buf[..n].starts_with(b"\x7fELF") => {
                let size = table.size(fd).unwrap_or(0);
                println!("cat: {file}: a program ({size} bytes; try 'run {file}')");
                break;
            }
            Ok(n) => {
                let _ = libatoll::write(&buf[..n]);
                ended_line = buf[n - 1] == b'\n';
            }
            Err(e) => {
                println!("cat: {file}: {e:?}");
                break;
            }
        }
        first = false;
    }
    if !ended_line {
        // The console prints whole lines: end the file's last one.
        println!();
    }
    let _ = table.close(fd);
}

/// `run [-c LIST] PROGRAM [ARGS]`: starts the program on each listed core (default: this
/// one) with `program_run`, this core's copy last and synchronously, then waits for the
/// others. Prints one line per core in the kernel console's form (`make bench` reads it).
fn run(line: &str) {
    let rest = line.trim_start().strip_prefix("run").unwrap_or("").trim_start();
    let me = pcore_current();
    let (cores, rest) = match rest.strip_prefix("-c") {
        Some(after) => {
            let after = after.trim_start();
            let (list, rest) = after.split_once(' ').unwrap_or((after, ""));
            match parse_cores(list, cores_online()) {
                Some(c) => (c, rest.trim_start()),
                None => return println!("run: bad core list '{list}'"),
            }
        }
        None => (alloc::vec![me], rest),
    };
    let program = rest.split_whitespace().next().unwrap_or("");
    if program.is_empty() {
        return println!("usage: run [-c CORES] PROGRAM [ARGS]");
    }
    let root = root_share();
    // Each core's pcore object (in the root share) and its outcome so far.
    let mut started: Vec<(usize, Option<ObjRef>, String)> = Vec::new();
    for &core in cores.iter().filter(|&&c| c != me) {
        started.push(start_on(root, core, rest));
    }
    if cores.contains(&me) {
        // Our own core: the kernel lends it to the program and we wait here.
        let outcome = match patiently(|| pcore_alloc(root, me)) {
            Ok(id) => {
                let pcore = ObjRef::new(root, id);
                let text = match program_run(pcore, rest) {
                    Ok(status) => alloc::format!("{status:?}"),
                    Err(e) => alloc::format!("{e:?}"),
                };
                let _ = share_delobj(pcore);
                text
            }
            Err(e) => alloc::format!("{e:?}"),
        };
        started.push((me, None, outcome));
    }
    for (_, pcore, outcome) in &mut started {
        if let Some(pcore) = pcore.take() {
            *outcome = alloc::format!("{:?}", wait(pcore));
            let _ = share_delobj(pcore);
        }
    }
    for &core in &cores {
        if let Some((_, _, outcome)) = started.iter().find(|(c, _, _)| *c == core) {
            println!("run: {program} on core {core}: {outcome}");
        }
    }
}

/// Starts `line` on another core; returns (core, its pcore if it started, the error).
fn start_on(root: u64, core: usize, line: &str) -> (usize, Option<ObjRef>, String) {
    let pcore = match patiently(|| pcore_alloc(root, core)) {
        Ok(id) => ObjRef::new(root, id),
        Err(e) => return (core, None, alloc::format!("{e:?}")),
    };
    match patiently(|| program_run(pcore, line).map(|_| 0)) {
        Ok(_) => (core, Some(pcore), String::new()),
        Err(e) => {
            let _ = share_delobj(pcore);
            (core, None, alloc::format!("{e:?}"))
        }
    }
}

/// Polls a pcore until what runs on it has ended.
fn wait(pcore: ObjRef) -> Status {
    loop {
        match obj::pcore_status(pcore) {
            Ok(Status::Running) => {
                for _ in 0..10_000 {
                    core::hint::spin_loop();
                }
            }
            Ok(status) => return status,
            Err(_) => return Status::Failed,
        }
    }
}

/// `cores`: where each core sits and what it costs to reach from here (the SKB).
fn cores() {
    let me = pcore_current();
    println!(
        "core  pkg  core  smt  node  latency  speed  llc KiB   ({} online, this is {me})",
        cores_online()
    );
    for c in 0..cores_online() {
        match locality_get(c) {
            Ok(l) => println!(
                "{c:>4}  {:>3}  {:>4}  {:>3}  {:>4}  {:>7}  {:>5}  {:>7}",
                l.package,
                l.core,
                l.smt,
                l.node,
                l.latency_cycles,
                l.compute_speed,
                l.llc_bytes >> 10
            ),
            Err(e) => println!("{c:>4}  {e:?}"),
        }
    }
}

/// `devices`: every device, through a device object each (Corey §4.4 `device_alloc`,
/// `device_stat`).
fn devices() {
    let mut list = [DeviceInfo::default(); 64];
    let n = match obj::device_list(&mut list) {
        Ok(n) => n.min(list.len()),
        Err(e) => return println!("devices: {e:?}"),
    };
    println!("hwid  kind     core  name      counters");
    let root = root_share();
    for d in &list[..n] {
        let name = d.name.to_le_bytes();
        let name = core::str::from_utf8(&name).unwrap_or("?").trim_end_matches('\0');
        let (kind, count, detail) = match d.kind {
            device_kind::SERIAL => ("serial", "bytes out", "bytes in"),
            device_kind::INITRD => ("initrd", "bytes", "files"),
            device_kind::MACHINE => ("machine", "kernel commands", "cores"),
            device_kind::KEYBOARD => ("keyboard", "bytes read", "-"),
            device_kind::PCI => ("pci", "class", "first BAR"),
            device_kind::NET => ("net", "frames", "mac"),
            device_kind::SYSCALL => ("syscall", "calls served", "live"),
            _ => ("timer", "ticks", "hz"),
        };
        let core =
            if d.core == u64::MAX { String::from("-") } else { alloc::format!("{}", d.core) };
        // The machine and keyboard devices cannot be allocated, only held: read them
        // through ours.
        let held = match d.kind {
            device_kind::MACHINE => libatoll::machine(),
            device_kind::KEYBOARD => libatoll::keyboard(),
            _ => None,
        };
        let stat = match held {
            Some(machine) => obj::device_stat(machine),
            None => obj::device_alloc(root, d.hwid).and_then(|id| {
                let s = obj::device_stat(ObjRef::new(root, id));
                let _ = share_delobj(ObjRef::new(root, id));
                s
            }),
        };
        match stat {
            Ok(s) if d.kind == device_kind::NET => {
                let m = s.detail.to_le_bytes();
                println!(
                    "{:#x}  {kind:<8} {core:>4}  {name:<8}  {} {count}, {detail} \
                     {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    d.hwid, s.count, m[0], m[1], m[2], m[3], m[4], m[5]
                )
            }
            Ok(s) if d.kind == device_kind::PCI => println!(
                "{:#x}  {kind:<8} {core:>4}  {name:<8}  {count} {:06x}, {detail} {:#x}",
                d.hwid, s.count, s.detail
            ),
            Ok(s) => println!(
                "{:>4}  {kind:<8} {core:>4}  {name:<8}  {} {count}, {} {detail}",
                d.hwid, s.count, s.detail
            ),
            Err(e) => println!("{:>4}  {kind:<8} {core:>4}  {name:<8}  {e:?}", d.hwid),
        }
    }
}

libatoll::main!(main);
