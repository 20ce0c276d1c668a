//! The boot core's path from the first Rust instruction to the console, top to bottom:
//! memory map → kernel page tables → ACPI → per-core frame lists and blocks → traps →
//! timers → application processors → console or tests.

use crate::arch::boot::{self as pvh, BootInfo};
use crate::arch::paging::{self, phys_to_virt, STACKS_BASE, STACK_SLOT};
use crate::arch::{self, acpi, apic, cpu, power, start_ap, timer, trap};
use crate::mem::{frames, heap};
use crate::monitor;
use crate::param::{CRITICAL_STACK_PAGES, ONLINE_TIMEOUT_US, STACK_PAGES};
use crate::percpu::{self, CoreSetup, CoreState};
use crate::transport::{self, channels};
use crate::{console, knowledge, ktest, println, smp};
use alloc::format;
use alloc::string::String;
use physmem::{CoreFrames, CoreShare, FrameOwners, PhysRange, RangeSet, FRAME_SIZE};
use x86_64::structures::paging::PageTableFlags as F;

const MIB: u64 = 1 << 20;

/// Stops the boot with a message (exits QEMU with the failure code under test).
fn fail(what: core::fmt::Arguments) -> ! {
    println!("{}core=0: boot failed: {}", verdict::PANIC_MARKER, what);
    crate::print::flush();
    power::exit_qemu(verdict::ExitCode::Failure)
}

/// Frames for the kernel page tables, taken from the bottom of the first usable range
/// below 1 GiB (the boot tables' direct-map alias ends there).
struct EarlyFrames {
    next: u64,
    start: u64,
    end: u64,
}

impl Phases {
    /// Microseconds from the first kernel instruction to the end of the last phase.
    fn boot_us(&self) -> u64 {
        timer::tsc_to_us(self.end - pvh::entry_tsc())
    }
}

impl EarlyFrames {
    fn alloc(&mut self) -> Option<u64> {
        (self.next < self.end).then(|| {
            self.next += FRAME_SIZE;
            self.next - FRAME_SIZE
        })
    }
}

/// TSC readings at the end of each boot phase, for the boot log.
struct Phases {
    tables: u64,
    acpi: u64,
    cores: u64,
    calibrated: u64,
    end: u64,
}

/// The boot core's whole boot, phase by phase. Never returns.
pub fn boot_core(start_info: u32) -> ! {
    let info = read_start_info(start_info);
    let (usable, ram_top, pml4) = switch_to_kernel_tables(&info);
    let tables = cpu::rdtsc();
    let (platform, layout) = read_firmware_tables(info.rsdp);
    let acpi = cpu::rdtsc();
    give_each_core_its_memory(&usable, &platform, &layout, pml4);
    let bsp = enter_core_zero(pml4, platform.core_count);
    let cores = cpu::rdtsc();
    timer::calibrate();
    let calibrated = cpu::rdtsc();
    choose_tick(info.cmdline());
    choose_quota(info.cmdline());
    choose_scheduler(info.cmdline());
    choose_tlb_flush(info.cmdline());
    choose_slow_cores(info.cmdline(), platform.core_count);
    crate::throttle::start_tick(0);
    bsp.set_state(CoreState::Online);
    cpu::enable_interrupts();
    let online = start_application_processors(pml4);
    let phases = Phases { tables, acpi, cores, calibrated, end: cpu::rdtsc() };
    knowledge::FACTS.call_once(|| knowledge::BootFacts {
        usable_bytes: usable.total_bytes(),
        ram_top,
        nodes: platform.node_count,
        cores_listed: platform.core_count,
        boot_us: phases.boot_us(),
    });
    print_boot_log(&usable, &platform, &layout, online, &phases);
    find_pci_devices(&platform, ram_top);
    crate::drivers::probe();
    mount_disk();
    if let Err(e) = knowledge::measure_at_boot() {
        println!("skb: measurement failed: {e}");
    }
    start_schedulers();
    hand_over(info.cmdline())
}

/// Mounts the disk's file system, if there is a disk, and says what it found.
fn mount_disk() {
    match crate::storage::mount() {
        Ok(Some(m)) => println!(
            "disk: ext2, {} blocks of {} bytes, {} free{}; buffer cache {} blocks a core",
            m.blocks,
            m.block_size,
            m.free_blocks,
            if m.read_only { ", read-only" } else { "" },
            m.buffers_per_core
        ),
        Ok(None) => {}
        Err(why) => println!("disk: not mounted: {why}"),
    }
}

