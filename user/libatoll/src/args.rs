//! The program's arguments: the string the kernel hands over, and the values of the
//! flags programs share (`--cores LIST`, numbers).

use crate::sys::{args, cores_online};
use abi::ARGS_MAX;
use alloc::string::String;
use alloc::vec::Vec;
use cmdline::core_list as parse_cores;
use core::ops::RangeInclusive;
use core::str::FromStr;

/// The program's argument string (the line after its name).
pub fn arg_string() -> String {
    let mut buf = [0u8; ARGS_MAX];
    String::from(args(&mut buf))
}

/// A flag's value parsed as a number in `range` (`None` if missing, bad or outside).
pub fn number<T: FromStr + PartialOrd>(word: Option<&str>, range: RangeInclusive<T>) -> Option<T> {
    word?.parse().ok().filter(|v| range.contains(v))
}

/// The value of `--cores LIST` (`0-3`, `0,2`): the cores, if each is online and named once.
pub fn cores_value(word: Option<&str>) -> Option<Vec<usize>> {
    parse_cores(word?, cores_online())
}
