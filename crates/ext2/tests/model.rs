//! Random sequences of create, mkdir, write, truncate, rename, unlink and rmdir run on a
//! fresh image and on an in-memory model tree: every result (value or error) must agree,
//! and so must the final tree. The first few cases are also checked with `e2fsck -fn`.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use common::*;
use ext2::{Error, Ext2, FileKind, MemDisk};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Create(String),
    Mkdir(String),
    Write(String, u64, usize, u64),
    Truncate(String, u64),
    Rename(String, String),
    Unlink(String),
    Rmdir(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    File(Vec<u8>),
    Dir,
}

/// The model: absolute path -> node (the root is implicit).
#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
}

fn split(p: &str) -> (&str, &str) {
    let i = p.rfind('/').unwrap();
    (if i == 0 { "/" } else { &p[..i] }, &p[i + 1..])
}

impl Model {
    fn get(&self, p: &str) -> Option<&Node> {
        if p == "/" {
            return Some(&Node::Dir);
        }
        self.nodes.get(p)
    }

    /// Walks `p` as `Ext2::lookup` does.
    fn lookup(&self, p: &str) -> Result<&Node, Error> {
        let mut cur = String::new();
        let mut node = &Node::Dir;
        for c in p.split('/').filter(|c| !c.is_empty()) {
            if *node != Node::Dir {
                return Err(Error::NotADirectory);
            }
            cur = format!("{cur}/{c}");
            node = self.nodes.get(&cur).ok_or(Error::NotFound)?;
        }
        Ok(node)
    }

    /// The parent of `p` must be a directory.
    fn parent(&self, p: &str) -> Result<(), Error> {
        match self.lookup(split(p).0)? {
            Node::Dir => Ok(()),
            _ => Err(Error::NotADirectory),
        }
    }

    fn children(&self, p: &str) -> Vec<String> {
        let prefix = if p == "/" { "/".to_string() } else { format!("{p}/") };
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }

    fn apply(&mut self, op: &Op) -> Result<(), Error> {
        match op {
            Op::Create(p) | Op::Mkdir(p) => {
                self.parent(p)?;
                if self.get(p).is_some() {
                    return Err(Error::Exists);
                }
                let node = if matches!(op, Op::Mkdir(_)) { Node::Dir } else { Node::File(vec![]) };
                self.nodes.insert(p.clone(), node);
            }
            Op::Write(p, off, len, seed) => {
                self.lookup(p)?;
                match self.nodes.get_mut(p).unwrap() {
                    Node::Dir => return Err(Error::IsADirectory),
                    Node::File(data) => {
                        let end = *off as usize + len;
                        if *len > 0 && data.len() < end {
                            data.resize(end, 0);
                        }
                        data[*off as usize..*off as usize + len]
                            .copy_from_slice(&pattern(*seed, *len));
                    }
                }
            }
            Op::Truncate(p, len) => {
                self.lookup(p)?;
                match self.nodes.get_mut(p).unwrap() {
                    Node::Dir => return Err(Error::IsADirectory),
                    Node::File(data) => data.resize(*len as usize, 0),
                }
            }
            Op::Unlink(p) => {
                self.parent(p)?;
                match self.get(p).ok_or(Error::NotFound)? {
                    Node::Dir => return Err(Error::IsADirectory),
                    Node::File(_) => self.nodes.remove(p),
                };
            }
            Op::Rmdir(p) => {
                self.parent(p)?;
                match self.get(p).ok_or(Error::NotFound)? {
                    Node::File(_) => return Err(Error::NotADirectory),
                    Node::Dir if !self.children(p).is_empty() => return Err(Error::NotEmpty),
                    Node::Dir => self.nodes.remove(p),
                };
            }
            Op::Rename(from, to) => {
                self.parent(from)?;
                self.parent(to)?;
                let src = self.get(from).ok_or(Error::NotFound)?.clone();
                if from == to {
                    return Ok(());
                }
                if src == Node::Dir
                    && (split(to).0 == from || split(to).0.starts_with(&format!("{from}/")))
                {
                    return Err(Error::InvalidArgument);
                }
                match (src == Node::Dir, self.get(to)) {
                    (true, Some(Node::File(_))) => return Err(Error::NotADirectory),
                    (false, Some(Node::Dir)) => return Err(Error::IsADirectory),
                    (true, Some(Node::Dir)) if !self.children(to).is_empty() => {
                        return Err(Error::NotEmpty)
                    }
                    _ => {}
                }
                self.nodes.remove(to);
                let moved: Vec<String> = self
                    .nodes
                    .keys()
                    .filter(|k| *k == from || k.starts_with(&format!("{from}/")))
                    .cloned()
                    .collect();
                for k in moved {
                    let node = self.nodes.remove(&k).unwrap();
                    self.nodes.insert(format!("{to}{}", &k[from.len()..]), node);
                }
            }
        }
        Ok(())
    }
}

fn run(fs: &mut Ext2<MemDisk>, op: &Op) -> Result<(), Error> {
    match op {
        Op::Create(p) => fs.create(p, 0o644).map(|_| ()),
        Op::Mkdir(p) => fs.mkdir(p, 0o755).map(|_| ()),
        Op::Write(p, off, len, seed) => {
            let ino = fs.lookup(p)?;
            let n = fs.write(ino, *off, &pattern(*seed, *len))?;
            assert_eq!(n, *len);
            Ok(())
        }
        Op::Truncate(p, len) => {
            let ino = fs.lookup(p)?;
            fs.truncate(ino, *len)
        }
        Op::Rename(a, b) => fs.rename(a, b),
        Op::Unlink(p) => fs.unlink(p),
        Op::Rmdir(p) => fs.rmdir(p),
    }
}