/// Makes every online core's scheduler, with the powers the SKB just measured (AMPS §2.2).
fn start_schedulers() {
    let cores = smp::online_cores();
    let started = smp::run_on(&cores, 10_000_000, &|_| {
        crate::sched::init_this_core();
        Ok(())
    });
    if let Err(e) = smp::all_ok(&cores, &started) {
        println!("sched: a core's scheduler did not start: {e}");
    }
}

/// `hz=N` on the command line sets every core's tick rate (e.g. `hz=250`, the Linux guest's,
/// for `make bench`); a bad value is reported and the default kept.
fn choose_tick(cmdline: &str) {
    let Some(text) = cmdline::get(cmdline, "hz") else { return };
    let range = timer::TICK_HZ_RANGE;
    let chosen = cmdline::number(text, *range.start() as usize..=*range.end() as usize);
    let refused = match chosen {
        Ok(hz) => timer::choose_tick_hz(hz as u64).is_err(),
        Err(why) => {
            println!("timer: ignoring hz=: {why}");
            false
        }
    };
    if refused {
        println!("timer: ignoring hz={text}: out of range");
    }
}

/// `kquota=PERCENT` (1-100) makes each program's kernel-memory quota that share of its
/// core's memory (default: a quarter, at most 64 MiB); `kquota=off` gives programs none
/// (only the core's reserve limits them). A bad value is reported and the default kept.
fn choose_quota(cmdline: &str) {
    let Some(text) = cmdline::get(cmdline, "kquota") else { return };
    if text == "off" {
        crate::corey::choose_quota_percent(None);
        println!("corey: no kernel-memory quota per program (kquota=off)");
        return;
    }
    match cmdline::number(text, 1..=100) {
        Ok(percent) => {
            crate::corey::choose_quota_percent(Some(percent as u64));
            println!("corey: each program's kernel memory: at most {percent} % of its core's");
        }
        Err(why) => println!("corey: ignoring kquota=: {why}"),
    }
}

/// `sched=amps|symmetric` picks every core's scheduling policy (AMPS unless told
/// otherwise), `numa=always|same-node|rss` when a running thread may move between nodes
/// (AMPS §3.3; always unless told otherwise), `llc=cpuid|chase` how the SKB learns the
/// last-level cache RSS compares with (CPUID's leaf, measured where none says; or measured
/// always); a bad value is reported and the default kept.
fn choose_scheduler(cmdline: &str) {
    if let Some(word) = cmdline::get(cmdline, "sched") {
        match sched::Policy::parse(word) {
            Some(policy) => crate::sched::choose_policy(policy),
            None => println!("sched: ignoring sched={word}: amps or symmetric"),
        }
    }
    match cmdline::get(cmdline, "llc") {
        None | Some("cpuid") => {}
        Some("chase") => knowledge::choose_cache_source(knowledge::CacheFrom::Chase),
        Some(word) => println!("skb: ignoring llc={word}: cpuid or chase"),
    }
    if let Some(word) = cmdline::get(cmdline, "numa") {
        match sched::NumaPolicy::parse(word) {
            Some(policy) => crate::sched::choose_numa(policy),
            None => println!("sched: ignoring numa={word}: always, same-node or rss"),
        }
    }
}

/// `tlbflush=tick` empties each core's TLB at every tick in user mode (for QEMU's TCG,
/// whose software TLB grows only at a flush: `sched::run::FLUSH_ON_TICK`); `tlbflush=off`
/// (the default) does not; a bad value is reported and the default kept.
fn choose_tlb_flush(cmdline: &str) {
    match cmdline::get(cmdline, "tlbflush") {
        None | Some("off") => {}
        Some("tick") => {
            crate::sched::choose_flush_on_tick(true);
            println!("tlb: every core flushes its whole TLB at each tick (tlbflush=tick)");
        }
        Some(word) => println!("tlb: ignoring tlbflush={word}: tick or off"),
    }
}

/// `asym=CORES:PERCENT[/...]` makes those cores run only that share of every millisecond
/// (emulated slow cores, AMPS §4); a bad value is reported and every core kept at full
/// speed.
fn choose_slow_cores(cmdline: &str, cores: usize) {
    let Some(text) = cmdline::get(cmdline, "asym") else { return };
    match cmdline::asym_groups(text, cores) {
        Ok(groups) => {
            for (core, eighths) in groups {
                crate::throttle::configure(core, eighths);
                println!(
                    "asym: core {core} runs {}.{} % of every ms",
                    eighths as u32 * 125 / 10,
                    eighths as u32 * 125 % 10
                );
            }
        }
        Err(why) => println!("asym: ignoring asym={text}: {why}"),
    }
}

