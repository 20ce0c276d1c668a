//! Property tests for `partition` and `FrameOwners`: every usable frame has exactly one
//! owner, NUMA locality holds, and each pool is split evenly and contiguously.

use physmem::{partition, CoreShare, FrameOwners, NodeMemory, PhysRange, RangeSet, FRAME_SIZE};
use proptest::prelude::*;

const K: u64 = FRAME_SIZE;
/// Frames in the test address space.
const FRAMES: u64 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    Node(u32),
    Shared,
}

/// Usable ranges (in frames), node ranges (node, start byte, end byte), each core's node.
type Inputs = (Vec<(u64, u64)>, Vec<(u32, u64, u64)>, Vec<u32>);

fn inputs() -> impl Strategy<Value = Inputs> {
    (
        // Usable memory: up to 3 ranges of frames.
        proptest::collection::vec((0..FRAMES, 0..FRAMES), 0..4),
        // Node ranges in bytes (unaligned ones too), possibly overlapping; nodes 0..4.
        proptest::collection::vec((0..4u32, 0..FRAMES * K, 0..FRAMES * K), 0..4),
        // Cores, each on node 0..5 (node 4 never has memory).
        proptest::collection::vec(0..5u32, 1..9),
    )
}

proptest! {
    #[test]
    fn partition_properties((usable_v, nodes_v, core_nodes) in inputs()) {
        let mut usable = RangeSet::<8>::new();
        for &(a, b) in &usable_v {
            usable.insert(PhysRange::new(a * K, b * K)).unwrap();
        }
        let nodes: Vec<NodeMemory> = nodes_v
            .iter()
            .map(|&(node, a, b)| NodeMemory { node, range: PhysRange::new(a, b) })
            .collect();
        let mut out = [CoreShare::new(); 8];
        partition(&usable, &nodes, &core_nodes, &mut out).unwrap();
        let owners = FrameOwners::<128>::from_shares(&out).unwrap();

        // Owner of each frame, from the shares directly.
        let mut owner = vec![None; FRAMES as usize];
        for (core, share) in out.iter().enumerate() {
            prop_assert!(core < core_nodes.len() || share.is_empty());
            for r in share.ranges() {
                prop_assert!(r.start.is_multiple_of(K) && r.end.is_multiple_of(K));
                for f in r.start / K..r.end / K {
                    prop_assert!(owner[f as usize].is_none(), "frame {} owned twice", f);
                    owner[f as usize] = Some(core);
                }
            }
        }

        // The pool of a frame: the first node range holding its first byte, if its node
        // has cores.
        let pool_of = |f: u64| {
            match nodes.iter().find(|n| n.range.contains(f * K)) {
                Some(n) if core_nodes.contains(&n.node) => Pool::Node(n.node),
                _ => Pool::Shared,
            }
        };
        let mut pools: Vec<Pool> = core_nodes.iter().map(|&n| Pool::Node(n)).collect();
        pools.push(Pool::Shared);

        for f in 0..FRAMES {
            // Coverage: owned exactly when usable; the owner table agrees.
            prop_assert_eq!(owner[f as usize].is_some(), usable.contains(f * K));
            prop_assert_eq!(owners.owner_of(f * K), owner[f as usize]);
            prop_assert_eq!(owners.owner_of(f * K + K - 1), owner[f as usize]);
            // Locality: a node's frames go to that node's cores.
            if let (Some(core), Pool::Node(n)) = (owner[f as usize], pool_of(f)) {
                prop_assert_eq!(core_nodes[core], n, "frame {} left its node", f);
            }
        }

        for &pool in &pools {
            let cores: Vec<usize> = (0..core_nodes.len())
                .filter(|&c| pool == Pool::Shared || pool == Pool::Node(core_nodes[c]))
                .collect();
            // The pool's frames in address order, by owner: owners in rank order (contiguous
            // chunks), and chunk sizes within one frame of each other.
            let seq: Vec<usize> = (0..FRAMES)
                .filter(|&f| owner[f as usize].is_some() && pool_of(f) == pool)
                .map(|f| owner[f as usize].unwrap())
                .collect();
            let rank = |c: usize| cores.iter().position(|&x| x == c).unwrap();
            for w in seq.windows(2) {
                prop_assert!(rank(w[0]) <= rank(w[1]), "pool {:?} not contiguous", pool);
            }
            let total = seq.len();
            for &c in &cores {
                let n = seq.iter().filter(|&&x| x == c).count();
                prop_assert!(n == total / cores.len() || n == total.div_ceil(cores.len()));
            }
        }
    }
}
