//! The objects a program holds from its start (the kernel passes their ids in registers):
//! a given object, the machine device (the kernel console, power-off) and the keyboard
//! (the serial console's input), and the calls that need them.

use crate::obj::{device_stat, root_share, ObjRef};
use crate::sys::{buf_addr, start_args, syscall3, syscall5};
use abi::{nr, SysResult};

/// The object the program was given at start, as ⟨root share, id⟩, if any.
pub fn given_object() -> Option<ObjRef> {
    match start_args().0 {
        0 => None,
        id => Some(ObjRef::new(root_share(), id)),
    }
}

/// The machine device, if this program holds it: the capability for [`kernel_command`]
/// and [`poweroff`] (the kernel gives it to `init`; see `abi::device_kind::MACHINE`).
pub fn machine() -> Option<ObjRef> {
    let given = given_object()?;
    let stat = device_stat(given).ok()?;
    (stat.kind == abi::device_kind::MACHINE).then_some(given)
}

/// The keyboard device, if this program holds it: the capability for [`console_read`]
/// (the kernel gives it to `init`; see `abi::device_kind::KEYBOARD`).
pub fn keyboard() -> Option<ObjRef> {
    let id = start_args().1;
    if id == 0 {
        return None;
    }
    let given = ObjRef::new(root_share(), id);
    let stat = device_stat(given).ok()?;
    (stat.kind == abi::device_kind::KEYBOARD).then_some(given)
}

/// Runs one line of the kernel console (`mem`, `monitor`, `bench urpc 2000`, ...) with the
/// machine device `machine`; its output goes to the console. `NotPermitted` without the
/// capability, `InvalidArgument` for a line the console refuses.
pub fn kernel_command(machine: ObjRef, line: &str) -> SysResult {
    let (ptr, len) = (buf_addr(line.as_bytes()), line.len() as u64);
    syscall5(nr::KERNEL_COMMAND, machine.share, machine.object, ptr, len, 0)
}

/// Turns the machine off, with the machine device. Returns only if the kernel refused.
pub fn poweroff(machine: ObjRef) -> SysResult {
    syscall3(nr::POWEROFF, machine.share, machine.object, 0)
}

/// Bytes typed on the serial console since the last call, copied into `buf`, with the
/// keyboard device `keyboard`; never waits (0 when nothing was typed). `NotPermitted`
/// without the capability.
pub fn console_read(keyboard: ObjRef, buf: &mut [u8]) -> SysResult {
    syscall5(nr::CONSOLE_READ, keyboard.share, keyboard.object, buf_addr(buf), buf.len() as u64, 0)
}
