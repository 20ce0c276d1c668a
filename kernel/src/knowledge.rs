//! The system knowledge base, kernel side (Multikernel §4.8): at boot, measure what the
//! machine costs — one-way URPC latency for every ordered pair of cores, each core's compute
//! speed, the cost of waking a halted core with an IPI — and keep it, with the topology,
//! in an `skb::Skb` that the kernel queries (multicast trees, the idle poll budget) and the
//! console shows. Measured once on the boot core.
//!
//! Replicated, not shared (Multikernel §3.3, §4.8; issue M9): each core keeps its own copy
//! (`skb_replica`), made in its own heap by a remote call from the boot core once
//! measured, and every query reads the calling core's copy. Compute speeds measured again later ([`remeasure_speeds`])
//! reach each replica the same way: each core measures itself, and the initiator sends the
//! new table to every core, which stores it in its replica.

use crate::arch::{cpu, timer};
use crate::param::{
    CHASE_LARGEST, CHASE_MIN_LOADS, CHASE_SMALLEST, CHASE_STRIDE, IPI_COST_TRIES, SHOOTDOWN_ROUNDS,
    SHOOTDOWN_WARM_ROUNDS, SKB_JOB_TIMEOUT_US, SPEED_WINDOWS, SPEED_WINDOW_MS,
};
use crate::percpu::{self, CoreState};
use crate::smp::all_ok;
use crate::{monitor, println, smp, tlb};
use ::skb::{CoreInfo, Protocol, Skb};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use record::median;

/// Facts the boot core gathered about the machine (memory, nodes, cores, boot time):
/// part of what the kernel knows about the machine, read by the console and the tests.
pub struct BootFacts {
    /// Usable RAM in bytes when the frame lists were made.
    pub usable_bytes: u64,
    /// End of the highest RAM range.
    pub ram_top: u64,
    /// NUMA nodes.
    pub nodes: u32,
    /// Cores listed by the firmware (and started).
    pub cores_listed: usize,
    /// Microseconds from the first kernel instruction to the console.
    pub boot_us: u64,
}

/// Set once by the boot core, before the console starts.
pub static FACTS: spin::Once<BootFacts> = spin::Once::new();

/// Round trips per ordered pair at boot (the median is kept): fewer on big machines, where
/// the number of pairs grows with the square of the cores (and a VM with more vCPUs than
/// host cores makes each round trip a host scheduling delay).
fn boot_round_trips(cores: usize) -> usize {
    if cores <= 4 {
        15
    } else {
        5
    }
}

/// Compute speeds measured again after boot ([`remeasure_speeds`]), as this core's replica
/// holds them (index: core); 0 where the boot's measurement stands.
static SPEEDS_NOW: percpu::PerCoreState<[u64; crate::percpu::MAX_CORES]> =
    crate::per_core_state!([0; crate::percpu::MAX_CORES]);

/// `core`'s compute speed (work units per ms): the latest measurement this core has heard of.
pub fn compute_speed(core: usize) -> Option<u64> {
    match SPEEDS_NOW.with(|s| s.get(core).copied()) {
        Some(speed) if speed > 0 => Some(speed),
        _ => crate::skb_replica::get()?.compute_speed(core),
    }
}

/// Measures every online core's compute speed again, all at once (a core's speed changed:
/// its duty cycle, `asym`), so the scheduler sees measured power, not a setting; then sends
/// the new table to every core's replica.
pub fn remeasure_speeds() -> Result<(), String> {
    let cores = smp::online_cores();
    let table = measure_speeds(&cores)?;
    // Each core copies the table into its own replica (the call lends `table` until then).
    let store = |_| {
        SPEEDS_NOW.with(|s| {
            for (i, &speed) in table.iter().enumerate().filter(|(_, &v)| v > 0) {
                s[i] = speed;
            }
        });
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, SKB_JOB_TIMEOUT_US, &store))
}