/// Opens the serial port and reads the boot information from `hvm_start_info`; notes the
/// initrd; silences the legacy PICs.
fn read_start_info(start_info: u32) -> BootInfo {
    arch::serial::init();
    let info = match pvh::read_start_info(start_info as u64, |pa| phys_to_virt(pa) as *const u8) {
        Ok(info) => info,
        Err(e) => fail(format_args!("bad hvm_start_info: {e:?}")),
    };
    println!("Atoll: booting (PVH), command line \"{}\"", info.cmdline());
    if info.modules_len > 0 {
        let (addr, size) = info.modules[0];
        crate::initrd::set(addr, size);
    }
    arch::disable_legacy_pic();
    info
}

/// Memory map → usable frames (RAM minus low memory, the kernel image and modules); builds
/// the kernel page tables from the first usable frames below 1 GiB and switches to them.
/// Returns the usable frames left, the top of RAM and the kernel PML4.
fn switch_to_kernel_tables(info: &BootInfo) -> (RangeSet<64>, u64, u64) {
    let (mut usable, ram_top) = usable_memory(info);
    let first_low = usable.iter().find(|r| r.start < (1 << 30) && r.len() >= 64 * FRAME_SIZE);
    let Some(first_low) = first_low else { fail(format_args!("no usable memory below 1 GiB")) };
    let mut early = EarlyFrames {
        next: first_low.start,
        start: first_low.start,
        end: first_low.end.min(1 << 30),
    };
    let is_ram = |a: u64, b: u64| {
        info.memory_map().iter().any(|e| e.kind == 1 && e.addr < b && a < e.addr + e.size)
    };
    let map_top = ram_top.max(4 << 30);
    let Some(pml4) = paging::build_kernel_tables(map_top, is_ram, &mut || early.alloc()) else {
        fail(format_args!("out of memory for page tables"))
    };
    // SAFETY: the new tables map the kernel image, the direct map and this stack (in .bss).
    unsafe { paging::activate(pml4) };
    if usable.remove(PhysRange { start: early.start, end: early.next }).is_err() {
        fail(format_args!("memory map too fragmented"));
    }
    (usable, ram_top, pml4)
}

/// Firmware tables: cores, NUMA nodes, the power-off port (ACPI), and how APIC ids split
/// into package/core/SMT (CPUID). Turns this core's local APIC on.
fn read_firmware_tables(rsdp: u64) -> (acpi::Platform, topology::ApicIdLayout) {
    apic::choose_mode();
    apic::enable_on_this_core();
    let platform = match acpi::discover(rsdp, apic::id()) {
        Ok(p) => p,
        Err(e) => fail(format_args!("ACPI: {e:?}")),
    };
    power::set_pm1a_control(platform.pm1a_control);
    (platform, cpu_layout())
}

/// Splits memory among the cores (Corey §4.1), node-local where the SRAT gives nodes, and
/// builds each core's block, stacks and frame list from that core's own frames.
fn give_each_core_its_memory(
    usable: &RangeSet<64>,
    platform: &acpi::Platform,
    layout: &topology::ApicIdLayout,
    pml4: u64,
) {
    let n = platform.core_count;
    let mut shares = [const { CoreShare::new() }; percpu::MAX_CORES];
    if let Err(e) = physmem::partition(
        usable,
        platform.node_memory(),
        &platform.core_node[..n],
        &mut shares[..n],
    ) {
        fail(format_args!("cannot split memory among {n} cores: {e:?}"));
    }
    match FrameOwners::from_shares(&shares[..n]) {
        Ok(owners) => frames::set_owners(owners),
        Err(e) => fail(format_args!("frame owner table: {e:?}")),
    }
    for (i, share) in shares[..n].iter().enumerate() {
        let apic_id = platform.apic_ids[i];
        if let Err(e) =
            build_core(i, apic_id, layout.locate(apic_id), platform.core_node[i], share, n, pml4)
        {
            fail(format_args!("core {i}: {e}"));
        }
    }
}

