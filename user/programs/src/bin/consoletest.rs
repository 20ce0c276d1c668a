//! `consoletest COMMAND...`: the kernel console through its real path, `kernel_command`
//! from a thread's system call, with the machine device (`console.hostile_arguments`
//! runs it so; the arguments are the console's command names). Every command gets hostile
//! arguments it must refuse; then lines it must accept with hostile values, each change
//! undone: a TLB protocol forced, then `auto`; cores slowed to an eighth, then back; blocks
//! retyped to another core and back (the program moves there to give them back); `sched`;
//! a short `bench` of each experiment on 2 to 8 cores. Exits 0 if every answer was right,
//! else 1 after printing each wrong one; 2 without the machine device.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use libatoll::obj::ObjRef;
use libatoll::{println, thread};

/// Words that are no command's argument (as the kernel test had them).
const HOSTILE_WORDS: &[&str] = &[
    "99999999999999",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "0",
    "garbage",
    "1e9",
    "0x10",
    "3.5",
    "--help",
    "\u{e9}t\u{e9}",
];

/// The benchmark experiments, whose iteration counts are checked one by one.
const EXPERIMENTS: &[&str] =
    &["urpc", "multicast", "shootdown", "twophase", "polling", "shm", "console"];

/// The console, through `kernel_command`, counting the answers that were wrong.
struct Console {
    machine: ObjRef,
    wrong: Vec<String>,
}

impl Console {
    fn send(&mut self, line: &str) -> bool {
        libatoll::kernel_command(self.machine, line).is_ok()
    }

    fn refuse(&mut self, line: &str) {
        if self.send(line) {
            self.wrong.push(format!("accepted {:?}", line.chars().take(60).collect::<String>()));
        }
    }

    fn accept(&mut self, line: &str) {
        if !self.send(line) {
            self.wrong.push(format!("refused {line:?}"));
        }
    }
}

fn main() -> i32 {
    let Some(machine) = libatoll::machine() else {
        println!("consoletest: no machine device");
        return 2;
    };
    let mut buf = [0u8; 256];
    let names: Vec<String> =
        libatoll::args(&mut buf).split_whitespace().map(String::from).collect();
    let mut c = Console { machine, wrong: Vec::new() };
    // `--only GROUP` (hostile, tlb, asym, retype, bench, reports): one group, to find which
    // lines leave something behind.
    let only = match names.first().map(String::as_str) {
        Some("--only") => names.get(1).cloned(),
        _ => None,
    };
    let on = |group: &str| only.as_deref().is_none_or(|g| g == group);
    if on("hostile") {
        hostile(&mut c, &names);
    }
    accepted(&mut c, &on);
    for w in &c.wrong {
        println!("consoletest: WRONG: {w}");
    }
    println!("consoletest: {} wrong answers", c.wrong.len());
    if c.wrong.is_empty() {
        0
    } else {
        1
    }
}

/// Lines every command must refuse.
fn hostile(c: &mut Console, names: &[String]) {
    let many_words = "x ".repeat(100);
    for experiment in EXPERIMENTS {
        for word in HOSTILE_WORDS {
            c.refuse(&format!("bench {experiment} {word}"));
        }
        c.refuse(&format!("bench {experiment} 1 1"));
        c.refuse(&format!("bench {experiment} 1 {many_words}"));
    }
    for name in names {
        for word in HOSTILE_WORDS {
            c.refuse(&format!("{name} {word}"));
        }
        c.refuse(&format!("{name} {many_words}"));
    }
    for line in [
        "bench",
        "run",
        "run -c",
        "run -c 0",
        "run -c 0-1-2 hello",
        "run -c 0-99999999999999 hello",
        "run no-such-program",
        // `run` is the shell's from a program: refused even when well formed.
        "run hello",
        "frobnicate",
        "mem\u{1b}[2J",
        "tlb protocol",
        "tlb protocol Unicast",
        "tlb protocol unicast unicast",
        "tlb set unicast",
        "retype 0 1",
        "retype 65 1",
        "retype 1 0",
        "retype 1 64",
        "retype 1 99999999999999",
        "retype -1 1",
        "retype 1 1 1",
        "asym 0:101",
        "asym 64:50",
        "asym 0:13",
        "asym :50",
        "sched 1",
        "poweroff now",
    ] {
        c.refuse(line);
    }
    c.refuse(&"x".repeat(256));
    c.refuse(&format!("mem {}", "9".repeat(252)));
    c.refuse(&format!("bench urpc {}", "9".repeat(245)));
}

/// Lines the console must accept, hostile values included, each change undone.
fn accepted(c: &mut Console, on: &dyn Fn(&str) -> bool) {
    let cores = libatoll::cores_online();
    let last = cores - 1;
    if on("reports") {
        for line in ["", "help", "cores", "mem", "skb", "monitor", "ls", "tests", "uptime", "sched"]
        {
            c.accept(line);
        }
    }
    if on("tlb") {
        for p in ["broadcast", "unicast", "multicast", "numa-multicast"] {
            c.accept(&format!("tlb protocol {p}"));
            c.accept("tlb");
        }
        c.accept("tlb protocol auto");
    }
    if on("asym") {
        // An eighth of every core, then back; one core to half beside another at full
        // speed.
        c.accept(&format!("asym 0-{last}:12.5"));
        c.accept("sched");
        c.accept(&format!("asym 0-{last}:100"));
        if last > 0 {
            // (Naming a core twice is refused: at one core there is no second core.)
            c.accept(&format!("asym {last}:50/0:100"));
        } else {
            c.accept("asym 0:50");
        }
        c.accept(&format!("asym {last}:100"));
    }
    if cores >= 2 && on("retype") {
        // One block and the most a retype takes: each may be refused for want of free
        // memory (the giver keeps a reserve), and what was given must come back.
        for blocks in [1, 64] {
            retype_and_back(c, blocks, last);
        }
    }
    if !on("bench") {
    } else if (2..=8).contains(&cores) {
        for e in EXPERIMENTS {
            c.accept(&format!("bench {e} 1"));
        }
    } else if cores == 1 {
        c.refuse("bench urpc 1");
    }
    c.accept("mem");
}

/// `retype BLOCKS TO` here (core 0), then `retype BLOCKS 0` on `to`: the program moves
/// there for it (a console line gives the memory of the core it runs on).
fn retype_and_back(c: &mut Console, blocks: u64, to: usize) {
    let me = libatoll::pcore_current();
    if !c.send(&format!("retype {blocks} {to}")) {
        println!("consoletest: retype {blocks} {to} refused (short of free memory?)");
        return;
    }
    let moved = thread::set_my_affinity(1 << to).is_ok() && libatoll::pcore_current() == to;
    if moved {
        c.accept(&format!("retype {blocks} {me}"));
    } else {
        c.wrong.push(format!("could not move to core {to} to give the blocks back"));
    }
    let _ = thread::set_my_affinity(1 << me);
}

libatoll::main!(main);
