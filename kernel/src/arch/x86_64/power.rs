//! Leaving the machine: ACPI S5 power-off, and QEMU's `isa-debug-exit` for test verdicts.

use super::cpu::{halt_forever, outl, outw};
use core::sync::atomic::{AtomicU32, Ordering};
use verdict::{ExitCode, DEBUG_EXIT_PORT};

/// PM1a control port from the FADT (0 = unknown).
static PM1A_CONTROL: AtomicU32 = AtomicU32::new(0);

/// Remembers the ACPI power-off register.
pub fn set_pm1a_control(port: Option<u16>) {
    PM1A_CONTROL.store(port.unwrap_or(0) as u32, Ordering::Relaxed);
}

/// Ends a test run: QEMU exits with `code`'s status. Never returns.
pub fn exit_qemu(code: ExitCode) -> ! {
    outl(DEBUG_EXIT_PORT, code as u32);
    // Under TCG the exit takes effect asynchronously: stop here until it does.
    halt_forever()
}

/// Powers the machine off (ACPI S5). Falls back to `isa-debug-exit`, then halts.
pub fn power_off() -> ! {
    let port = PM1A_CONTROL.load(Ordering::Relaxed) as u16;
    if port != 0 {
        // SLP_TYP for S5 comes from the DSDT's \_S5 object; QEMU's is 0 (PIIX4 and ICH9).
        // Reading it needs an AML interpreter, which Atoll does not have yet.
        const SLP_EN: u16 = 1 << 13;
        outw(port, SLP_EN);
        // The power-off takes effect asynchronously; give it a moment before falling back.
        let start = super::cpu::rdtsc();
        while super::timer::us_since(start) < 100_000 {
            core::hint::spin_loop();
        }
    }
    exit_qemu(ExitCode::Success)
}