/// Each of `cores`' compute speed (indexed by core; 0 for the others), measured one core
/// at a time: measured all at once, the cores compete for the host's CPUs when they are
/// vCPUs (under TCG, 3 vCPUs on 2 host CPUs once measured a full-speed core at a third of
/// its speed, below a core slowed to half), so the speeds said more about the host's
/// scheduler than about the cores. For the same reason this core sleeps while another
/// measures: spinning, it measured core 1 of 2 at half speed whenever one other program
/// kept one of the host's 2 CPUs busy.
fn measure_speeds(cores: &[usize]) -> Result<Vec<u64>, String> {
    let speeds: Vec<AtomicU64> = (0..percpu::core_count()).map(|_| AtomicU64::new(0)).collect();
    let measure = |i: usize| {
        speeds[i].store(compute_speed_here(), Ordering::Relaxed);
        Ok(())
    };
    let me = percpu::this_core().index;
    for &core in cores {
        let outcome = if core == me {
            monitor::Outcome::Done(measure(me))
        } else {
            match monitor::call_async(core, &measure) {
                Ok(id) => monitor::wait(id, SKB_JOB_TIMEOUT_US),
                Err(_) => monitor::Outcome::NotOnline,
            }
        };
        all_ok(&[core], &[outcome])?;
    }
    Ok(speeds.iter().map(|s| s.load(Ordering::Relaxed)).collect())
}

/// Gives every online core its own replica of `skb` (each clones it into its own heap).
fn replicate(skb: &Skb) -> Result<(), String> {
    let cores = smp::online_cores();
    let copy = |_: usize| {
        crate::skb_replica::set_this_core(skb);
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, SKB_JOB_TIMEOUT_US, &copy))
}

/// One-way latency from this core to `to`: median round trip / 2 over `round_trips` pings.
pub fn one_way_latency(to: usize, round_trips: usize) -> Result<u64, String> {
    let mut samples = Vec::with_capacity(round_trips);
    for _ in 0..round_trips {
        let rtt = monitor::ping(to, 5_000_000).ok_or_else(|| format!("no pong from core {to}"))?;
        samples.push(rtt);
    }
    Ok(median(&mut samples).unwrap_or(0) / 2)
}

/// Units of a fixed integer workload this core completes in one millisecond: the median
/// of [`SPEED_WINDOWS`] windows of [`SPEED_WINDOW_MS`] after an untimed one (under TCG the
/// first run of the loop pays its translation; a long window spans many periods of an
/// emulated duty cycle, `asym=`).
fn compute_speed_here() -> u64 {
    // With interrupts on (a remote call or a system call may have them off): a slowed
    // core's duty cycle is timer interrupts, and it is what is being measured.
    let were_on = cpu::disable_interrupts();
    cpu::enable_interrupts();
    let speed = measure_speed();
    if !were_on {
        cpu::disable_interrupts();
    }
    speed
}

/// [`compute_speed_here`]'s measurement.
fn measure_speed() -> u64 {
    let ms = timer::tsc_hz() / 1000;
    let mut windows = [0u64; SPEED_WINDOWS];
    let _ = work_for(ms);
    for w in windows.iter_mut() {
        *w = work_for(SPEED_WINDOW_MS * ms);
    }
    windows.sort_unstable();
    windows[SPEED_WINDOWS / 2]
}

/// Units of the fixed workload per millisecond, over at least `cycles` TSC cycles (divided
/// by the time that really passed: a halt can stretch the window).
fn work_for(cycles: u64) -> u64 {
    let start = cpu::rdtsc();
    let (mut x, mut units) = (0x9e37_79b9_7f4a_7c15u64, 0u64);
    while cpu::rdtsc() - start < cycles {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        units += 1;
    }
    core::hint::black_box(x);
    let elapsed = (cpu::rdtsc() - start).max(1);
    units * (timer::tsc_hz() / 1000) / elapsed
}

