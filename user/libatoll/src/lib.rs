//! The library OS user programs link with: the entry point, typed system-call wrappers,
//! console output and the panic handler. (Corey's objects, `cfork` and file descriptors
//! come with M3's object calls.)
#![no_std]

pub use abi;
use abi::{nr, Error, SysResult};
use core::arch::asm;
use core::fmt::{self, Write};

/// Raw system call with up to three arguments.
#[inline(always)]
pub fn syscall3(number: u64, a: u64, b: u64, c: u64) -> SysResult {
    let ret: u64;
    // SAFETY: `syscall` enters the kernel, which checks every argument; it clobbers rcx
    // and r11 and returns in rax (the Atoll ABI, see `abi`).
    unsafe {
        asm!("syscall", inlateout("rax") number => ret, in("rdi") a, in("rsi") b, in("rdx") c,
             out("rcx") _, out("r11") _, options(nostack));
    }
    abi::decode(ret)
}

/// Does nothing in the kernel: the cost of the system-call path.
pub fn null() -> SysResult {
    syscall3(nr::NULL, 0, 0, 0)
}

/// Writes bytes to the console.
pub fn write(bytes: &[u8]) -> SysResult {
    syscall3(nr::WRITE, bytes.as_ptr() as u64, bytes.len() as u64, 0)
}

/// Ends the program.
pub fn exit(code: i32) -> ! {
    let _ = syscall3(nr::EXIT, code as u64, 0, 0);
    // The kernel never returns from exit; if it did, spin rather than run on.
    loop {
        core::hint::spin_loop();
    }
}

/// The core this program runs on (Corey's `pcore_current`).
pub fn pcore_current() -> usize {
    syscall3(nr::PCORE_CURRENT, 0, 0, 0).unwrap_or(0) as usize
}

/// The time-stamp counter, read by the kernel.
pub fn cycles() -> u64 {
    syscall3(nr::CYCLES, 0, 0, 0).unwrap_or(0)
}

/// Copies the program's argument string into `buf`; returns it.
pub fn args(buf: &mut [u8]) -> &str {
    match syscall3(nr::ARGS, buf.as_mut_ptr() as u64, buf.len() as u64, 0) {
        Ok(n) => core::str::from_utf8(&buf[..(n as usize).min(buf.len())]).unwrap_or(""),
        Err(_) => "",
    }
}

/// A reference to an object: ⟨share it is reached through, object⟩ (Corey §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjRef {
    /// The share, which must be in the caller's share set.
    pub share: u64,
    /// The object, which must be in that share.
    pub object: u64,
}

/// Corey's object calls (Figure 5), typed.
pub mod obj {
    use super::{syscall3, ObjRef};
    use abi::{nr, ArSetAr, ArSetSeg, SysResult};

    /// The caller's root share.
    pub fn root_share() -> u64 {
        syscall3(nr::ROOT_SHARE, 0, 0, 0).unwrap_or(0)
    }

    /// The caller's root address range.
    pub fn root_ar() -> u64 {
        syscall3(nr::ROOT_AR, 0, 0, 0).unwrap_or(0)
    }

    /// `share_alloc`: a new share in `parent`.
    pub fn share_alloc(parent: u64) -> SysResult {
        syscall3(nr::SHARE_ALLOC, parent, 0, 0)
    }

    /// `share_addobj`: puts `obj` into `share`.
    pub fn share_addobj(share: u64, obj: ObjRef) -> SysResult {
        syscall3(nr::SHARE_ADDOBJ, share, obj.share, obj.object)
    }

    /// `share_delobj`: takes `obj` out of its share.
    pub fn share_delobj(obj: ObjRef) -> SysResult {
        syscall3(nr::SHARE_DELOBJ, obj.share, obj.object, 0)
    }

    /// `self_drop`: leaves `share`.
    pub fn self_drop(share: u64) -> SysResult {
        syscall3(nr::SELF_DROP, share, 0, 0)
    }

    /// `obj_get_name`: the object's kind code (`abi::ObjectKind`).
    pub fn obj_get_name(obj: ObjRef) -> SysResult {
        syscall3(nr::OBJ_GET_NAME, obj.share, obj.object, 0)
    }

    /// `segment_alloc`: `nbytes` of zero pages (filled on first touch) in `share`.
    pub fn segment_alloc(share: u64, nbytes: u64) -> SysResult {
        syscall3(nr::SEGMENT_ALLOC, share, nbytes, 0)
    }

    /// `segment_copy`: a plain copy of `seg`, placed in `share`.
    pub fn segment_copy(share: u64, seg: ObjRef) -> SysResult {
        syscall3(nr::SEGMENT_COPY, share, seg.share, seg.object)
    }

    /// `segment_get_nbytes`.
    pub fn segment_get_nbytes(seg: ObjRef) -> SysResult {
        syscall3(nr::SEGMENT_GET_NBYTES, seg.share, seg.object, 0)
    }

    /// `segment_set_nbytes`.
    pub fn segment_set_nbytes(seg: ObjRef, nbytes: u64) -> SysResult {
        syscall3(nr::SEGMENT_SET_NBYTES, seg.share, seg.object, nbytes)
    }

    /// `ar_alloc`: a new address range in `share`.
    pub fn ar_alloc(share: u64) -> SysResult {
        syscall3(nr::AR_ALLOC, share, 0, 0)
    }

    /// `ar_set_seg`.
    pub fn ar_set_seg(args: &ArSetSeg) -> SysResult {
        let words = args.to_words();
        syscall3(nr::AR_SET_SEG, words.as_ptr() as u64, 0, 0)
    }

    /// `ar_set_ar`.
    pub fn ar_set_ar(args: &ArSetAr) -> SysResult {
        let words = args.to_words();
        syscall3(nr::AR_SET_AR, words.as_ptr() as u64, 0, 0)
    }

    /// `ar_get`: the id mapped at `va` in `ar` (0 if none).
    pub fn ar_get(ar: ObjRef, va: u64) -> SysResult {
        syscall3(nr::AR_GET, ar.share, ar.object, va)
    }

    /// Soft page faults this program has taken.
    pub fn page_faults() -> u64 {
        syscall3(nr::PAGE_FAULTS, 0, 0, 0).unwrap_or(0)
    }
}

/// Where core `core` sits and what it costs to reach from here (from the kernel's SKB).
pub fn locality_get(core: usize) -> Result<abi::Locality, Error> {
    let mut words = [0u64; 6];
    syscall3(nr::LOCALITY_GET, core as u64, words.as_mut_ptr() as u64, 0)?;
    Ok(abi::Locality::from_words(words))
}

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

/// Defines the program's entry point: `libatoll::main!(main);` with `fn main() -> i32`.
#[macro_export]
macro_rules! main {
    ($main:path) => {
        #[no_mangle]
        pub extern "C" fn _start() -> ! {
            $crate::exit($main())
        }
    };
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("user panic: {}", info);
    exit(101)
}