/// Paths over names a, b, c up to three deep: 39 of them, so operations collide often.
fn paths() -> Vec<String> {
    let mut out = vec![];
    for a in ["a", "b", "c"] {
        out.push(format!("/{a}"));
        for b in ["a", "b", "c"] {
            out.push(format!("/{a}/{b}"));
            for c in ["a", "b", "c"] {
                out.push(format!("/{a}/{b}/{c}"));
            }
        }
    }
    out
}

fn op_strategy() -> impl Strategy<Value = Op> {
    // Each depth equally likely, so that deep paths' parents often exist.
    let at = |depth: usize| {
        prop::sample::select(
            paths().into_iter().filter(|p| p.matches('/').count() == depth).collect::<Vec<_>>(),
        )
    };
    let p = move || prop_oneof![at(1), at(2), at(3)];
    prop_oneof![
        3 => p().prop_map(Op::Create),
        3 => p().prop_map(Op::Mkdir),
        4 => (p(), 0u64..300_000, 0usize..5000, any::<u64>())
            .prop_map(|(p, o, l, s)| Op::Write(p, o, l, s)),
        1 => (p(), 0u64..300_000).prop_map(|(p, l)| Op::Truncate(p, l)),
        2 => (p(), p()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => p().prop_map(Op::Unlink),
        1 => p().prop_map(Op::Rmdir),
    ]
}

/// A fresh 16 MiB image of block size `bs`, made once.
fn base(bs: u32) -> Option<&'static Vec<u8>> {
    static B1K: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    static B4K: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    let cell = if bs == 1024 { &B1K } else { &B4K };
    cell.get_or_init(|| {
        if !have_tools("model") {
            return None;
        }
        let tmp = TempDir::new("modelbase");
        let img = tmp.path("img");
        mkfs(&img, bs, 16384, None, &[]);
        Some(std::fs::read(&img).unwrap())
    })
    .as_ref()
}

static FSCK_RUNS: AtomicUsize = AtomicUsize::new(0);

fn check_sequence(bs: u32, ops: &[Op]) {
    let Some(bytes) = base(bs) else { return };
    let mut fs = Ext2::mount(MemDisk { bytes: bytes.clone() }).unwrap();
    let mut model = Model::default();
    for op in ops {
        let want = model.apply(op);
        let got = run(&mut fs, op);
        assert_eq!(got, want, "{op:?}");
    }
    // The trees agree: kinds, contents and directory listings.
    for (path, node) in &model.nodes {
        let st = stat_path(&mut fs, path);
        match node {
            Node::File(data) => {
                assert_eq!(st.kind, FileKind::File);
                assert_eq!(&read_path(&mut fs, path), data, "{path}");
            }
            Node::Dir => assert_eq!(st.kind, FileKind::Dir),
        }
    }
    let mut dirs: Vec<String> =
        model.nodes.iter().filter(|(_, n)| **n == Node::Dir).map(|(p, _)| p.clone()).collect();
    dirs.push("/".into());
    for d in dirs {
        let mut got: Vec<String> = ls(&mut fs, &d)
            .into_iter()
            .map(|e| String::from_utf8(e.name).unwrap())
            .filter(|n| n != "." && n != ".." && !(d == "/" && n == "lost+found"))
            .collect();
        got.sort();
        assert_eq!(got, model.children(&d), "listing of {d}");
    }
    let disk = fs.unmount().unwrap();
    if FSCK_RUNS.fetch_add(1, Ordering::Relaxed) < 8 {
        let tmp = TempDir::new("modelfsck");
        let img = tmp.path("img");
        std::fs::write(&img, &disk.bytes).unwrap();
        assert_clean(&img);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn matches_model_1k(ops in prop::collection::vec(op_strategy(), 1..60)) {
        check_sequence(1024, &ops);
    }

    #[test]
    fn matches_model_4k(ops in prop::collection::vec(op_strategy(), 1..60)) {
        check_sequence(4096, &ops);
    }
}

/// A fixed sequence that moves directories around (rename across, onto an empty
/// directory, into its own subtree) and is always checked with e2fsck.
#[test]
fn directory_moves() {
    let s = |x: &str| x.to_string();
    let ops = vec![
        Op::Mkdir(s("/a")),
        Op::Mkdir(s("/a/b")),
        Op::Create(s("/a/b/c")),
        Op::Write(s("/a/b/c"), 270_000, 4000, 7),
        Op::Mkdir(s("/b")),
        Op::Rename(s("/a/b"), s("/b/a")),
        Op::Rename(s("/b"), s("/b/a/c")),
        Op::Mkdir(s("/c")),
        Op::Rename(s("/b/a"), s("/c")),
        Op::Rename(s("/c/c"), s("/a/c")),
        Op::Truncate(s("/a/c"), 100),
        Op::Rmdir(s("/b")),
        Op::Unlink(s("/a/c")),
    ];
    FSCK_RUNS.store(0, Ordering::Relaxed);
    check_sequence(1024, &ops);
}