/// Measures the cost C of waking a halted core: a ping to a sleeping core minus a ping to
/// a polling one (medians of a few tries), in TSC cycles.
fn ipi_cost(target: usize) -> Option<u64> {
    let core = percpu::core(target)?;
    let (mut asleep, mut awake) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let start = cpu::rdtsc();
        while !core.is_asleep() {
            if timer::us_since(start) > 200_000 {
                return None;
            }
            monitor::poll();
        }
        asleep.push(monitor::ping(target, 5_000_000)?);
        awake.push(monitor::ping(target, 5_000_000)?);
    }
    let (asleep, awake) = (median(&mut asleep)?, median(&mut awake)?);
    println!("skb: ping to a halted core {asleep} cycles, to a polling core {awake} cycles");
    Some(asleep.saturating_sub(awake))
}

/// Multikernel §5.1 on this machine: times one-phase shootdowns from this core to one core
/// of its package and to all of them, by broadcast and by unicast, and records the medians
/// in `skb`, whose protocol choice within a package then follows them
/// (`Skb::pick_protocol`). A page nothing maps is invalidated: that costs what a mapped
/// one does. A shootdown that fails (a core never answered) leaves the rest unmeasured.
fn measure_shootdowns(skb: &mut Skb, cores: &[usize]) {
    let me = percpu::this_core().index;
    let mut peers = skb.package_mates(me);
    peers.retain(|c| cores.contains(c));
    if peers.is_empty() {
        return; // alone in its package: nothing to measure (1 core, or 1 core a package)
    }
    let mut sizes = Vec::from([1, peers.len()]);
    sizes.dedup();
    let flush = tlb::Flush { start: 0xffff_e000_0000_0000, pages: 1, global: false };
    const PROTOCOLS: [Protocol; 2] = [Protocol::Broadcast, Protocol::Unicast];
    for &n in &sizes {
        let targets: agreement::CoreSet = peers[..n].iter().copied().collect();
        let once = |protocol| {
            let start = cpu::rdtsc();
            let ok = tlb::Shootdown::start_with(targets, flush, Some(protocol)).wait().is_ok();
            ok.then(|| cpu::rdtsc() - start)
        };
        // Untimed rounds first (under an emulator the first runs of each path pay for
        // their translation), then the protocols in turn, so that both see the same drift.
        // A failed round (a core did not answer for 10 s) ends the measuring: the SKB then
        // keeps what it has (unicast, when nothing), and the boot goes on.
        let mut samples = [const { Vec::new() }; PROTOCOLS.len()];
        for round in 0..SHOOTDOWN_WARM_ROUNDS + SHOOTDOWN_ROUNDS {
            for (i, &protocol) in PROTOCOLS.iter().enumerate() {
                match once(protocol) {
                    Some(c) if round >= SHOOTDOWN_WARM_ROUNDS => samples[i].push(c),
                    Some(_) => {}
                    None => {
                        println!("skb: a shootdown to {n} cores failed; measuring stops");
                        return;
                    }
                }
            }
        }
        let mut line = String::new();
        for (i, &protocol) in PROTOCOLS.iter().enumerate() {
            let cycles = median(&mut samples[i]).unwrap_or(0);
            skb.set_shootdown_cost(protocol, n, cycles);
            line += &format!(" {} to {n}: {cycles};", protocol.name());
        }
        println!("skb: shootdowns within the package (cycles):{line}");
    }
}

/// How the boot learns the last-level cache (`llc=cpuid|chase` on the command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheFrom {
    /// From CPUID, the vendor's leaf; measured by a pointer chase only where no leaf says
    /// (the default).
    Cpuid,
    /// Measured by a pointer chase even where CPUID says (to compare the two).
    Chase,
}

