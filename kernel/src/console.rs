//! The kernel console on COM1: a line editor and a handful of commands. `make run` lands
//! here; `make run CMD="..."` runs one command through [`execute`] and powers off.

use crate::arch::{power, serial, timer};
use crate::percpu::{self, CoreState};
use crate::{boot, ktest, mem, print, println};

/// (name, help) of every command, in the order `help` shows them.
const COMMANDS: &[(&str, &str)] = &[
    ("help", "this list"),
    ("cores", "each core: APIC id, package/core/SMT, NUMA node, state, timer ticks"),
    ("mem", "free frames per core"),
    ("skb", "the system knowledge base: topology, compute speed, URPC latency matrix (cycles)"),
    ("monitor", "each core's message counters: rejected messages, idle wake-ups"),
    ("bench", "bench urpc|multicast|shm [iterations]: print RESULT lines"),
    ("ls", "the programs in the initrd"),
    ("run", "run [-c CORES] PROGRAM [ARGS]: run a program once on each listed core (e.g. -c 0-3)"),
    ("tests", "the kernel's integration tests (boot with test=NAME or test=all to run)"),
    ("uptime", "seconds since boot, by the boot core's tick"),
    ("poweroff", "power the machine off"),
];

/// Longest input line.
const LINE_MAX: usize = 256;

/// Prompts and runs commands forever.
pub fn run() -> ! {
    println!("{} (type 'help')", verdict::READY_MARKER);
    let mut line = [0u8; LINE_MAX];
    loop {
        print!("atoll> ");
        let len = read_line(&mut line);
        let text = core::str::from_utf8(&line[..len]).unwrap_or("");
        execute(text);
    }
}

/// Reads one line with echo and backspace; halts between keystrokes (the tick wakes us).
fn read_line(buf: &mut [u8; LINE_MAX]) -> usize {
    let mut len = 0;
    loop {
        let Some(b) = serial::try_read_byte() else {
            // Serve messages; halt when idle (the tick wakes us to look at the UART).
            crate::monitor::idle_once(percpu::this_core());
            continue;
        };
        match b {
            b'\r' | b'\n' => {
                println!();
                return len;
            }
            0x08 | 0x7f if len > 0 => {
                len -= 1;
                print!("\x08 \x08");
            }
            0x20..=0x7e if len < LINE_MAX => {
                buf[len] = b;
                len += 1;
                print!("{}", b as char);
            }
            _ => {}
        }
    }
}

/// Runs one command line.
pub fn execute(line: &str) {
    let mut words = line.split_whitespace();
    match words.next() {
        None => {}
        Some("help") => {
            for (name, help) in COMMANDS {
                println!("  {name:<9} {help}");
            }
        }
        Some("cores") => cores(),
        Some("mem") => mem(),
        Some("tests") => {
            for t in ktest::all() {
                println!(
                    "  {:<28} min_cores={} {}",
                    t.name,
                    t.min_cores,
                    if t.isolated { "isolated" } else { "" }
                );
            }
        }
        Some("skb") => match crate::knowledge::get() {
            Some(skb) => {
                let mut text = alloc::string::String::new();
                let _ = skb.render(&mut text);
                for line in text.lines() {
                    println!("{line}");
                }
            }
            None => println!("the SKB has not been measured"),
        },
        Some("monitor") => {
            println!("core  state      wakeups  rejected");
            for c in percpu::all_cores() {
                println!(
                    "{:>4}  {:<9} {:>8}  {:>8}",
                    c.index,
                    alloc::format!("{:?}", c.state()),
                    c.wakeups(),
                    c.rejected()
                );
            }
            println!(
                "this core: {:?}, poll budget {} cycles",
                crate::monitor::stats(),
                crate::monitor::poll_budget()
            );
        }
        Some("ls") => {
            for (name, size) in crate::user::initrd::files() {
                println!("  {name:<16} {size:>8} bytes");
            }
        }
        Some("run") => run_program(line),
        Some("bench") => {
            let args: alloc::vec::Vec<&str> = words.collect();
            crate::bench::run(&args);
        }
        Some("uptime") => {
            let ticks = percpu::core(0).map_or(0, |c| c.ticks());
            let boot_us = boot::FACTS.get().map_or(0, |f| f.boot_us);
            println!(
                "up {}.{:02} s; booted in {} us",
                ticks / timer::TICK_HZ,
                ticks % timer::TICK_HZ,
                boot_us
            );
        }
        Some("poweroff") => {
            println!("powering off");
            power::power_off()
        }
        Some(other) => println!("unknown command '{other}' (try 'help')"),
    }
}

