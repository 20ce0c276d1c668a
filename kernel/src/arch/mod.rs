//! Architecture glue. Atoll runs on x86-64 only; everything with `unsafe` lives here.
mod x86_64;
pub use self::x86_64::*;
