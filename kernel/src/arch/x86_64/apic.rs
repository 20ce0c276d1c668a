//! The local APIC: x2APIC (MSRs) when CPUID offers it, xAPIC (MMIO) otherwise — TCG has no
//! x2APIC. Timer, end-of-interrupt, and inter-processor interrupts (fixed, INIT, SIPI).

use super::cpu::{self, rdmsr, wrmsr};
use super::paging::phys_to_virt;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

const IA32_APIC_BASE: u32 = 0x1b;
const APIC_GLOBAL_ENABLE: u64 = 1 << 11;
const APIC_X2_ENABLE: u64 = 1 << 10;

// Register offsets (xAPIC MMIO); the x2APIC MSR is 0x800 + offset / 16.
const REG_ID: u32 = 0x20;
const REG_TPR: u32 = 0x80;
const REG_EOI: u32 = 0xb0;
const REG_SVR: u32 = 0xf0;
const REG_ICR_LOW: u32 = 0x300;
const REG_ICR_HIGH: u32 = 0x310;
const REG_LVT_TIMER: u32 = 0x320;
const REG_TIMER_INIT: u32 = 0x380;
const REG_TIMER_CURRENT: u32 = 0x390;
const REG_TIMER_DIVIDE: u32 = 0x3e0;

const TIMER_PERIODIC: u32 = 1 << 17;
const LVT_MASKED: u32 = 1 << 16;
const ICR_DELIVERY_PENDING: u32 = 1 << 12;
const ICR_INIT: u32 = 0x4500; // INIT, level assert
const ICR_STARTUP: u32 = 0x4600; // SIPI, level assert
/// Divide the bus clock by 16 (divide-configuration value 0b0011).
const TIMER_DIVIDE_16: u32 = 0x3;

/// Which interface the local APICs are driven through (the same on every core).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum ApicMode {
    /// Memory-mapped registers at the APIC base.
    XApic = 1,
    /// MSRs 0x800..0x8ff; 32-bit APIC ids.
    X2Apic = 2,
}

static MODE: AtomicU8 = AtomicU8::new(0);
static XAPIC_BASE_VIRT: AtomicU64 = AtomicU64::new(0);

/// The APIC interface in use (chosen by the boot core).
pub fn mode() -> ApicMode {
    if MODE.load(Ordering::Relaxed) == ApicMode::X2Apic as u8 {
        ApicMode::X2Apic
    } else {
        ApicMode::XApic
    }
}

/// Picks x2APIC when CPUID.1:ECX[21] says it exists; boot core, once.
pub fn choose_mode() -> ApicMode {
    let mode =
        if cpu::cpuid(1, 0).ecx & (1 << 21) != 0 { ApicMode::X2Apic } else { ApicMode::XApic };
    let base = rdmsr(IA32_APIC_BASE) & 0x000f_ffff_ffff_f000;
    XAPIC_BASE_VIRT.store(phys_to_virt(base), Ordering::Relaxed);
    MODE.store(mode as u8, Ordering::Relaxed);
    mode
}

fn read(reg: u32) -> u32 {
    match mode() {
        ApicMode::X2Apic => rdmsr(0x800 + (reg >> 4)) as u32,
        ApicMode::XApic => {
            let addr = XAPIC_BASE_VIRT.load(Ordering::Relaxed) + reg as u64;
            // SAFETY: the APIC page is mapped uncached in the direct map; registers are 32-bit.
            unsafe { core::ptr::read_volatile(addr as *const u32) }
        }
    }
}

fn write(reg: u32, value: u32) {
    match mode() {
        // SAFETY: writing an APIC register through its architectural MSR.
        ApicMode::X2Apic => unsafe { wrmsr(0x800 + (reg >> 4), value as u64) },
        ApicMode::XApic => {
            let addr = XAPIC_BASE_VIRT.load(Ordering::Relaxed) + reg as u64;
            // SAFETY: as in `read`.
            unsafe { core::ptr::write_volatile(addr as *mut u32, value) }
        }
    }
}

