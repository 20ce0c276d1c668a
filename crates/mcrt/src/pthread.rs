//! pthread adaptor (being written).
