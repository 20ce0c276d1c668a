//! Corey §6.2's filesum application: the sum of a file's bytes. Written once for its users
//! on Atoll (`filesum`, webd's application cores and front end).

/// The sum of `bytes`, each as a number 0–255, wrapping at 2^64.
pub fn sum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |s, &b| s.wrapping_add(b as u64))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_bytes_as_unsigned() {
        assert_eq!(super::sum(&[]), 0);
        assert_eq!(super::sum(&[1, 2, 255]), 258);
    }
}