fn cores() {
    println!("core  apic  pkg  core  smt  node  state      ticks");
    for c in percpu::all_cores() {
        let state = match c.state() {
            CoreState::Offline => "offline",
            CoreState::Starting => "starting",
            CoreState::Online => "online",
            CoreState::Faulted => "FAULTED",
        };
        println!(
            "{:>4}  {:>4}  {:>3}  {:>4}  {:>3}  {:>4}  {:<9} {:>6}{}",
            c.index,
            c.apic_id,
            c.location.package,
            c.location.core,
            c.location.smt,
            c.node,
            state,
            c.ticks(),
            c.fault_vector()
                .map_or(alloc::string::String::new(), |v| alloc::format!("  (exception {v})"))
        );
        if c.unexpected_interrupts() > 0 {
            println!("      {} interrupts on unhandled vectors", c.unexpected_interrupts());
        }
    }
}

fn mem() {
    let facts = boot::FACTS.get();
    println!("core  node  free frames  free MiB");
    for c in percpu::all_cores() {
        println!(
            "{:>4}  {:>4}  {:>11}  {:>8}",
            c.index,
            c.node,
            c.free_frames(),
            (c.free_frames() * 4096) >> 20
        );
    }
    let total = mem::frames::total_free();
    println!(
        "total {} free frames ({} MiB) of {} MiB usable, {} NUMA node(s)",
        total,
        (total * 4096) >> 20,
        facts.map_or(0, |f| f.usable_bytes >> 20),
        facts.map_or(0, |f| f.nodes)
    );
    let (mapped, used) = crate::mem::heap::stats_this_core();
    println!("kernel heap of this core: {} KiB mapped, {} KiB in use", mapped >> 10, used >> 10);
}

/// `run [-c LIST] PROGRAM [ARGS]`: runs the program once on each listed core (default: this
/// core) at once and waits for all of them.
fn run_program(line: &str) {
    let rest = line.trim_start().strip_prefix("run").unwrap_or("").trim_start();
    let (cores, rest) = match rest.strip_prefix("-c") {
        Some(after) => {
            let after = after.trim_start();
            let (list, rest) = after.split_once(' ').unwrap_or((after, ""));
            match cmdline::core_list(list, percpu::core_count()) {
                Some(c) => (c, rest.trim_start()),
                None => return println!("run: bad core list '{list}'"),
            }
        }
        None => (alloc::vec![percpu::this_core().index], rest),
    };
    let (program, args) = rest.split_once(' ').unwrap_or((rest, ""));
    if program.is_empty() {
        return println!("usage: run [-c CORES] PROGRAM [ARGS]");
    }
    let work = |core: usize| -> Result<(), alloc::string::String> {
        match crate::user::run(program, args) {
            Ok(status) => {
                println!("run: {program} on core {core}: {status:?}");
                Ok(())
            }
            Err(e) => Err(alloc::format!("{program}: {e:?}")),
        }
    };
    let outcomes = crate::smp::run_on(&cores, 600_000_000, &work);
    for (core, outcome) in cores.iter().zip(outcomes) {
        if !outcome.is_ok() {
            println!("run: core {core}: {outcome:?}");
        }
    }
}
