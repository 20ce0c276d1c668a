//! The kernel command line (`-append "..."`): whitespace-separated `key`, `key=value` and
//! `key="value with spaces"` tokens; the core lists (`0-3,5`) that the consoles and the
//! programs' `--cores` take; and the bounded numbers and safely echoed words of console
//! arguments. Hardware-neutral, tested on the host.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::ops::RangeInclusive;

/// Most characters of an argument a console echoes back in an error.
pub const ECHO_MAX: usize = 24;

/// `word` as a number in `range`, or an error that says what was expected: for every
/// count a console command takes.
pub fn number(word: &str, range: RangeInclusive<usize>) -> Result<usize, String> {
    word.parse().ok().filter(|n| range.contains(n)).ok_or_else(|| {
        let (low, high) = (range.start(), range.end());
        format!("'{}' is not a number from {low} to {high}", Printable(word, ECHO_MAX))
    })
}

/// Text as a console shows it back: control and non-ASCII characters as `?`, at most
/// `.1` characters (then `...`), so an echoed argument cannot drive the terminal or fill
/// the screen.
pub struct Printable<'a>(pub &'a str, pub usize);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.chars().enumerate() {
            if i == self.1 {
                return f.write_str("...");
            }
            let c = if c == ' ' || c.is_ascii_graphic() { c } else { '?' };
            fmt::Write::write_char(f, c)?;
        }
        Ok(())
    }
}

/// Parses a core list such as `0-3,5`: indices below `limit`, none twice, in the order
/// given. `None` for anything else (an empty part, a reversed range, a bad number).
pub fn core_list(list: &str, limit: usize) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for part in list.split(',') {
        let (a, b): (usize, usize) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let c = part.trim().parse().ok()?;
                (c, c)
            }
        };
        if a > b || b >= limit {
            return None;
        }
        for c in a..=b {
            if cores.contains(&c) {
                return None;
            }
            cores.push(c);
        }
    }
    Some(cores)
}

/// Emulated slow cores (`asym=` on the kernel command line, `ASYM=` for `make`): groups
/// `CORES:PERCENT` separated by `/` (or spaces, as `make` takes them), e.g. `1:50` or
/// `1:50/2-3:75`. A core in a group runs only that share of every millisecond (AMPS §4
/// emulated its slow cores by clock modulation), in steps of 12.5 % (`12.5`, `25`, ...,
/// `100`). Returns each throttled core with its duty in eighths (1–8), by core; a core
/// named twice, a core at or past `cores`, or a duty off the steps is an error.
pub fn asym_groups(text: &str, cores: usize) -> Result<Vec<(usize, u8)>, String> {
    let mut out: Vec<(usize, u8)> = Vec::new();
    for group in text.split(['/', ' ']).filter(|g| !g.is_empty()) {
        let (list, duty) = group
            .split_once(':')
            .ok_or_else(|| format!("{group}: expected CORES:PERCENT, e.g. 1:50"))?;
        let eighths = duty_eighths(duty)
            .ok_or_else(|| format!("{duty}: a duty in steps of 12.5 % from 12.5 to 100"))?;
        let list = core_list(list, cores)
            .ok_or_else(|| format!("{list}: not a list of cores below {cores}"))?;
        for core in list {
            if out.iter().any(|&(c, _)| c == core) {
                return Err(format!("core {core} named twice"));
            }
            out.push((core, eighths));
        }
    }
    if out.is_empty() {
        return Err("no group: expected CORES:PERCENT, e.g. 1:50".into());
    }
    out.sort_unstable();
    Ok(out)
}

/// A duty percentage in steps of 12.5 as eighths: `50` is 4, `12.5` is 1, `100` is 8.
fn duty_eighths(text: &str) -> Option<u8> {
    let (whole, half) = match text.trim_end_matches('%').split_once('.') {
        Some((w, "5")) => (w, true),
        Some(_) => return None,
        None => (text.trim_end_matches('%'), false),
    };
    let tenths = whole.parse::<u32>().ok()?.checked_mul(10)? + if half { 5 } else { 0 };
    // One eighth is 125 tenths of a percent.
    (tenths % 125 == 0 && (125..=1000).contains(&tenths)).then_some((tenths / 125) as u8)
}

/// One token of the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg<'a> {
    /// The part before `=` (the whole token when there is no `=`).
    pub key: &'a str,
    /// The part after `=`, without surrounding quotes; `None` for a bare flag.
    pub value: Option<&'a str>,
}

/// Iterator over the tokens of a command line.
pub struct Args<'a> {
    rest: &'a str,
}

/// Splits a command line into its tokens.
pub fn args(line: &str) -> Args<'_> {
    Args { rest: line }
}

/// The value of the first token named `key`, if any (`Some("")` for a bare flag).
pub fn get<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    args(line).find(|a| a.key == key).map(|a| a.value.unwrap_or(""))
}

impl<'a> Iterator for Args<'a> {
    type Item = Arg<'a>;

