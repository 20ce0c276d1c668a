//! Kernel output on the serial console, one whole line at a time.
//!
//! Each `print!`/`println!` formats into a buffer on the caller's stack first and only then
//! takes the console lock to send the bytes, so lines from different cores never interleave
//! mid-line, and nothing that can fault runs while the lock is held.

use crate::arch::serial;
use core::fmt::{self, Write};
use spin::Mutex;

/// Longest output of one `print!` call; longer output is cut and marked with `...`.
const LINE_MAX: usize = 1024;

static CONSOLE: Mutex<()> = Mutex::new(());

struct LineBuffer {
    bytes: [u8; LINE_MAX],
    len: usize,
    truncated: bool,
}

impl Write for LineBuffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == LINE_MAX {
                self.truncated = true;
                return Ok(());
            }
            self.bytes[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

/// Formats `args` and writes them to the console atomically. Used by the macros.
pub fn print_args(args: fmt::Arguments) {
    let mut line = LineBuffer { bytes: [0; LINE_MAX], len: 0, truncated: false };
    let _ = line.write_fmt(args);
    crate::arch::cpu::without_interrupts(|| {
        let _guard = CONSOLE.lock();
        for &b in &line.bytes[..line.len] {
            if b == b'\n' {
                serial::write_byte(b'\r');
            }
            serial::write_byte(b);
        }
        if line.truncated {
            for &b in b"...\r\n" {
                serial::write_byte(b);
            }
        }
    });
}

/// Prints to the serial console (whole call written atomically).
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => ($crate::print::print_args(format_args!($($arg)*)));
}

/// Prints a line to the serial console (written atomically).
#[macro_export]
macro_rules! println {
    () => ($crate::print!("\n"));
    ($($arg:tt)*) => ($crate::print::print_args(format_args!("{}\n", format_args!($($arg)*))));
}