/// Enables this core's local APIC in the chosen mode, with the spurious vector set.
pub fn enable_on_this_core() {
    let mut base = rdmsr(IA32_APIC_BASE) | APIC_GLOBAL_ENABLE;
    if mode() == ApicMode::X2Apic {
        base |= APIC_X2_ENABLE;
    }
    // SAFETY: enabling the APIC (and x2APIC mode) keeps the base address unchanged.
    unsafe { wrmsr(IA32_APIC_BASE, base) };
    write(REG_TPR, 0);
    write(REG_SVR, (1 << 8) | super::trap::VECTOR_SPURIOUS as u32);
}

/// This core's APIC id.
pub fn id() -> u32 {
    match mode() {
        ApicMode::X2Apic => read(REG_ID),
        ApicMode::XApic => read(REG_ID) >> 24,
    }
}

/// Signals end of interrupt.
pub fn eoi() {
    write(REG_EOI, 0);
}

/// Starts the timer counting down from its maximum, masked: used for calibration.
pub fn timer_start_free_running() {
    write(REG_TIMER_DIVIDE, TIMER_DIVIDE_16);
    write(REG_LVT_TIMER, LVT_MASKED | super::trap::VECTOR_TIMER as u32);
    write(REG_TIMER_INIT, u32::MAX);
}

/// The timer's current count.
pub fn timer_current() -> u32 {
    read(REG_TIMER_CURRENT)
}

/// Starts a periodic tick every `count` timer units (bus clock / 16).
pub fn timer_start_periodic(count: u32) {
    write(REG_TIMER_DIVIDE, TIMER_DIVIDE_16);
    write(REG_LVT_TIMER, TIMER_PERIODIC | super::trap::VECTOR_TIMER as u32);
    write(REG_TIMER_INIT, count.max(1));
}

/// Arms the timer once: one interrupt after `count` timer units (bus clock / 16).
pub fn timer_one_shot(count: u32) {
    write(REG_TIMER_DIVIDE, TIMER_DIVIDE_16);
    write(REG_LVT_TIMER, super::trap::VECTOR_TIMER as u32);
    write(REG_TIMER_INIT, count.max(1));
}

/// The destination this core last wrote to its ICR's high half (xAPIC), kept in the
/// sending core's own block. The high half holds its value, so a second IPI to the same
/// core writes only the low half, which sends it: two register accesses instead of three.
/// Under TCG each is an exit from the translated code (about 1k cycles), and a shootdown's
/// wake-up is on the critical path of every unmap.
pub struct IcrDestination(AtomicU32);

impl IcrDestination {
    /// Nothing written yet: the next IPI writes both halves.
    pub const fn new() -> Self {
        IcrDestination(AtomicU32::new(u32::MAX))
    }
}

impl Default for IcrDestination {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes the ICR with interrupts off, so that no handler on this core sends an IPI of its
/// own between the two halves. `sent` must be the calling core's own [`IcrDestination`].
fn send_icr(sent: &IcrDestination, apic_id: u32, low: u32) {
    cpu::without_interrupts(|| match mode() {
        // SAFETY: ICR writes only send interrupts.
        ApicMode::X2Apic => unsafe { wrmsr(0x830, (apic_id as u64) << 32 | low as u64) },
        ApicMode::XApic => {
            while read(REG_ICR_LOW) & ICR_DELIVERY_PENDING != 0 {
                cpu::pause();
            }
            if sent.0.load(Ordering::Relaxed) != apic_id {
                write(REG_ICR_HIGH, apic_id << 24);
                sent.0.store(apic_id, Ordering::Relaxed);
            }
            write(REG_ICR_LOW, low);
        }
    })
}

/// Sends a fixed interrupt `vector` to the core with `apic_id`; `sent` is the calling
/// core's [`IcrDestination`].
pub fn send_ipi(sent: &IcrDestination, apic_id: u32, vector: u8) {
    send_icr(sent, apic_id, vector as u32);
}

/// Sends INIT to a core (the first step of starting an application processor).
pub fn send_init(sent: &IcrDestination, apic_id: u32) {
    send_icr(sent, apic_id, ICR_INIT);
}

/// Sends a start-up IPI: the core begins in real mode at `page * 4096`.
pub fn send_startup(sent: &IcrDestination, apic_id: u32, page: u8) {
    send_icr(sent, apic_id, ICR_STARTUP | page as u32);
}
