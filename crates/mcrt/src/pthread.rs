//! The pthread-like adaptor (McRT §2.5). (Being written.)
