//! The serial console from user space: formatted output (`print!`, `println!`) and line
//! input with echo and backspace over the non-blocking `console_read`.

use crate::devices::console_read;
use crate::obj::ObjRef;
use crate::sys::write;
use abi::Error;
use core::fmt::{self, Write};

/// Console output for `print!`: formats into a line buffer, one `write` per call.
pub struct Console {
    buf: [u8; 256],
    len: usize,
}

impl Console {
    /// An empty line buffer.
    pub const fn new() -> Self {
        Console { buf: [0; 256], len: 0 }
    }

    /// Writes what is buffered.
    pub fn flush(&mut self) -> Result<(), Error> {
        let r = write(&self.buf[..self.len]).map(|_| ());
        self.len = 0;
        r
    }
}

impl Default for Console {
    fn default() -> Self {
        Console::new()
    }
}

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                self.flush().map_err(|_| fmt::Error)?;
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

/// Prints to the console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {{
        let mut console = $crate::Console::new();
        let _ = core::fmt::Write::write_fmt(&mut console, format_args!($($arg)*));
        let _ = console.flush();
    }};
}

/// Prints a line to the console.
#[macro_export]
macro_rules! println {
    () => ($crate::print!("\n"));
    ($($arg:tt)*) => ($crate::print!("{}\n", format_args!($($arg)*)));
}

/// Reads typed lines: `console_read` never waits, so this polls, keeping bytes that came
/// after a line's end for the next line.
pub struct LineReader {
    /// The keyboard device (`console_read`'s capability).
    keyboard: ObjRef,
    pending: [u8; 64],
    start: usize,
    end: usize,
    /// The last byte was `\r`: a `\n` right after it ends no second line.
    after_cr: bool,
}

impl LineReader {
    /// A reader of the keyboard device `keyboard` ([`crate::keyboard`]), nothing pending.
    pub const fn new(keyboard: ObjRef) -> Self {
        LineReader { keyboard, pending: [0; 64], start: 0, end: 0, after_cr: false }
    }

    /// Reads one line into `buf` (echoing it, with backspace), without its end; returns
    /// its length. Printable ASCII only; the rest of a too-long line is dropped.
    pub fn read_line(&mut self, buf: &mut [u8]) -> usize {
        let mut len = 0;
        loop {
            let b = self.next_byte();
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = b == b'\r';
                    let _ = write(b"\n");
                    return len;
                }
                0x08 | 0x7f => {
                    self.after_cr = false;
                    if len > 0 {
                        len -= 1;
                        let _ = write(b"\x08 \x08");
                    }
                }
                0x20..=0x7e => {
                    self.after_cr = false;
                    if len < buf.len() {
                        buf[len] = b;
                        len += 1;
                        let _ = write(&[b]);
                    }
                }
                _ => self.after_cr = false,
            }
        }
    }

    /// The next typed byte, polling until there is one.
    fn next_byte(&mut self) -> u8 {
        while self.start == self.end {
            match console_read(self.keyboard, &mut self.pending) {
                Ok(n) if n > 0 => {
                    self.start = 0;
                    self.end = (n as usize).min(self.pending.len());
                }
                // Nothing typed: wait a little before asking the kernel again.
                _ => {
                    for _ in 0..1000 {
                        core::hint::spin_loop();
                    }
                }
            }
        }
        let b = self.pending[self.start];
        self.start += 1;
        b
    }
}
