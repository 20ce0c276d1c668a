//! OpenMP adaptor (being written).
