//! Predicate yield (McRT §2.2): "yield, and schedule me back only when `*word op value`".
//! Every blocking primitive of the runtime is built on it: a blocked thread sits in its
//! task queue with its predicate, and a processor skips it until the predicate holds, so
//! no wake-up can be lost (there is none to lose).

use core::sync::atomic::{AtomicU32, Ordering};

/// How the word is compared with the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `*word == value`
    Eq,
    /// `*word != value`
    Ne,
    /// `*word < value`
    Lt,
    /// `*word <= value`
    Le,
    /// `*word > value`
    Gt,
    /// `*word >= value`
    Ge,
    /// `*word & value != 0`
    AnySet,
    /// `*word & value == 0`
    NoneSet,
}

impl Op {
    /// True when `word op value` holds.
    pub fn holds(self, word: u32, value: u32) -> bool {
        match self {
            Op::Eq => word == value,
            Op::Ne => word != value,
            Op::Lt => word < value,
            Op::Le => word <= value,
            Op::Gt => word > value,
            Op::Ge => word >= value,
            Op::AnySet => word & value != 0,
            Op::NoneSet => word & value == 0,
        }
    }
}

/// A condition a blocked thread waits for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Predicate {
    word: *const AtomicU32,
    op: Op,
    value: u32,
}

impl Predicate {
    pub(crate) fn new(word: &AtomicU32, op: Op, value: u32) -> Predicate {
        Predicate { word, op, value }
    }

    /// True when it holds now.
    pub(crate) fn holds(&self) -> bool {
        // The waiting thread's `yield_until` borrows the word until it returns, and it
        // returns only after this predicate is dropped from its header.
        let now = crate::context::suspended_borrow(self.word).load(Ordering::Acquire);
        self.op.holds(now, self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_compares_as_named() {
        assert!(Op::Eq.holds(3, 3) && !Op::Eq.holds(3, 4));
        assert!(Op::Ne.holds(3, 4) && !Op::Ne.holds(3, 3));
        assert!(Op::Lt.holds(2, 3) && !Op::Lt.holds(3, 3));
        assert!(Op::Le.holds(3, 3) && !Op::Le.holds(4, 3));
        assert!(Op::Gt.holds(4, 3) && !Op::Gt.holds(3, 3));
        assert!(Op::Ge.holds(3, 3) && !Op::Ge.holds(2, 3));
        assert!(Op::AnySet.holds(6, 2) && !Op::AnySet.holds(4, 2));
        assert!(Op::NoneSet.holds(4, 2) && !Op::NoneSet.holds(6, 2));
    }
}
