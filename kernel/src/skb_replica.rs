//! Each core's replica of the system knowledge base (Multikernel §3.3, §4.8): its copy of
//! the measured `skb::Skb` and its multicast trees from itself. `knowledge` measures the
//! machine at boot and gives every core its replica ([`set_this_core`], once, by a remote
//! call that runs on that core); every query reads the calling core's own. This layer is
//! low so that `tlb`, below the heap and the monitor, reads its protocol and trees here.

use crate::percpu::{self, MAX_CORES};
use ::skb::{MulticastTree, Skb};

/// Each core's replica, set by that core.
static REPLICAS: [spin::Once<Skb>; MAX_CORES] = [const { spin::Once::new() }; MAX_CORES];

/// Each core's multicast trees from itself (the SKB's, NUMA-aware; and the plain one),
/// computed once when its replica is made, so a shootdown builds none.
static TREES: [spin::Once<(MulticastTree, MulticastTree)>; MAX_CORES] =
    [const { spin::Once::new() }; MAX_CORES];

/// Makes this core's replica of `skb` (in its own heap) and its trees; a second call
/// keeps the first.
pub fn set_this_core(skb: &Skb) {
    let me = percpu::this_core().index;
    let mine = REPLICAS[me].call_once(|| skb.clone());
    TREES[me].call_once(|| (mine.multicast_tree(me), mine.plain_multicast_tree(me)));
}

/// This core's replica of the knowledge base, once measured and copied here.
pub fn get() -> Option<&'static Skb> {
    REPLICAS.get(percpu::this_core().index)?.get()
}

/// This core's multicast trees from itself: (NUMA-aware, plain), once measured.
pub fn trees() -> Option<&'static (MulticastTree, MulticastTree)> {
    TREES.get(percpu::this_core().index)?.get()
}
