//! PVH boot: the ELF note QEMU looks for, the 32-bit entry, the switch to long mode and
//! the jump to the higher half; then the parsing of `hvm_start_info`.
//!
//! QEMU `-kernel` finds the "Xen" note of type 18 (XEN_ELFNOTE_PHYS32_ENTRY) and starts
//! the boot core at that physical address in flat 32-bit protected mode, paging off, with
//! EBX pointing at `hvm_start_info` (memory map, RSDP, command line, modules).

use core::arch::global_asm;

/// The switch from 32-bit protected mode (paging off) to long mode, written once for the
/// boot core (`pvh_entry`) and for every other core (`ap_trampoline`). It expands to
/// assembly text for `global_asm!` that turns on PAE, loads CR3 from `cr3` (an AT&T
/// source operand: `$sym` for a symbol's address, `sym` for the word stored there), sets
/// EFER.LME and NXE, turns on paging and write protection (CR0.PG, CR0.WP), then
/// far-jumps to the 64-bit code segment `code` at label `to`. Clobbers eax, ecx and edx.
///
/// Where it is used, the `// SAFETY:` comment says why these hold: the page tables at
/// `cr3` identity-map the code that runs the switch (it carries on at the same address
/// once paging is on); the loaded GDT has a 64-bit code descriptor at `code`; interrupts
/// are off (no IDT serves the modes in between).
macro_rules! enter_long_mode {
    (cr3 = $cr3:literal, code = $code:literal, to = $to:literal) => {
        concat!(
            r#"
    /* PAE, CR3, EFER.LME|NXE, paging + write-protect, then 64-bit code */
    movl %cr4, %eax
    orl $(1 << 5), %eax
    movl %eax, %cr4
    movl "#,
            $cr3,
            r#", %eax
    movl %eax, %cr3
    movl $0xc0000080, %ecx
    rdmsr
    orl $((1 << 8) | (1 << 11)), %eax
    wrmsr
    movl %cr0, %eax
    orl $((1 << 31) | (1 << 16)), %eax
    movl %eax, %cr0
    ljmpl $"#,
            $code,
            ", $",
            $to,
            "\n",
        )
    };
}
pub(super) use enter_long_mode;

