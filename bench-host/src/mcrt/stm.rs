//! mcrt_stm (being written).

/// The experiment's RESULT lines.
pub fn run(_quick: bool) -> Vec<String> {
    Vec::new()
}
