//! The Atoll system-call ABI: one source of truth for the kernel and user programs.
//!
//! A call is made with `syscall`: the number in `rax`, up to five arguments in `rdi`,
//! `rsi`, `rdx`, `r10`, `r8`. The result comes back in `rax` as a [`SysResult`] word:
//! non-negative values are successes, negative values are `-(Error as i64)`. No call
//! panics the kernel; every bad argument is an error code.
#![no_std]
#![forbid(unsafe_code)]

/// System call numbers.
pub mod nr {
    /// `null()`: does nothing (measures the syscall path).
    pub const NULL: u64 = 0;
    /// `write(ptr, len)`: writes bytes to the console; returns the count.
    pub const WRITE: u64 = 1;
    /// `exit(code)`: ends the program on this core; never returns.
    pub const EXIT: u64 = 2;
    /// `pcore_current()`: the index of the core running the caller (Corey §4.4).
    pub const PCORE_CURRENT: u64 = 3;
    /// `cycles()`: the time-stamp counter.
    pub const CYCLES: u64 = 4;
    /// `args(ptr, len)`: copies the program's argument string; returns its length.
    pub const ARGS: u64 = 5;
}

/// Why a call failed. The discriminants are the ABI (negated in `rax`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i64)]
pub enum Error {
    /// No such system call.
    NoSuchCall = 1,
    /// A pointer or length does not name memory the caller may use that way.
    BadAddress = 2,
    /// An argument is out of range.
    InvalidArgument = 3,
    /// An object id names nothing the caller can reach.
    NoSuchObject = 4,
    /// Out of memory or another resource.
    NoResources = 5,
    /// The caller may not do this.
    NotPermitted = 6,
}

impl Error {
    /// The error for a raw code, if it is one.
    pub const fn from_code(code: i64) -> Option<Error> {
        Some(match code {
            1 => Error::NoSuchCall,
            2 => Error::BadAddress,
            3 => Error::InvalidArgument,
            4 => Error::NoSuchObject,
            5 => Error::NoResources,
            6 => Error::NotPermitted,
            _ => return None,
        })
    }
}

/// A call's result as the kernel returns it.
pub type SysResult = Result<u64, Error>;

/// Encodes a result into the `rax` word.
pub const fn encode(result: SysResult) -> u64 {
    match result {
        Ok(v) => v,
        Err(e) => (-(e as i64)) as u64,
    }
}

/// Decodes the `rax` word. Values in the top 4096 are errors (like Linux); unknown error
/// codes decode as `InvalidArgument` rather than being mistaken for successes.
pub const fn decode(word: u64) -> SysResult {
    let signed = word as i64;
    if signed < 0 && signed >= -4096 {
        match Error::from_code(-signed) {
            Some(e) => Err(e),
            None => Err(Error::InvalidArgument),
        }
    } else {
        Ok(word)
    }
}

/// Lowest address user programs are linked at.
pub const USER_BASE: u64 = 0x40_0000;
/// End (exclusive) of the user half of the address space.
pub const USER_END: u64 = 0x0000_8000_0000_0000;
/// Top of the initial user stack.
pub const USER_STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
/// Size of the initial user stack.
pub const USER_STACK_BYTES: u64 = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip() {
        for r in [Ok(0), Ok(42), Ok(u64::MAX / 2), Err(Error::BadAddress), Err(Error::NotPermitted)]
        {
            assert_eq!(decode(encode(r)), r);
        }
        for code in 1..=6 {
            let e = Error::from_code(code).unwrap();
            assert_eq!(decode(encode(Err(e))), Err(e));
        }
    }

    #[test]
    fn unknown_negative_codes_are_errors() {
        assert_eq!(decode((-99i64) as u64), Err(Error::InvalidArgument));
        assert_eq!(decode((-5000i64) as u64), Ok((-5000i64) as u64));
    }
}
