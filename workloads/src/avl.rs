//! A concurrent AVL tree in an arena (McRT Figure 12's data structure): node `k` holds key
//! `k`, so no operation allocates, and the tree is written once over [`Mem`] (a node's
//! left, right and height fields), so the same code runs under one coarse lock on plain
//! memory ([`Plain`]), in McRT's STM ([`InTx`]), or in a peer STM. Updates write only the
//! fields that change, so that transactions conflict only where they must.

use alloc::vec::Vec;
use mcrt::stm::{Abort, TCell, Tx};

/// Keys 0..KEYS (the tree holds about half of them).
pub const KEYS: u32 = 256;
/// The empty link.
pub const NIL: u32 = u32::MAX;
/// The slot whose left link is the root.
pub const ROOT: u32 = KEYS;
/// Field numbers: the left link.
pub const LEFT: usize = 0;
/// The right link.
pub const RIGHT: usize = 1;
/// The height.
pub const HEIGHT: usize = 2;

/// A tree's memory: read and write field `f` of node `n`.
pub trait Mem {
    /// Why an access failed (a transaction's abort).
    type E;
    /// Field `f` of node `n`.
    fn get(&mut self, n: u32, f: usize) -> Result<u32, Self::E>;
    /// Sets field `f` of node `n`.
    fn set(&mut self, n: u32, f: usize, v: u32) -> Result<(), Self::E>;
}

// ---------------------------------------------------------------------------------------
// The AVL tree (writes only what changes, so that updates conflict only where they must).

fn height<M: Mem>(m: &mut M, n: u32) -> Result<u32, M::E> {
    if n == NIL {
        Ok(0)
    } else {
        m.get(n, HEIGHT)
    }
}

/// Sets `n`'s height from its children's.
fn fix<M: Mem>(m: &mut M, n: u32) -> Result<(), M::E> {
    let (l, r) = (m.get(n, LEFT)?, m.get(n, RIGHT)?);
    let h = 1 + height(m, l)?.max(height(m, r)?);
    if m.get(n, HEIGHT)? != h {
        m.set(n, HEIGHT, h)?;
    }
    Ok(())
}

/// Rotates the subtree at `n` towards `side` (LEFT: its right child rises); the new root.
fn rotate<M: Mem>(m: &mut M, n: u32, side: usize) -> Result<u32, M::E> {
    let other = 1 - side;
    let c = m.get(n, other)?;
    let inner = m.get(c, side)?;
    m.set(n, other, inner)?;
    m.set(c, side, n)?;
    fix(m, n)?;
    fix(m, c)?;
    Ok(c)
}

/// Rebalances the subtree at `n`; the new root.
fn balance<M: Mem>(m: &mut M, n: u32) -> Result<u32, M::E> {
    fix(m, n)?;
    let (l, r) = (m.get(n, LEFT)?, m.get(n, RIGHT)?);
    let (hl, hr) = (height(m, l)?, height(m, r)?);
    if hl > hr + 1 {
        let (ll, lr) = (m.get(l, LEFT)?, m.get(l, RIGHT)?);
        if height(m, ll)? < height(m, lr)? {
            let nl = rotate(m, l, LEFT)?;
            m.set(n, LEFT, nl)?;
        }
        return rotate(m, n, RIGHT);
    }
    if hr > hl + 1 {
        let (rl, rr) = (m.get(r, LEFT)?, m.get(r, RIGHT)?);
        if height(m, rr)? < height(m, rl)? {
            let nr = rotate(m, r, RIGHT)?;
            m.set(n, RIGHT, nr)?;
        }
        return rotate(m, n, LEFT);
    }
    Ok(n)
}

/// Sets `n`'s link `f` to `v` if it differs.
fn relink<M: Mem>(m: &mut M, n: u32, f: usize, v: u32) -> Result<(), M::E> {
    if m.get(n, f)? != v {
        m.set(n, f, v)?;
    }
    Ok(())
}

fn insert_at<M: Mem>(m: &mut M, n: u32, k: u32) -> Result<u32, M::E> {
    if n == NIL {
        m.set(k, LEFT, NIL)?;
        m.set(k, RIGHT, NIL)?;
        m.set(k, HEIGHT, 1)?;
        return Ok(k);
    }
    if k == n {
        return Ok(n);
    }
    let f = if k < n { LEFT } else { RIGHT };
    let c = m.get(n, f)?;
    let c2 = insert_at(m, c, k)?;
    relink(m, n, f, c2)?;
    balance(m, n)
}