    fn next(&mut self) -> Option<Arg<'a>> {
        let s = self.rest.trim_start();
        if s.is_empty() {
            self.rest = s;
            return None;
        }
        // The key runs to `=` or whitespace.
        let key_end = s.find(|c: char| c == '=' || c.is_whitespace()).unwrap_or(s.len());
        let key = &s[..key_end];
        let after_key = &s[key_end..];
        let Some(value_part) = after_key.strip_prefix('=') else {
            self.rest = after_key;
            return Some(Arg { key, value: None });
        };
        // A quoted value runs to the closing quote (or the end); a plain one to whitespace.
        let (value, rest) = if let Some(quoted) = value_part.strip_prefix('"') {
            match quoted.find('"') {
                Some(close) => (&quoted[..close], &quoted[close + 1..]),
                None => (quoted, ""),
            }
        } else {
            let end = value_part.find(char::is_whitespace).unwrap_or(value_part.len());
            (&value_part[..end], &value_part[end..])
        };
        self.rest = rest;
        Some(Arg { key, value: Some(value) })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn asym_groups_parse_and_refuse() {
        use super::asym_groups;
        assert_eq!(asym_groups("1:50", 2), Ok(alloc::vec![(1, 4)]));
        assert_eq!(asym_groups("2-3:75/0:12.5", 4), Ok(alloc::vec![(0, 1), (2, 6), (3, 6)]));
        assert_eq!(asym_groups("1:37.5 0:100", 2), Ok(alloc::vec![(0, 8), (1, 3)]));
        for bad in ["", "1", "1:40", "1:0", "1:112.5", "2:50", "1:50/1:25", "x:50", "1:5.0"] {
            assert!(asym_groups(bad, 2).is_err(), "{bad:?} was accepted");
        }
    }

    use super::*;

    #[test]
    fn numbers_are_bounded() {
        assert_eq!(number("5", 1..=10), Ok(5));
        assert_eq!(number("10", 1..=10), Ok(10));
        assert!(number("0", 1..=10).is_err());
        assert!(number("11", 1..=10).is_err());
        assert!(number("99999999999999999999999", 1..=10).is_err(), "overflows usize");
        assert!(number("-1", 1..=10).is_err());
        assert!(number("", 1..=10).is_err());
        let e = number("\x1b[2Jabcdefghijklmnopqrstuvwxyz", 1..=10).unwrap_err();
        assert!(!e.contains('\x1b'), "control characters are not echoed: {e}");
        assert!(e.contains("..."), "long words are cut: {e}");
    }

    #[test]
    fn core_lists() {
        use alloc::vec;
        assert_eq!(core_list("0-3,5", 8), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(core_list("2", 4), Some(vec![2]));
        assert_eq!(core_list(" 1 - 2 ", 4), Some(vec![1, 2]));
        assert_eq!(core_list("0-4", 4), None, "past the limit");
        assert_eq!(core_list("3-1", 4), None, "reversed");
        assert_eq!(core_list("0,0", 4), None, "twice");
        assert_eq!(core_list("0-2,1", 4), None, "overlapping");
        assert_eq!(core_list("", 4), None);
        assert_eq!(core_list("a", 4), None);
    }

    #[test]
    fn plain_quoted_and_flags() {
        let line = r#"  test=frames.concurrent cmd="bench urpc 3" quiet x= "#;
        let got: [Arg; 4] = {
            let mut it = args(line);
            [it.next().unwrap(), it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(got[0], Arg { key: "test", value: Some("frames.concurrent") });
        assert_eq!(got[1], Arg { key: "cmd", value: Some("bench urpc 3") });
        assert_eq!(got[2], Arg { key: "quiet", value: None });
        assert_eq!(got[3], Arg { key: "x", value: Some("") });
        assert_eq!(args(line).count(), 4);
        assert_eq!(get(line, "cmd"), Some("bench urpc 3"));
        assert_eq!(get(line, "quiet"), Some(""));
        assert_eq!(get(line, "missing"), None);
    }

    #[test]
    fn unterminated_quote_takes_the_rest() {
        assert_eq!(get(r#"cmd="cores now"#, "cmd"), Some("cores now"));
    }

    #[test]
    fn empty_line() {
        assert_eq!(args("").count(), 0);
        assert_eq!(args("   ").count(), 0);
    }

    proptest::proptest! {
        #[test]
        fn any_line_terminates_and_round_trips_simple_tokens(
            keys in proptest::collection::vec("[a-z]{1,6}", 0..6),
            vals in proptest::collection::vec("[a-z0-9 ]{0,8}", 0..6),
        ) {
            extern crate std;
            use std::string::String;
            let mut line = String::new();
            let n = keys.len().min(vals.len());
            for i in 0..n {
                line.push_str(&std::format!("{}=\"{}\" ", keys[i], vals[i]));
            }
            let parsed: std::vec::Vec<Arg> = args(&line).collect();
            proptest::prop_assert_eq!(parsed.len(), n);
            for i in 0..n {
                proptest::prop_assert_eq!(parsed[i].key, keys[i].as_str());
                proptest::prop_assert_eq!(parsed[i].value, Some(vals[i].as_str()));
            }
        }
    }
}
