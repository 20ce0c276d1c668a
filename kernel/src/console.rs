//! The kernel console on COM1: a line editor and a handful of commands. `make run
//! CONSOLE=kernel` lands here; `cmd=` on the command line runs one line through
//! [`execute`], and so does the `kernel_command` system call.
//!
//! Whoever sends a line, it cannot take the core down (DESIGN principle 5): every command
//! checks its arguments (numbers within stated bounds, no extra words), allocates what
//! the input sizes fallibly, bounds its work, and answers. A refused line is an `Err` with
//! the reason, which callers print as `<command>: <error>` ([`execute_and_report`]).

use crate::arch::{power, serial, timer};
use crate::percpu::{self, CoreState};
use crate::smp::{self, Outcome};
use crate::{bench, mem, print, println};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use cmdline::{Printable, ECHO_MAX};

/// One console command.
struct Command {
    name: &'static str,
    /// Its arguments as `help` and usage errors show them ("" for none).
    args: &'static str,
    /// What it does, for `help`.
    help: &'static str,
    /// Runs it with the rest of the line after the name (trimmed).
    run: fn(&str) -> Result<(), String>,
}

/// Every command, in the order `help` shows them.
const COMMANDS: &[Command] = &[
    Command { name: "help", args: "", help: "this list", run: help },
    Command {
        name: "cores",
        args: "",
        help: "each core: APIC id, package/core/SMT, NUMA node, state, timer ticks",
        run: cores,
    },
    Command { name: "mem", args: "", help: "free frames per core", run: mem },
    Command {
        name: "skb",
        args: "",
        help: "the system knowledge base: topology, compute speed, URPC latency (cycles)",
        run: skb,
    },
    Command {
        name: "monitor",
        args: "",
        help: "each core's message counters: rejected messages, idle wake-ups",
        run: monitor,
    },
    Command {
        name: "bench",
        args: bench::USAGE,
        help: "an in-kernel experiment, printing RESULT lines ('bench' alone: the limits)",
        run: bench::command,
    },
    Command {
        name: "sched",
        args: "",
        help: "each core's scheduler: threads, switches, migrations, its load replica",
        run: sched_report,
    },
    Command {
        name: "asym",
        args: "CORES:PERCENT[/...]",
        help: "slow cores down (or back: 1:100) now, re-measure every core's speed",
        run: asym,
    },
    Command {
        name: "tlb",
        args: "[protocol auto|broadcast|unicast|multicast|numa-multicast]",
        help: "TLB shootdowns by message: the protocol in use, or set it (auto: the SKB's)",
        run: tlb,
    },
    Command {
        name: "retype",
        args: "BLOCKS CORE",
        help: "give free memory (256 KiB blocks) of this core to another, by two-phase commit",
        run: retype,
    },
    Command { name: "ls", args: "", help: "the programs in the initrd", run: ls },
    Command {
        name: "run",
        args: "[-c CORES] PROGRAM [ARGS]",
        help: "run a program once on each listed core (e.g. -c 0-3), wait for all",
        run: run_program,
    },
    Command {
        name: "tests",
        args: "",
        help: "the kernel's integration tests (boot with test=NAME or test=all to run)",
        run: tests,
    },
    Command { name: "uptime", args: "", help: "seconds since boot, by core 0's tick", run: uptime },
    Command { name: "poweroff", args: "", help: "power the machine off", run: poweroff },
];