fn remove_min<M: Mem>(m: &mut M, n: u32) -> Result<(u32, u32), M::E> {
    let l = m.get(n, LEFT)?;
    if l == NIL {
        return Ok((m.get(n, RIGHT)?, n));
    }
    let (l2, min) = remove_min(m, l)?;
    relink(m, n, LEFT, l2)?;
    Ok((balance(m, n)?, min))
}

fn delete_at<M: Mem>(m: &mut M, n: u32, k: u32) -> Result<u32, M::E> {
    if n == NIL {
        return Ok(NIL);
    }
    if k != n {
        let f = if k < n { LEFT } else { RIGHT };
        let c = m.get(n, f)?;
        let c2 = delete_at(m, c, k)?;
        relink(m, n, f, c2)?;
        return balance(m, n);
    }
    let (l, r) = (m.get(n, LEFT)?, m.get(n, RIGHT)?);
    if l == NIL {
        return Ok(r);
    }
    if r == NIL {
        return Ok(l);
    }
    let (r2, min) = remove_min(m, r)?;
    m.set(min, RIGHT, r2)?;
    m.set(min, LEFT, l)?;
    balance(m, min)
}

/// True if key `k` is in the tree.
pub fn lookup<M: Mem>(m: &mut M, k: u32) -> Result<bool, M::E> {
    let mut n = m.get(ROOT, LEFT)?;
    while n != NIL {
        if n == k {
            return Ok(true);
        }
        n = m.get(n, if k < n { LEFT } else { RIGHT })?;
    }
    Ok(false)
}

/// One operation of the 80/10/10 mix, chosen by `r`; true if it found (or changed) `k`.
pub fn operate<M: Mem>(m: &mut M, r: u64) -> Result<bool, M::E> {
    let k = (r % u64::from(KEYS)) as u32;
    match (r >> 32) % 100 {
        0..80 => lookup(m, k),
        80..90 => {
            let root = m.get(ROOT, LEFT)?;
            let new = insert_at(m, root, k)?;
            relink(m, ROOT, LEFT, new)?;
            Ok(true)
        }
        _ => {
            let root = m.get(ROOT, LEFT)?;
            let new = delete_at(m, root, k)?;
            relink(m, ROOT, LEFT, new)?;
            Ok(true)
        }
    }
}

/// Fills the tree with every other key (through `m`).
pub fn prefill<M: Mem>(m: &mut M) -> Result<(), M::E> {
    m.set(ROOT, LEFT, NIL)?;
    for k in (0..KEYS).step_by(2) {
        let root = m.get(ROOT, LEFT)?;
        let new = insert_at(m, root, k)?;
        relink(m, ROOT, LEFT, new)?;
    }
    Ok(())
}

/// The next of a xorshift sequence.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

// ---------------------------------------------------------------------------------------
// The memories.

/// Plain memory, for the coarse lock.
pub struct Plain(pub Vec<[u32; 3]>);

impl Mem for Plain {
    type E = core::convert::Infallible;
    fn get(&mut self, n: u32, f: usize) -> Result<u32, Self::E> {
        Ok(self.0[n as usize][f])
    }
    fn set(&mut self, n: u32, f: usize, v: u32) -> Result<(), Self::E> {
        self.0[n as usize][f] = v;
        Ok(())
    }
}

/// McRT's transactional cells.
pub struct StmNodes(pub Vec<[TCell<u32>; 3]>);

/// The tree seen through a transaction.
pub struct InTx<'a, 'env> {
    /// The transaction.
    pub tx: &'a mut Tx<'env>,
    /// The cells.
    pub nodes: &'env StmNodes,
}

impl Mem for InTx<'_, '_> {
    type E = Abort;
    fn get(&mut self, n: u32, f: usize) -> Result<u32, Abort> {
        self.tx.read(&self.nodes.0[n as usize][f])
    }
    fn set(&mut self, n: u32, f: usize, v: u32) -> Result<(), Abort> {
        self.tx.write(&self.nodes.0[n as usize][f], v)
    }
}
