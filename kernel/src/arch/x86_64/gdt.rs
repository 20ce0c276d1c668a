//! Per-core GDT and TSS. The TSS gives the double-fault and NMI handlers their own stacks
//! (IST), so a kernel stack overflow is reported instead of triple-faulting the machine.

use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable};
use x86_64::structures::tss::TaskStateSegment;
use x86_64::VirtAddr;

/// IST slot (1-based in the IDT gate, 0-based here) used by double fault and NMI.
pub const IST_CRITICAL: u16 = 0;

/// One core's descriptor tables; lives in that core's `PerCore` block.
pub struct CoreTables {
    gdt: GlobalDescriptorTable,
    tss: TaskStateSegment,
}

impl CoreTables {
    /// Empty tables; filled by [`CoreTables::load`].
    pub const fn new() -> Self {
        CoreTables { gdt: GlobalDescriptorTable::new(), tss: TaskStateSegment::new() }
    }

    /// Builds and loads this core's GDT and TSS. `critical_stack_top` is the IST stack for
    /// double faults and NMIs.
    ///
    /// # Safety
    /// `self` must never move or be freed afterwards (it is in the core's `PerCore` block),
    /// and it must be called on the core that owns it.
    pub unsafe fn load(&'static mut self, critical_stack_top: u64) {
        self.tss.interrupt_stack_table[IST_CRITICAL as usize] = VirtAddr::new(critical_stack_top);
        // The order is fixed by `syscall`/`sysret` (see `user_entry`): kernel code 0x08,
        // kernel data 0x10, user data 0x18, user code 0x20, then the TSS.
        let code = self.gdt.append(Descriptor::kernel_code_segment());
        let data = self.gdt.append(Descriptor::kernel_data_segment());
        self.gdt.append(Descriptor::user_data_segment());
        self.gdt.append(Descriptor::user_code_segment());
        let tss = self.gdt.append(Descriptor::tss_segment(&self.tss));
        self.gdt.load();
        // SAFETY: the selectors were just created in the loaded GDT.
        unsafe {
            CS::set_reg(code);
            for set in [DS::set_reg, ES::set_reg, SS::set_reg] {
                set(data);
            }
            load_tss(tss);
        }
    }
}

impl CoreTables {
    /// Address of the TSS's ring-0 stack pointer (RSP0): the stack an interrupt from user
    /// mode lands on. `user_entry::resume_user` writes it.
    pub fn rsp0_slot(&mut self) -> *mut u64 {
        (&raw mut self.tss.privilege_stack_table[0]).cast()
    }
}
