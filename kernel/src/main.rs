//! Atoll kernel entry.
#![no_std]
#![no_main]

mod arch;
mod print;

#[no_mangle]
extern "C" fn kmain(start_info: u32) -> ! {
    arch::serial::init();
    println!("Atoll: hello from the higher half, start_info at {:#x}", start_info);
    arch::cpu::outl(0xf4, 0x10);
    arch::cpu::halt_forever()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("PANIC core=?: {}", info);
    arch::cpu::halt_forever()
}