// Boot page tables (identity-mapped low memory, filled by the 32-bit code):
//   boot_pml4[0]   -> boot_pdpt_low  : 0..1 GiB identity (the entry code, the AP trampoline)
//   boot_pml4[256] -> boot_pdpt_low  : 0..1 GiB at the direct-map base, so early Rust code can
//                                      reach the frames it uses to build the real tables
//   boot_pml4[511] -> boot_pdpt_high : [510] 0..1 GiB at KERNEL_VMA (the kernel image)
// All three point at one page directory of 2 MiB pages. APs use these tables too, for the
// few instructions between the trampoline and `ap_start64`.
global_asm!(
    r#"
    .section .note.Xen, "a", @note
    .balign 4
    .long 4
    .long 8
    .long 18
    .asciz "Xen"
    .balign 4
    .quad pvh_entry

    .section .boot.bss, "aw", @nobits
    .balign 4096
    .global boot_pml4
boot_pml4:      .skip 4096
boot_pdpt_low:  .skip 4096
boot_pdpt_high: .skip 4096
boot_pd:        .skip 4096

    .section .boot.data, "aw"
    .balign 8
    .global boot_tsc
boot_tsc:       .quad 0
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff      /* 0x08: 64-bit kernel code */
    .quad 0x00cf92000000ffff      /* 0x10: data */
boot_gdt_end:
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .long boot_gdt

    .section .boot.text, "ax"
    .code32
    .global pvh_entry
pvh_entry:
    cli
    cld
    movl %ebx, %esi                 /* hvm_start_info, kept in esi until kmain */
    rdtsc                           /* boot time is measured from here */
    movl %eax, boot_tsc
    movl %edx, boot_tsc + 4

    /* zero the four table pages */
    movl $boot_pml4, %edi
    movl $(4 * 4096 / 4), %ecx
    xorl %eax, %eax
    rep stosl

    /* boot_pd: 512 x 2 MiB, present | writable | huge */
    movl $boot_pd, %edi
    xorl %ecx, %ecx
1:  movl %ecx, %eax
    shll $21, %eax
    orl $0x83, %eax
    movl %eax, (%edi,%ecx,8)
    incl %ecx
    cmpl $512, %ecx
    jne 1b

    movl $boot_pd, %eax
    orl $3, %eax
    movl %eax, boot_pdpt_low
    movl %eax, boot_pdpt_high + 510 * 8
    movl $boot_pdpt_low, %eax
    orl $3, %eax
    movl %eax, boot_pml4
    movl %eax, boot_pml4 + 256 * 8
    movl $boot_pdpt_high, %eax
    orl $3, %eax
    movl %eax, boot_pml4 + 511 * 8

    /* the GDT whose 0x08 is the 64-bit code the switch jumps to */
    lgdt boot_gdt_ptr
"#,
    // SAFETY: the boot tables just filled identity-map this code, so it runs on after paging
    // is on; `boot_gdt` (loaded above) has 64-bit code at 0x08; interrupts are off.
    enter_long_mode!(cr3 = "$boot_pml4", code = "0x08", to = "boot_long_mode"),
    r#"
    .code64
boot_long_mode:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movabsq $kernel_start64, %rax
    jmpq *%rax

    .section .text.kernel_start64, "ax"
    .global kernel_start64
kernel_start64:
    /* zero .bss (QEMU zero-fills, but a real loader need not) */
    movabsq $__bss_start, %rdi
    movabsq $__bss_end, %rcx
    subq %rdi, %rcx
    xorl %eax, %eax
    rep stosb
    movabsq $bsp_stack_top, %rsp
    xorl %ebp, %ebp                 /* ends the frame-pointer chain for backtraces */
    movl %esi, %edi                 /* kmain(start_info_phys) */
    call kmain
2:  cli
    hlt
    jmp 2b

    /* the boot core's stack (APs get stacks with guard pages); 256 KiB because boot keeps
       the memory partition and owner table on it */
    .section .bss.bsp_stack, "aw", @nobits
    .balign 4096
    .global bsp_stack_bottom
bsp_stack_bottom:
    .skip 262144
    .global bsp_stack_top
bsp_stack_top:
"#,
    options(att_syntax)
);

extern "C" {
    /// TSC value at the first instruction of `pvh_entry`.
    static boot_tsc: u64;
    /// Physical address of the boot PML4 (identity-mapped; APs pass through it).
    static boot_pml4: u8;
}

/// TSC value read at the very first instruction of the kernel.
pub fn entry_tsc() -> u64 {
    // The boot data is linked at its physical address, which only the boot tables map.
    let pa = (&raw const boot_tsc) as u64;
    // SAFETY: written once by the 32-bit entry code before any Rust code ran; read-only
    // after; reached through the direct map.
    unsafe { core::ptr::read_volatile(super::paging::phys_to_virt(pa) as *const u64) }
}

/// Physical address of the boot page tables (used by the AP trampoline).
pub fn boot_pml4_phys() -> u64 {
    // The boot sections are linked at their physical addresses.
    (&raw const boot_pml4) as u64
}

/// Bounds of the boot core's stack, for the trap handler's backtrace.
pub fn bsp_stack_range() -> (u64, u64) {
    extern "C" {
        static bsp_stack_bottom: u8;
        static bsp_stack_top: u8;
    }
    ((&raw const bsp_stack_bottom) as u64, (&raw const bsp_stack_top) as u64)
}

/// One entry of the PVH memory map (same layout as E820).
#[derive(Clone, Copy, Debug)]
pub struct MemoryMapEntry {
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub size: u64,
    /// E820 type: 1 RAM, 2 reserved, 3 ACPI reclaimable, 4 ACPI NVS, 5 unusable.
    pub kind: u32,
}

/// The largest memory map and command line the kernel keeps.
pub const MAX_MEMMAP: usize = 64;
/// Longest kernel command line kept (longer ones are cut).
pub const MAX_CMDLINE: usize = 1024;