/// Which layer handles each kind of message between cores: the one table (the
/// declaration of each kind is beside its handler, in the layer's message enum).
static MESSAGE_HANDLERS: [transport::Handler; 7] = [
    transport::Handler {
        layer: "monitor",
        kinds: <monitor::protocol::MonitorMessage as protocol::Protocol>::KINDS,
        handle: transport::Handle::Words(monitor::on_message),
        when: transport::When::AtOnce,
    },
    transport::Handler {
        layer: "monitor (calls)",
        kinds: <monitor::protocol::CallMessage as protocol::Protocol>::KINDS,
        handle: transport::Handle::Words(monitor::on_call),
        when: transport::When::BetweenThreads,
    },
    transport::Handler {
        layer: "monitor (replies)",
        kinds: monitor::protocol::REPLY_KINDS,
        handle: transport::Handle::Bytes(monitor::on_reply),
        when: transport::When::AtOnce,
    },
    transport::Handler {
        layer: "tlb",
        kinds: <crate::tlb::TlbMessage as protocol::Protocol>::KINDS,
        handle: transport::Handle::Words(crate::tlb::on_message),
        when: transport::When::AtOnce,
    },
    transport::Handler {
        layer: "twophase",
        kinds: <crate::twophase::TwoPhaseMessage as protocol::Protocol>::KINDS,
        handle: transport::Handle::Words(crate::twophase::on_message),
        when: transport::When::AtOnce,
    },
    transport::Handler {
        layer: "sched",
        kinds: <crate::sched::message::SchedMessage as protocol::Protocol>::KINDS,
        handle: transport::Handle::Words(crate::sched::on_message),
        when: transport::When::AtOnce,
    },
    transport::Handler {
        layer: "user",
        kinds: <crate::user::StartMessage as protocol::Protocol>::KINDS,
        handle: transport::Handle::Words(crate::user::on_start_message),
        when: transport::When::BetweenThreads,
    },
];

/// The boot core becomes core 0: enters its block, opens its heap and its monitor.
fn enter_core_zero(pml4: u64, cores: usize) -> &'static percpu::PerCore {
    let bsp = percpu::core(0).expect("core 0 was just published");
    // SAFETY: core 0's block, entered once on the boot core, interrupts still off.
    unsafe { bsp.enter() };
    heap::set_ready(pml4);
    if heap::init_this_core().is_none() {
        fail(format_args!("no memory for the kernel heap"));
    }
    crate::print::open_this_core();
    monitor::init_this_core(cores);
    crate::twophase::init_this_core();
    // Each layer above the monitor handles its own messages: one table, by tag.
    if let Err(e) = transport::install_handlers(&MESSAGE_HANDLERS) {
        fail(format_args!("the message handler table: {e}"));
    }
    monitor::set_idle_work(crate::sched::idle_work);
    crate::twophase::set_revocation_hooks(crate::twophase::RevocationHooks {
        fits: crate::corey::revocation::revocation_fits,
        apply: crate::corey::revocation::apply_revocation,
    });
    crate::user::set_kernel_console(console::execute_and_report);
    bsp
}

/// Starts the application processors and waits for them; returns how many cores are
/// online.
fn start_application_processors(pml4: u64) -> usize {
    start_ap::install_trampoline(pml4, pvh::boot_pml4_phys());
    smp::start_application_processors();
    smp::wait_for_online(ONLINE_TIMEOUT_US)
}

/// The boot log: memory, cores, timer, the online marker and the time of each phase.
fn print_boot_log(
    usable: &RangeSet<64>,
    platform: &acpi::Platform,
    layout: &topology::ApicIdLayout,
    online: usize,
    phases: &Phases,
) {
    let n = platform.core_count;
    let core0_free = percpu::core(0).map_or(0, |c| c.free_frames());
    println!(
        "memory: {} MiB usable in {} ranges, {} NUMA node(s), {} frames per core (core 0: {})",
        usable.total_bytes() / MIB,
        usable.len(),
        platform.node_count,
        frames::total_free() / n as u64,
        core0_free
    );
    // Packages as CPUID splits the APIC ids (QEMU: `-smp N,sockets=S`); the SKB's
    // multicast tree has one aggregator per package (Multikernel §5.1).
    let mut packages: alloc::vec::Vec<u32> =
        platform.apic_ids[..n].iter().map(|&id| layout.locate(id).package).collect();
    packages.sort_unstable();
    packages.dedup();
    println!(
        "cores: {online} of {n} online in {} package(s) ({:?}{}), topology smt_bits={} core_bits={}",
        packages.len(),
        apic::mode(),
        if platform.cores_ignored > 0 { ", some beyond MAX_CORES ignored" } else { "" },
        layout.smt_bits,
        layout.core_bits
    );
    println!(
        "timer: TSC {} MHz, APIC timer {} kHz, tick {} Hz",
        timer::tsc_hz() / 1_000_000,
        timer::apic_timer_hz() / 1000,
        timer::tick_hz()
    );
    println!("{}{online}", verdict::ONLINE_MARKER);
    println!("boot: {} us from kernel entry to console", phases.boot_us());
    let us = |a: u64, b: u64| timer::tsc_to_us(b - a);
    println!(
        "boot phases (us): page tables {}, ACPI {}, per-core setup {}, timer calibration {}, APs {}",
        us(pvh::entry_tsc(), phases.tables),
        us(phases.tables, phases.acpi),
        us(phases.acpi, phases.cores),
        us(phases.cores, phases.calibrated),
        us(phases.calibrated, phases.end)
    );
}

