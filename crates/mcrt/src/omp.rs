//! The OpenMP-like adaptor (McRT §2.5). (Being written.)