/// What the kernel keeps of `hvm_start_info`, copied out before memory is reused.
pub struct BootInfo {
    /// Physical address of the ACPI RSDP (0 if none).
    pub rsdp: u64,
    /// Memory map entries.
    pub memmap: [MemoryMapEntry; MAX_MEMMAP],
    /// Number of valid entries in `memmap`.
    pub memmap_len: usize,
    /// Command line bytes (`-append`).
    pub cmdline: [u8; MAX_CMDLINE],
    /// Number of valid bytes in `cmdline`.
    pub cmdline_len: usize,
    /// Physical ranges of boot modules (`-initrd`), reserved from the allocator.
    pub modules: [(u64, u64); 4],
    /// Number of valid entries in `modules`.
    pub modules_len: usize,
}

/// Why `hvm_start_info` could not be used (printed with `{:?}`).
#[derive(Debug)]
#[allow(dead_code)]
pub enum BootInfoError {
    /// The magic number is not 0x336ec578: not a PVH boot.
    BadMagic(u32),
    /// Version 0 has no memory map; Atoll needs one.
    NoMemoryMap,
}

const PVH_MAGIC: u32 = 0x336e_c578;

/// Copies what Atoll needs out of `hvm_start_info` (Xen's `arch-x86/hvm/start_info.h`).
///
/// `phys_to_virt` maps a physical address into the current address space.
pub fn read_start_info(
    start_info: u64,
    phys_to_virt: impl Fn(u64) -> *const u8,
) -> Result<BootInfo, BootInfoError> {
    let read_u32 = |pa: u64| {
        // SAFETY: the loader's structures lie in RAM mapped by the boot page tables; unaligned
        // reads because nothing promises alignment.
        unsafe { core::ptr::read_unaligned(phys_to_virt(pa).cast::<u32>()) }
    };
    let read_u64 = |pa: u64| {
        // SAFETY: as above.
        unsafe { core::ptr::read_unaligned(phys_to_virt(pa).cast::<u64>()) }
    };
    let magic = read_u32(start_info);
    if magic != PVH_MAGIC {
        return Err(BootInfoError::BadMagic(magic));
    }
    let version = read_u32(start_info + 4);
    let nr_modules = read_u32(start_info + 12) as usize;
    let modlist = read_u64(start_info + 16);
    let cmdline_pa = read_u64(start_info + 24);
    let rsdp = read_u64(start_info + 32);
    if version < 1 {
        return Err(BootInfoError::NoMemoryMap);
    }
    let memmap_pa = read_u64(start_info + 40);
    let memmap_entries = read_u32(start_info + 48) as usize;

    let mut info = BootInfo {
        rsdp,
        memmap: [MemoryMapEntry { addr: 0, size: 0, kind: 0 }; MAX_MEMMAP],
        memmap_len: 0,
        cmdline: [0; MAX_CMDLINE],
        cmdline_len: 0,
        modules: [(0, 0); 4],
        modules_len: 0,
    };
    for i in 0..memmap_entries.min(MAX_MEMMAP) {
        let e = memmap_pa + 24 * i as u64;
        info.memmap[i] =
            MemoryMapEntry { addr: read_u64(e), size: read_u64(e + 8), kind: read_u32(e + 16) };
        info.memmap_len = i + 1;
    }
    if cmdline_pa != 0 {
        let ptr = phys_to_virt(cmdline_pa);
        while info.cmdline_len < MAX_CMDLINE {
            // SAFETY: a NUL-terminated string placed by the loader in mapped RAM.
            let b = unsafe { *ptr.add(info.cmdline_len) };
            if b == 0 {
                break;
            }
            info.cmdline[info.cmdline_len] = b;
            info.cmdline_len += 1;
        }
    }
    for i in 0..nr_modules.min(info.modules.len()) {
        let m = modlist + 32 * i as u64;
        info.modules[i] = (read_u64(m), read_u64(m + 8));
        info.modules_len = i + 1;
    }
    Ok(info)
}

impl BootInfo {
    /// The command line as text (invalid UTF-8 yields an empty line).
    pub fn cmdline(&self) -> &str {
        core::str::from_utf8(&self.cmdline[..self.cmdline_len]).unwrap_or("")
    }

    /// The memory map entries.
    pub fn memory_map(&self) -> &[MemoryMapEntry] {
        &self.memmap[..self.memmap_len]
    }
}
