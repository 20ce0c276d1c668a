//! Blocks private to one core (beyond Corey, after its §9: applications could control
//! the sharing of buffer-cache entries as they control shares). The file system marks a
//! file private to a core; each of its blocks then lives in that core's own map
//! (`Pool::private`), found and changed under that core's pool lock alone: no shared tree,
//! no read-write lock, no copy on write (no other core ever reads the buffer), and its
//! buffers come from and go back to the core's own pool.

use crate::cache::Cache;
use crate::pool::{PerCore, Pool, PrivateBuf};
use crate::{BlockDevice, Error};
use core::mem;
use core::sync::atomic::Ordering::Relaxed;

impl<D: BlockDevice> Cache<D> {
    /// Makes `block` private to core `core` (after Corey §9): any shared copy is written
    /// back and dropped, and from now on the block lives in `core`'s own map, found
    /// without the shared tree. Only `core` may then use the block until
    /// [`Cache::make_shared`]; the file system guarantees that for a file it marked private
    /// (another core's access would see the shared tree's copy, not this one).
    pub fn make_private(&self, core: usize, block: u64) -> Result<(), Error<D::Error>> {
        self.check(core, block, 0, 0)?;
        let me = &self.cores[core];
        if me.pool.with(|p| p.private.contains_key(&block)) {
            return Ok(());
        }
        self.invalidate(core, block)?;
        me.pool.with(|p| {
            p.private.insert(block, None);
            me.private_blocks.store(p.private.len(), Relaxed);
        });
        Ok(())
    }

    /// Gives a private block of core `core` back to the shared cache: its copy is written
    /// back if dirty and dropped. Does nothing if the block is not private to `core`.
    pub fn make_shared(&self, core: usize, block: u64) -> Result<(), Error<D::Error>> {
        self.check(core, block, 0, 0)?;
        let me = &self.cores[core];
        me.pool.with(|pool| {
            if !pool.private.contains_key(&block) {
                return Ok(());
            }
            self.write_back_private(core, pool, block)?;
            if let Some(Some(p)) = pool.private.remove(&block) {
                pool.free.push(p.buf);
            }
            me.private_blocks.store(pool.private.len(), Relaxed);
            Ok(())
        })
    }

    /// Runs `f` on core `core`'s pool if `block` is private to it; `None` (without taking
    /// the lock when the core has no private blocks) if not.
    pub(crate) fn private<R>(
        &self,
        core: usize,
        block: u64,
        f: impl FnOnce(&mut Pool) -> R,
    ) -> Option<R> {
        let me = &self.cores[core];
        // Relaxed: only this core changes its count, and it reads its own latest value.
        if me.private_blocks.load(Relaxed) == 0 {
            return None;
        }
        me.pool.with(|pool| pool.private.contains_key(&block).then(|| f(pool)))
    }

    /// The buffer holding private `block`, read from the device on a miss.
    fn private_buf(
        &self,
        core: usize,
        pool: &mut Pool,
        block: u64,
        fill: Fill,
    ) -> Result<PrivateBuf, Error<D::Error>> {
        let me = &self.cores[core];
        if let Some(Some(p)) = pool.private.get(&block).copied() {
            PerCore::count(&me.hits, 1);
            return Ok(p);
        }
        PerCore::count(&me.misses, 1);
        let buf = self.alloc_locked(core, pool)?;
        if fill == Fill::FromDevice {
            let mut scratch = mem::take(&mut pool.scratch);
            let r = self.fill_from(&mut scratch, buf, block);
            pool.scratch = scratch;
            if let Err(e) = r {
                pool.free.push(buf);
                return Err(e);
            }
        }
        let p = PrivateBuf { buf, dirty: false };
        pool.private.insert(block, Some(p));
        Ok(p)
    }

    /// `read` of a block private to `core`, under its pool lock.
    pub(crate) fn private_read(
        &self,
        core: usize,
        pool: &mut Pool,
        block: u64,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), Error<D::Error>> {
        let p = self.private_buf(core, pool, block, Fill::FromDevice)?;
        self.bufs[p.buf as usize].load_into(offset, out);
        Ok(())
    }

    /// `write` of a block private to `core`, under its pool lock: in place, since no other
    /// core ever reads the buffer.
    pub(crate) fn private_write(
        &self,
        core: usize,
        pool: &mut Pool,
        block: u64,
        offset: usize,
        data: &[u8],
    ) -> Result<(), Error<D::Error>> {
        let whole = offset == 0 && data.len() == self.block_size;
        let fill = if whole { Fill::No } else { Fill::FromDevice };
        let p = self.private_buf(core, pool, block, fill)?;
        self.bufs[p.buf as usize].store_from(offset, data);
        pool.private.insert(block, Some(PrivateBuf { buf: p.buf, dirty: true }));
        Ok(())
    }

    /// Writes private `block` of the core owning `pool` back if it is dirty (counted for
    /// core `core`, the one asking).
    pub(crate) fn write_back_private(
        &self,
        core: usize,
        pool: &mut Pool,
        block: u64,
    ) -> Result<(), Error<D::Error>> {
        let Some(Some(p)) = pool.private.get(&block).copied() else { return Ok(()) };
        if !p.dirty {
            return Ok(());
        }
        let mut copy = mem::take(&mut pool.scratch);
        copy.resize(self.block_size, 0);
        self.bufs[p.buf as usize].load_into(0, &mut copy);
        let r = self.device.write_block(block, &copy);
        pool.scratch = copy;
        r.map_err(Error::Device)?;
        PerCore::count(&self.cores[core].writebacks, 1);
        pool.private.insert(block, Some(PrivateBuf { buf: p.buf, dirty: false }));
        Ok(())
    }
}

/// Whether a private miss reads the device first (a whole-block write need not).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Read the block before changing part of it.
    FromDevice,
    /// The whole block is about to be overwritten.
    No,
}
