//! The kernel command line (`-append "..."`): whitespace-separated `key`, `key=value` and
//! `key="value with spaces"` tokens. Hardware-neutral, tested on the host.
#![no_std]
#![forbid(unsafe_code)]

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
    use super::*;

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