/// The last-level cache, from CPUID's vendor leaf (`caches::from_cpuid`) or, where none
/// describes one or `from` says so, measured on this core by a pointer chase over growing
/// sizes (`caches::from_curve`; AMPS §2.4.2 compares resident sets with it).
fn last_level_cache(from: CacheFrom) -> Option<caches::LastLevel> {
    let told = caches::from_cpuid(cpu::cpuid_for_caches);
    if let (Some(llc), CacheFrom::Cpuid) = (told, from) {
        return Some(llc);
    }
    let (free, _) = crate::mem::frames::counts_here();
    let largest = CHASE_LARGEST.min(free * 4096 / 8);
    let mut curve = Vec::new();
    for bytes in caches::chase_sizes(CHASE_SMALLEST, largest) {
        match chase(bytes) {
            Some(cycles_x16) => curve.push(caches::Point { bytes, cycles_x16 }),
            None => break, // no memory for it: the curve ends here
        }
    }
    let mut line = String::new();
    for p in &curve {
        line += &format!(" {}K:{}", p.bytes >> 10, p.cycles_x16 / 16);
    }
    println!("skb: pointer chase (KiB:cycles per load):{line}");
    let measured = caches::from_curve(&curve).map(|bytes| caches::LastLevel {
        level: 0,
        bytes,
        source: caches::Source::PointerChase,
    });
    if let (Some(told), Some(measured)) = (told, measured) {
        println!(
            "skb: llc {} KiB by CPUID ({}), {} KiB by the chase",
            told.bytes >> 10,
            told.source.name(),
            measured.bytes >> 10
        );
    }
    measured.or(told)
}

/// Cycles per dependent load, times 16, of a walk through a buffer of `bytes` in one
/// random cycle of cache lines (`caches::chase_order`); `None` if the heap cannot give
/// the buffer. One untimed lap first (it faults nothing in, but fills the caches and, under
/// an emulator, its TLB), then two laps timed (at least [`CHASE_MIN_LOADS`] loads).
fn chase(bytes: u64) -> Option<u64> {
    let stride = CHASE_STRIDE / core::mem::size_of::<usize>();
    let lines = usize::try_from(bytes).ok()? / CHASE_STRIDE;
    let mut order: Vec<usize> = Vec::new();
    order.try_reserve_exact(lines).ok()?;
    order.resize(lines, 0);
    caches::chase_order(&mut order, bytes);
    let mut buffer: Vec<usize> = Vec::new();
    buffer.try_reserve_exact(lines * stride).ok()?;
    buffer.resize(lines * stride, 0);
    for (i, &next) in order.iter().enumerate() {
        buffer[i * stride] = next * stride;
    }
    drop(order);
    let walk = |loads: usize| {
        let mut at = 0;
        for _ in 0..loads {
            at = core::hint::black_box(buffer[at]);
        }
        at
    };
    // Small buffers are walked many times over, so the loop's own start (under an
    // emulator, its translation) and the clock's grain weigh nothing.
    let loads = (2 * lines).max(CHASE_MIN_LOADS);
    core::hint::black_box(walk(lines.max(CHASE_MIN_LOADS / 4)));
    let start = cpu::rdtsc();
    core::hint::black_box(walk(loads));
    let cycles = cpu::rdtsc() - start;
    Some(cycles * 16 / loads as u64)
}

/// How the next [`measure_at_boot`] learns the last-level cache.
static CACHE_FROM: AtomicU64 = AtomicU64::new(0);

/// Chooses how the boot learns the last-level cache (`llc=` on the command line).
pub fn choose_cache_source(from: CacheFrom) {
    CACHE_FROM.store(from as u64, Ordering::Relaxed);
}