/// Walks the PCI Express configuration space the MCFG names and prints each function (its
/// `bb:dd.f`, ids, class and first BAR): `devices` in the shell lists them after.
fn find_pci_devices(platform: &acpi::Platform, ram_top: u64) {
    // The direct map reaches at least 4 GiB (`switch_to_kernel_tables`).
    match crate::arch::pci::scan(platform.ecam, ram_top.max(4 << 30)) {
        Ok(functions) => {
            let ecam = platform.ecam.expect("a scan needs the ECAM");
            println!(
                "pci: {} functions (ECAM {:#x}, buses {}-{})",
                functions.len(),
                ecam.base,
                ecam.bus_start,
                ecam.bus_end
            );
            for f in functions {
                let bar = match f.first_bar() {
                    Some(b) if b.io => format!(", io {:#x}+{:#x}", b.address, b.size),
                    Some(b) => format!(", mem {:#x}+{:#x}", b.address, b.size),
                    None => String::new(),
                };
                println!(
                    "pci: {:02x}:{:02x}.{} {:04x}:{:04x} {} (class {:06x}), node {}{bar}",
                    f.bus,
                    f.device,
                    f.function,
                    f.vendor_id,
                    f.device_id,
                    f.class_name(),
                    f.class_code,
                    f.node
                );
            }
        }
        Err(e) => println!("pci: none ({e:?})"),
    }
}

/// What the boot core does once the machine is up: the `test=` tests, or the shell
/// (`init`, with the `cmd=` line as its argument), or the kernel console (`console=kernel`,
/// or when `init` is missing or ends); `cmd=` powers off after its one line.
fn hand_over(cmdline: &str) -> ! {
    if let Some(selector) = cmdline::get(cmdline, verdict::cmdline_keys::TEST) {
        ktest::run(selector)
    }
    let command = cmdline::get(cmdline, verdict::cmdline_keys::CMD);
    if cmdline::get(cmdline, "console") != Some("kernel") && crate::initrd::find("init").is_some() {
        println!("{} (the init shell; type 'help')", verdict::READY_MARKER);
        // The shell runs for as long as the machine does: no time limit.
        let status = crate::user::run_with_machine("init", command.unwrap_or(""), u64::MAX);
        if let Err(e) = status {
            println!("init could not start: {e:?}");
        }
        if command.is_some() {
            crate::print::flush();
            power::power_off()
        }
        println!("init ended ({status:?}); the kernel console takes over");
    } else if let Some(command) = command {
        let _ = console::execute_and_report(command);
        crate::print::flush();
        power::power_off()
    }
    console::run()
}

/// RAM from the memory map minus what must never be handed out; and the top of RAM.
fn usable_memory(info: &BootInfo) -> (RangeSet<64>, u64) {
    let (kstart, kend) = paging::kernel_image_phys();
    let ram = info
        .memory_map()
        .iter()
        .filter(|e| e.kind == 1)
        .map(|e| PhysRange { start: e.addr, end: e.addr + e.size });
    let ram_top = ram.clone().map(|r| r.end).max().unwrap_or(0);
    let mut reserved = [PhysRange { start: 0, end: MIB }; 6];
    reserved[1] = PhysRange { start: kstart, end: kend };
    for (i, &(addr, size)) in info.modules[..info.modules_len].iter().enumerate() {
        reserved[2 + i] = PhysRange { start: addr, end: addr + size };
    }
    match physmem::usable_frames(ram, reserved) {
        Ok(set) => (set, ram_top),
        Err(_) => fail(format_args!("memory map has too many ranges")),
    }
}

