//! COM1, a 16550 UART at port 0x3f8: the console. Polled, no interrupts.

use super::cpu::{inb, outb};
use core::sync::atomic::{AtomicU64, Ordering};

/// Bytes written and read so far (`device_stat`). Relaxed: statistics.
static BYTES_OUT: AtomicU64 = AtomicU64::new(0);
static BYTES_IN: AtomicU64 = AtomicU64::new(0);

const COM1: u16 = 0x3f8;
const LINE_STATUS: u16 = COM1 + 5;
const DATA_READY: u8 = 1;
const TX_EMPTY: u8 = 1 << 5;

/// Sets 115200 baud, 8N1, FIFOs on.
pub fn init() {
    outb(COM1 + 1, 0x00); // no interrupts
    outb(COM1 + 3, 0x80); // DLAB on
    outb(COM1, 0x01); // divisor 1 = 115200 baud
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03); // 8N1, DLAB off
    outb(COM1 + 2, 0xc7); // FIFO on, cleared, 14-byte threshold
    outb(COM1 + 4, 0x03); // DTR, RTS
}

/// Writes one byte, waiting for room in the transmitter.
pub fn write_byte(b: u8) {
    while inb(LINE_STATUS) & TX_EMPTY == 0 {
        core::hint::spin_loop();
    }
    outb(COM1, b);
    BYTES_OUT.fetch_add(1, Ordering::Relaxed);
}

/// Bytes written and bytes read so far.
pub fn counts() -> (u64, u64) {
    (BYTES_OUT.load(Ordering::Relaxed), BYTES_IN.load(Ordering::Relaxed))
}

/// Returns a received byte, if one is waiting.
pub fn try_read_byte() -> Option<u8> {
    if inb(LINE_STATUS) & DATA_READY != 0 {
        BYTES_IN.fetch_add(1, Ordering::Relaxed);
        Some(inb(COM1))
    } else {
        None
    }
}