/// Measures everything and publishes the knowledge base (boot core, once, all cores up).
pub fn measure_at_boot() -> Result<(), String> {
    let start = cpu::rdtsc();
    let cores: Vec<usize> = smp::online_cores();
    let mut skb = Skb::new(core_infos());
    learn_last_level_cache(&mut skb);
    // Compute speed, one core at a time.
    let speeds = measure_speeds(&cores)?;
    for &i in &cores {
        skb.set_compute_speed(i, speeds[i]);
    }
    measure_latencies(&mut skb, &cores)?;
    measure_ipi_cost(&mut skb, &cores);
    monitor::broadcast_poll_budget(skb.poll_budget_cycles());
    // With the poll budget in force: idle cores then poll between rounds as they will.
    measure_shootdowns(&mut skb, &cores);
    println!(
        "skb: {} pairs measured, IPI wake-up cost {} cycles, idle poll budget {} cycles ({} us); \
         measured in {} us",
        cores.len() * cores.len().saturating_sub(1),
        skb.ipi_cost().map_or(String::from("unmeasured"), |c| format!("{c}")),
        skb.poll_budget_cycles(),
        timer::tsc_to_us(skb.poll_budget_cycles()),
        timer::us_since(start)
    );
    replicate(&skb)
}

/// Where every core sits (package, core, SMT thread, node); a core not online gets an
/// APIC id of `u32::MAX`.
fn core_infos() -> Vec<CoreInfo> {
    (0..percpu::core_count())
        .map(|i| {
            let c = percpu::core(i).filter(|c| c.state() == CoreState::Online);
            c.map_or(CoreInfo { apic_id: u32::MAX, package: 0, core: 0, smt: 0, node: 0 }, |c| {
                CoreInfo {
                    apic_id: c.apic_id,
                    package: c.location.package,
                    core: c.location.core,
                    smt: c.location.smt,
                    node: c.node,
                }
            })
        })
        .collect()
}

/// The last-level cache, for AMPS's RSS policy (§2.4.2), learnt as [`choose_cache_source`]
/// chose.
fn learn_last_level_cache(skb: &mut Skb) {
    let from = if CACHE_FROM.load(Ordering::Relaxed) == CacheFrom::Chase as u64 {
        CacheFrom::Chase
    } else {
        CacheFrom::Cpuid
    };
    match last_level_cache(from) {
        Some(llc) => {
            let level = if llc.level > 0 { format!("L{}, ", llc.level) } else { String::new() };
            println!(
                "skb: last-level cache {} KiB ({level}{})",
                llc.bytes >> 10,
                llc.source.name()
            );
            skb.set_last_level_cache(llc);
        }
        None => println!("skb: last-level cache unknown (no CPUID leaf, no edge in the chase)"),
    }
}

/// One-way latency between every pair of cores, one source core at a time so
/// measurements do not disturb each other.
fn measure_latencies(skb: &mut Skb, cores: &[usize]) -> Result<(), String> {
    let n = percpu::core_count();
    let latencies: Vec<AtomicU64> = (0..n * n).map(|_| AtomicU64::new(0)).collect();
    for &from in cores {
        let measure = |_| -> Result<(), String> {
            for &to in cores.iter().filter(|&&to| to != from) {
                latencies[from * n + to]
                    .store(one_way_latency(to, boot_round_trips(cores.len()))?, Ordering::Relaxed);
            }
            Ok(())
        };
        all_ok(&[from], &smp::run_on(&[from], SKB_JOB_TIMEOUT_US, &measure))?;
        for &to in cores.iter().filter(|&&to| to != from) {
            skb.set_latency(from, to, latencies[from * n + to].load(Ordering::Relaxed));
        }
    }
    Ok(())
}

/// The IPI wake-up cost, from which the SKB derives the idle poll budget every core uses
/// (§5.2).
fn measure_ipi_cost(skb: &mut Skb, cores: &[usize]) {
    let Some(&target) = cores.iter().find(|&&c| c != 0) else { return };
    // A difference of 0 means the polling ping was itself delayed (a busy host: under TCG
    // on 2 host CPUs about one boot in three saw both pings take ~2 M cycles): noise, not a
    // cost. It is measured again, up to IPI_COST_TRIES times; past them the SKB keeps its
    // default, a real machine's few microseconds, which makes every wait for a message halt
    // almost at once (M15 item 4), so a measured value matters.
    for _ in 0..IPI_COST_TRIES {
        if let Some(c) = ipi_cost(target).filter(|&c| c > 0) {
            skb.set_ipi_cost(c);
            return;
        }
    }
}