/// How APIC ids split into package / core / SMT, from CPUID.
fn cpu_layout() -> topology::ApicIdLayout {
    let max_leaf = cpu::cpuid(0, 0).eax;
    if max_leaf >= 0xb {
        let levels = (0..8).map(|i| {
            let r = cpu::cpuid(0xb, i);
            (r.eax, r.ecx)
        });
        if let Some(l) = topology::ApicIdLayout::from_extended_leaf(levels) {
            return l;
        }
    }
    let leaf1 = cpu::cpuid(1, 0);
    let cores = if max_leaf >= 4 { (cpu::cpuid(4, 0).eax >> 26) + 1 } else { 1 };
    topology::ApicIdLayout::from_legacy(leaf1.edx & (1 << 28) != 0, (leaf1.ebx >> 16) & 0xff, cores)
}

/// Builds core `i`'s frame list, block and stacks from its own share of memory, and
/// publishes the block.
fn build_core(
    i: usize,
    apic_id: u32,
    location: topology::CpuLocation,
    node: u32,
    share: &CoreShare,
    cores: usize,
    pml4: u64,
) -> Result<(), &'static str> {
    if share.is_empty() {
        return Err("no memory left for this core (VM too small for this many cores)");
    }
    // The bitmap lives in the first frames of the first range big enough to hold it.
    let words = physmem::bitmap_words(share.ranges());
    let bitmap_frames = (words as u64 * 8).div_ceil(FRAME_SIZE);
    let home = share
        .ranges()
        .iter()
        .find(|r| r.frames() >= bitmap_frames + 8)
        .ok_or("too little memory")?;
    // SAFETY: these frames belong to core `i` alone, are mapped by the direct map, and are
    // marked used right below, so they are never handed out.
    let storage =
        unsafe { core::slice::from_raw_parts_mut(phys_to_virt(home.start) as *mut u64, words) };
    let mut cf = CoreFrames::new(i, share.ranges(), storage).map_err(|_| "bad frame ranges")?;
    for k in 0..bitmap_frames {
        cf.mark_used(home.start + k * FRAME_SIZE).map_err(|_| "bitmap frames")?;
    }
    let block = cf.alloc().ok_or("no frame for the core block")?;
    // SAFETY: a fresh frame of this core's own.
    unsafe { core::ptr::write_bytes(phys_to_virt(block) as *mut u8, 0, FRAME_SIZE as usize) };
    let idt_frame = cf.alloc().ok_or("no frame for the IDT")?;
    // SAFETY: a fresh frame of this core's own, kept for the kernel's lifetime.
    let idt = unsafe { trap::build_idt(phys_to_virt(idt_frame)) };
    // The channels this core receives on, in its own memory (Multikernel §4.6).
    for from in (0..cores).filter(|&from| from != i) {
        channels::install(from, i, cf.alloc().ok_or("no frame for a channel")?);
    }
    let (stack, critical_stack_top) = map_stacks(i, &mut cf, pml4)?;
    let setup =
        CoreSetup { index: i, apic_id, location, node, frames: cf, stack, critical_stack_top, idt };
    // SAFETY: `block` is a zeroed frame of core `i`, kept for the kernel's lifetime.
    unsafe { percpu::publish(phys_to_virt(block), setup) };
    Ok(())
}

/// Maps core `i`'s stacks in its slot of the stack region, from its own frames:
/// `[guard][kernel stack][guard][critical stack]`. Returns the kernel stack's range (the
/// boot core keeps the stack it runs on) and the top of the critical (IST) stack.
fn map_stacks(i: usize, cf: &mut CoreFrames, pml4: u64) -> Result<((u64, u64), u64), &'static str> {
    let slot = STACKS_BASE + i as u64 * STACK_SLOT;
    let stack_low = slot + FRAME_SIZE;
    let critical_low = stack_low + STACK_PAGES * FRAME_SIZE + FRAME_SIZE;
    let mut alloc = || cf.alloc();
    for (low, pages) in [(stack_low, STACK_PAGES), (critical_low, CRITICAL_STACK_PAGES)] {
        for p in 0..pages {
            let pa = alloc().ok_or("no frame for a stack")?;
            // SAFETY: the boot core builds the stack region before other cores start.
            unsafe {
                paging::map_page(
                    pml4,
                    low + p * FRAME_SIZE,
                    pa,
                    F::WRITABLE | F::NO_EXECUTE | F::GLOBAL,
                    &mut alloc,
                )
            }
            .ok_or("no frame for a page table")?;
        }
    }
    let stack = if i == 0 {
        pvh::bsp_stack_range()
    } else {
        (stack_low, stack_low + STACK_PAGES * FRAME_SIZE)
    };
    Ok((stack, critical_low + CRITICAL_STACK_PAGES * FRAME_SIZE))
}
