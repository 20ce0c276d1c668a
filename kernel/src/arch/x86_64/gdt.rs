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
        CoreTables {
            gdt: GlobalDescriptorTable::new(),
            tss: TaskStateSegment::new(),
        }
    }

    /// Builds and loads this core's GDT and TSS. `critical_stack_top` is the IST stack for
    /// double faults and NMIs.
    ///
    /// # Safety
    /// `self` must never move or be freed afterwards (it is in the core's `PerCore` block),
    /// and it must be called on the core that owns it.
    pub unsafe fn load(&'static mut self, critical_stack_top: u64) {
        self.tss.interrupt_stack_table[IST_CRITICAL as usize] = VirtAddr::new(critical_stack_top);
        let code = self.gdt.append(Descriptor::kernel_code_segment());
        let data = self.gdt.append(Descriptor::kernel_data_segment());
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