/// `tlb`: which protocol shootdowns use, and shootdowns that timed out; `tlb protocol NAME`
/// overrides the SKB's choice (`auto` gives it back).
fn tlb(args: &str) -> Result<(), String> {
    let mut words = args.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (None, _, _) => {}
        (Some("protocol"), Some("auto"), None) => crate::tlb::set_protocol(None),
        (Some("protocol"), Some(name), None) => match skb::Protocol::parse(name) {
            Some(p) => crate::tlb::set_protocol(Some(p)),
            None => return Err(format!("no protocol `{name}`")),
        },
        _ => {
            return Err(
                "usage: tlb [protocol auto|broadcast|unicast|multicast|numa-multicast]".into()
            )
        }
    }
    let chosen = crate::tlb::protocol_override().map_or("auto (the SKB picks)", |p| p.name());
    println!("tlb: protocol {chosen}; {} shootdowns timed out", crate::tlb::timed_out_shootdowns());
    // What the SKB's choice within a package rests on (measured at boot).
    if let Some(skb) = crate::skb_replica::get().filter(|s| !s.shootdown_costs().is_empty()) {
        let mut line = String::from("tlb: measured within the package (cycles):");
        for &(p, n, cycles) in skb.shootdown_costs() {
            line += &format!(" {} to {n}: {cycles};", p.name());
        }
        let me = crate::percpu::this_core().index;
        let local = skb.package_mates(me);
        if let Some(&peer) = local.first() {
            line += &format!(
                " to 1 core the SKB picks {}, to {} {}",
                skb.pick_protocol(me, [peer]).name(),
                local.len(),
                skb.pick_protocol(me, local.iter().copied()).name()
            );
        }
        println!("{line}");
    }
    Ok(())
}

/// Longest input line, in bytes.
const LINE_MAX: usize = 256;
/// How long `run` waits for a program (the programs' own default time limit).
const RUN_TIMEOUT_US: u64 = crate::param::DEFAULT_LIMIT_US;

/// Prompts and runs commands forever.
pub fn run() -> ! {
    println!("{} (type 'help')", verdict::READY_MARKER);
    let mut line = [0u8; LINE_MAX];
    loop {
        print!("atoll> ");
        let len = read_line(&mut line);
        // `read_line` keeps printable ASCII only, so this cannot fail.
        let text = core::str::from_utf8(&line[..len]).unwrap_or("");
        let _ = execute_and_report(text);
    }
}

/// Reads one line with echo and backspace; halts between keystrokes (the tick wakes us).
fn read_line(buf: &mut [u8; LINE_MAX]) -> usize {
    let mut len = 0;
    loop {
        let Some(b) = serial::try_read_byte() else {
            // Serve messages; halt when idle (the tick wakes us to look at the UART).
            crate::sched::idle_once();
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

/// Runs one command line. `Ok` when the command was accepted and did its work; `Err` with
/// the reason when the line was refused (unknown command, bad or extra arguments, a line
/// longer than 256 bytes) or the work failed. An empty line is accepted and does nothing.
pub fn execute(line: &str) -> Result<(), String> {
    if line.len() > LINE_MAX {
        return Err(format!("the line is {} bytes long; the most is {LINE_MAX}", line.len()));
    }
    let line = line.trim();
    let (name, rest) = split_word(line);
    if name.is_empty() {
        return Ok(());
    }
    let command = COMMANDS
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| String::from("unknown command (try 'help')"))?;
    (command.run)(rest)
}

/// [`execute`], printing a refusal as `<command>: <error>`.
pub fn execute_and_report(line: &str) -> Result<(), String> {
    let outcome = execute(line);
    if let Err(e) = &outcome {
        let name = line.split_whitespace().next().unwrap_or("");
        println!("{}: {}", Printable(name, ECHO_MAX), Printable(e, usize::MAX));
    }
    outcome
}

/// The commands' names, in `help`'s order (for tests that feed every command).
pub fn command_names() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().map(|c| c.name)
}

/// The first word of `text` and the rest after it (leading spaces trimmed).
fn split_word(text: &str) -> (&str, &str) {
    match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim_start()),
        None => (text, ""),
    }
}

/// The usage error of a command that takes no arguments, if it got some.
fn no_arguments(args: &str) -> Result<(), String> {
    if args.is_empty() {
        Ok(())
    } else {
        Err("takes no arguments".into())
    }
}

/// `help`: every command with its arguments and what it does.
fn help(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    let usage = |c: &Command| {
        if c.args.is_empty() {
            String::from(c.name)
        } else {
            format!("{} {}", c.name, c.args)
        }
    };
    let width = COMMANDS.iter().map(|c| usage(c).len()).max().unwrap_or(0);
    for c in COMMANDS {
        println!("  {:<width$}  {}", usage(c), c.help);
    }
    Ok(())
}

