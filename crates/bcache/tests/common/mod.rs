//! A RAM block device for the tests: blocks in a `HashMap` (absent ones read as zeros), a
//! log of the blocks written in order, and switches that make the next transfers fail.

use bcache::BlockDevice;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;

/// The error the device reports when told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// A RAM disk of `blocks` blocks of `block_size` bytes.
pub struct MemDevice {
    pub block_size: usize,
    pub blocks: u64,
    pub data: Mutex<HashMap<u64, Vec<u8>>>,
    /// Block numbers written, in order.
    pub writes: Mutex<Vec<u64>>,
    pub reads: Mutex<u64>,
    pub fail_reads: AtomicBool,
    pub fail_writes: AtomicBool,
}

#[allow(dead_code)]
impl MemDevice {
    pub fn new(blocks: u64, block_size: usize) -> Self {
        MemDevice {
            block_size,
            blocks,
            data: Mutex::new(HashMap::new()),
            writes: Mutex::new(Vec::new()),
            reads: Mutex::new(0),
            fail_reads: AtomicBool::new(false),
            fail_writes: AtomicBool::new(false),
        }
    }

    /// The device's copy of `block`.
    pub fn block(&self, block: u64) -> Vec<u8> {
        let data = self.data.lock().unwrap();
        data.get(&block).cloned().unwrap_or_else(|| vec![0; self.block_size])
    }

    /// Sets the device's copy of `block` directly (as another machine would).
    pub fn set(&self, block: u64, bytes: &[u8]) {
        assert_eq!(bytes.len(), self.block_size);
        self.data.lock().unwrap().insert(block, bytes.to_vec());
    }

    pub fn take_writes(&self) -> Vec<u64> {
        std::mem::take(&mut self.writes.lock().unwrap())
    }
}

impl BlockDevice for MemDevice {
    type Error = Failed;

    fn blocks(&self) -> u64 {
        self.blocks
    }

    fn read_block(&self, block: u64, buf: &mut [u8]) -> Result<(), Failed> {
        assert!(block < self.blocks && buf.len() == self.block_size, "cache broke the contract");
        if self.fail_reads.load(SeqCst) {
            return Err(Failed);
        }
        *self.reads.lock().unwrap() += 1;
        buf.copy_from_slice(&self.block(block));
        Ok(())
    }

    fn write_block(&self, block: u64, buf: &[u8]) -> Result<(), Failed> {
        assert!(block < self.blocks && buf.len() == self.block_size, "cache broke the contract");
        if self.fail_writes.load(SeqCst) {
            return Err(Failed);
        }
        self.writes.lock().unwrap().push(block);
        self.data.lock().unwrap().insert(block, buf.to_vec());
        Ok(())
    }
}
