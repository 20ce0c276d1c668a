//! Memory: per-core physical frame lists and per-core kernel heaps.
pub mod frames;
pub mod heap;