/// `cores`: each core's place, state and ticks.
fn cores(args: &str) -> Result<(), String> {
    no_arguments(args)?;
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
            c.fault_vector().map_or(String::new(), |v| format!("  (exception {v})"))
        );
        if c.unexpected_interrupts() > 0 {
            println!("      {} interrupts on unhandled vectors", c.unexpected_interrupts());
        }
    }
    Ok(())
}

/// `mem`: free frames per core, and this core's heap.
fn mem(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    let facts = crate::knowledge::FACTS.get();
    println!("core  node  free frames  free MiB  retype failures");
    for c in percpu::all_cores() {
        println!(
            "{:>4}  {:>4}  {:>11}  {:>8}  {:>15}",
            c.index,
            c.node,
            c.free_frames(),
            (c.free_frames() * 4096) >> 20,
            mem::frames::retype_failures(c.index)
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
    let retyped = mem::frames::retyped_here();
    print!("blocks retyped since boot (this core's replica): {}", retyped.len());
    for (block, owner) in retyped.iter().take(8) {
        print!(" {block:#x}->{owner}");
    }
    println!("{}", if retyped.len() > 8 { " ..." } else { "" });
    Ok(())
}

/// `retype BLOCKS CORE`: gives that many blocks of this core's free memory to `CORE`.
fn retype(args: &str) -> Result<(), String> {
    const USAGE: &str = "usage: retype BLOCKS CORE (BLOCKS of 256 KiB, 1-64)";
    let mut words = args.split_whitespace();
    let (Some(blocks), Some(to), None) = (words.next(), words.next(), words.next()) else {
        return Err(USAGE.into());
    };
    let (Ok(blocks), Ok(to)) = (blocks.parse::<u64>(), to.parse::<usize>()) else {
        return Err(USAGE.into());
    };
    let start = crate::arch::cpu::rdtsc();
    let first = crate::retype::give(blocks, to).map_err(|e| format!("{e}"))?;
    let us = crate::arch::timer::us_since(start);
    let end = first + blocks * physmem::BLOCK_SIZE;
    println!(
        "retype: core {} gave {blocks} block(s) {first:#x}..{end:#x} to core {to} in {us} us",
        percpu::this_core().index
    );
    Ok(())
}

/// `skb`: the system knowledge base as measured at boot.
fn skb(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    let skb = crate::skb_replica::get().ok_or("the SKB has not been measured")?;
    let mut text = String::new();
    skb.render(&mut text).map_err(|_| "cannot render the SKB")?;
    for line in text.lines() {
        println!("{line}");
    }
    Ok(())
}

/// `monitor`: each core's message counters.
fn monitor(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    println!("core  state      wakeups  rejected");
    for c in percpu::all_cores() {
        let state = format!("{:?}", c.state());
        println!("{:>4}  {:<9} {:>8}  {:>8}", c.index, state, c.wakeups(), c.rejected());
    }
    println!(
        "this core: {:?}, {:?}, poll budget {} cycles",
        crate::transport::stats(),
        crate::monitor::stats(),
        crate::transport::poll_budget()
    );
    Ok(())
}

/// `sched`: each core's scheduler counters and its replica of the load table (AMPS's
/// scaled power P and run-queue length per core, as that core last heard them).
fn sched_report(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    println!(
        "sched: policy {}, numa {}, last-level cache {} KiB",
        crate::sched::policy().name(),
        crate::sched::numa_policy().name(),
        crate::sched::last_level_cache_bytes() / 1024
    );
    let cores = smp::online_cores();
    let outcomes = smp::run_on(&cores, 5_000_000, &|core| {
        let (st, queued, parked, loads) = crate::sched::report();
        let mut replica = String::new();
        for (length, power, online) in loads {
            let mark = if online { "" } else { "x" };
            replica.push_str(&format!(" {length}/{}.{:03}{mark}", power / 1000, power % 1000));
        }
        println!(
            "core {core}: threads {queued} ready+running, {parked} parked; switches {}, preemptions {}, migrations in {} out {}, pulls {}, load reports {}; loads (length/P):{replica}",
            st.switches, st.preemptions, st.migrations_in, st.migrations_out, st.pulls, st.reports
        );
        let (eighths, periods, off) = crate::throttle::stats(core);
        if eighths < 8 {
            println!(
                "core {core}: slowed to {eighths}/8 of every ms: {periods} periods, {} ms halted",
                off / (timer::tsc_hz() / 1000).max(1)
            );
        }
        Ok(())
    });
    smp::all_ok(&cores, &outcomes)
}

/// `asym CORES:PERCENT[/...]`: changes duty cycles at run time (AMPS's emulated slow
/// cores), then re-measures every core's speed; prints the new speeds.
fn asym(args: &str) -> Result<(), String> {
    let groups = cmdline::asym_groups(args.trim(), percpu::core_count())?;
    crate::sched::change_duty(&groups)?;
    for c in smp::online_cores() {
        let speed = crate::knowledge::compute_speed(c).unwrap_or(0);
        let eighths = crate::throttle::duty_eighths(c);
        println!("core {c}: {eighths}/8 of every ms, speed {speed}");
    }
    Ok(())
}

/// `ls`: the initrd's files.
fn ls(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    for (name, size) in crate::initrd::files() {
        println!("  {name:<16} {size:>8} bytes");
    }
    Ok(())
}

/// `tests`: the registered kernel tests.
fn tests(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    for t in crate::testing::all() {
        let isolated =
            if t.isolation == crate::testing::Isolation::Alone { "isolated" } else { "" };
        println!("  {:<28} min_cores={} {isolated}", t.name, t.min_cores);
    }
    Ok(())
}

/// `uptime`: core 0's ticks, and how long boot took.
fn uptime(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    let ticks = percpu::core(0).map_or(0, |c| c.ticks());
    let boot_us = crate::knowledge::FACTS.get().map_or(0, |f| f.boot_us);
    println!(
        "up {}.{:02} s; booted in {} us",
        ticks / timer::tick_hz(),
        ticks % timer::tick_hz(),
        boot_us
    );
    Ok(())
}

/// `poweroff`.
fn poweroff(args: &str) -> Result<(), String> {
    no_arguments(args)?;
    println!("powering off");
    crate::print::flush();
    power::power_off()
}

/// `run [-c LIST] PROGRAM [ARGS]`: runs the program once on each listed core (default: this
/// core) at once and waits for all of them. ARGS go to the program as they are.
fn run_program(args: &str) -> Result<(), String> {
    let usage = || String::from("usage: run [-c CORES] PROGRAM [ARGS]");
    let (cores, rest) = match args.strip_prefix("-c") {
        Some(after) => {
            let (list, rest) = split_word(after.trim_start());
            let n = percpu::core_count();
            let cores = cmdline::core_list(list, n).ok_or_else(|| {
                let list = Printable(list, ECHO_MAX);
                format!("bad core list '{list}' (cores 0 to {}, e.g. 0-3,5)", n - 1)
            })?;
            (cores, rest)
        }
        None => (alloc::vec![percpu::this_core().index], args),
    };
    let (program, program_args) = split_word(rest);
    if program.is_empty() {
        return Err(usage());
    }
    if crate::initrd::find(program).is_none() {
        return Err(format!(
            "no program '{}' in the initrd (try 'ls')",
            Printable(program, ECHO_MAX)
        ));
    }
    let work = |core: usize| -> Result<(), String> {
        let status = crate::user::run(program, program_args).map_err(|e| format!("{e:?}"))?;
        println!("run: {program} on core {core}: {status:?}");
        Ok(())
    };
    let outcomes = smp::run_on(&cores, RUN_TIMEOUT_US, &work);
    let failures: Vec<String> = cores
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| !outcome.is_ok())
        .map(|(core, outcome)| {
            format!("{} on core {core}: {}", Printable(program, ECHO_MAX), why(outcome))
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// Why a job did not succeed, in words.
fn why(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Done(Ok(())) => "done".into(),
        Outcome::Done(Err(e)) => e.clone(),
        Outcome::Faulted(vector) => format!("the core took exception {vector}"),
        Outcome::TimedOut => format!("no answer in {} s", RUN_TIMEOUT_US / 1_000_000),
        Outcome::NotOnline => "the core is not online".into(),
    }
}
