//! The kernel's top-level modules form layers that a reader can follow bottom up
//! (docs/architecture.md, "Layers"): each module uses only the modules below it. A lower
//! layer that must call up (a trap into the user layer, a `START` message, a console line
//! from a program) does it through a handler the upper layer installs, or, for the trap and
//! system-call stubs, through a link name. This test reads `kernel/src` and fails on any
//! use of a module at or above the user's own place in [`LAYERS`].

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The kernel's top-level modules, bottom layer first, as `kernel/src/layers.rs` lists
/// them (the one list: the in-kernel test runner orders tests by it too), then `main`.
fn layers() -> Vec<String> {
    let src = fs::read_to_string(kernel_src().join("layers.rs")).expect("kernel/src/layers.rs");
    let mut names: Vec<String> = src
        .lines()
        .filter_map(|l| l.split("module: \"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(String::from)
        .collect();
    names.push("main".into()); // declares every module, so it sits above them all
    names
}

/// The kernel's macros (`#[macro_export]`, so named without a path) and their modules.
const MACROS: &[(&str, &str)] = &[
    ("print!", "print"),
    ("println!", "print"),
    ("per_core_state!", "percpu"),
    ("kernel_test!", "testing"),
];

fn kernel_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("kernel/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`main` for `main.rs`).
fn owner(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(kernel_src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_string())
}

/// Source without `//` comments (doc comments name modules freely).
fn without_comments(src: &str) -> String {
    src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The top-level modules `src` names: `crate::name` paths, the first-level names of
/// `use crate::{a, b::c}` groups, and the modules of the macros it calls.
fn named_modules(src: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (call, module) in MACROS {
        let called = src.match_indices(call).any(|(i, _)| {
            // Not the tail of a longer name (`eprintln!`).
            !src[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        });
        if called {
            names.insert(module.to_string());
        }
    }
    let ident = |s: &str| -> String {
        s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
    };
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // A use group: names at brace depth 1 that start an item.
            let mut depth = 1;
            let mut at_item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => at_item_start = true,
                    c if c.is_whitespace() => {}
                    _ if depth == 1 && at_item_start => {
                        names.insert(ident(&group[j..]));
                        at_item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            names.insert(ident(rest));
        }
    }
    names
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let layers = layers();
    let mut files = Vec::new();
    rust_files(&kernel_src(), &mut files);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for path in files {
        let Some(module) = owner(&path) else { continue };
        seen.insert(module.clone());
        let Some(level) = layers.iter().position(|m| *m == module) else {
            problems.push(format!("{module}: not in the layer list of this test"));
            continue;
        };
        let src = without_comments(&fs::read_to_string(&path).expect("readable source"));
        for used in named_modules(&src) {
            match layers.iter().position(|m| *m == used) {
                Some(l) if l > level => problems.push(format!(
                    "{} uses {used}, a layer above {module}",
                    path.strip_prefix(kernel_src()).unwrap_or(&path).display()
                )),
                _ => {}
            }
        }
    }
    for m in &layers {
        assert!(seen.contains(m), "{m} is in the layer list but not in kernel/src");
    }
    assert!(problems.is_empty(), "kernel layering broken:\n{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_paths_use_groups_and_macros() {
    let src = "use crate::{arch::{cpu, paging}, mem, percpu::this_core};\n\
               fn f() { crate::user::run(); println!(\"x\"); eprintln!(\"y\"); }";
    let names = named_modules(src);
    let want: BTreeSet<String> =
        ["arch", "mem", "percpu", "print", "user"].iter().map(|s| s.to_string()).collect();
    assert_eq!(names, want);
}

/// The sibling files of one folder (a room) that `src` names through `super::`: `use
/// super::{a::x, b}`, `use super::a::x` and `super::a::f()` paths.
fn named_siblings(src: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
    };
    let mut rest = src;
    while let Some(i) = rest.find("super::") {
        rest = &rest[i + "super::".len()..];
        let heads: Vec<String> = match rest.strip_prefix('{') {
            Some(group) => {
                let end = group.find('}').unwrap_or(group.len());
                group[..end].split(',').map(|item| ident(item.trim())).collect()
            }
            None => vec![ident(rest)],
        };
        names.extend(heads.into_iter().filter(|h| siblings.contains(h)));
    }
    names
}

/// Within each folder of `kernel/src`, the files that use each other through `super::`
/// form no cycle: a room reads bottom up too.
#[test]
fn no_room_has_a_cycle_between_its_files() {
    let mut files = Vec::new();
    rust_files(&kernel_src(), &mut files);
    let mut rooms: std::collections::BTreeMap<PathBuf, Vec<PathBuf>> = Default::default();
    for f in files {
        let dir = f.parent().expect("a folder").to_path_buf();
        if dir != kernel_src() && f.file_name().is_some_and(|n| n != "mod.rs") {
            rooms.entry(dir).or_default().push(f);
        }
    }
    let mut problems = Vec::new();
    for (room, files) in rooms {
        let name = |f: &PathBuf| f.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
        let siblings: BTreeSet<String> = files.iter().map(name).collect();
        let uses: std::collections::BTreeMap<String, BTreeSet<String>> = files
            .iter()
            .map(|f| {
                let src = without_comments(&fs::read_to_string(f).expect("readable source"));
                let mut used = named_siblings(&src, &siblings);
                used.remove(&name(f));
                (name(f), used)
            })
            .collect();
        // Peel off files that use no remaining file; what is left is in a cycle.
        let mut left: BTreeSet<String> = siblings.clone();
        loop {
            let free: Vec<String> = left
                .iter()
                .filter(|f| uses[*f].iter().all(|u| !left.contains(u)))
                .cloned()
                .collect();
            if free.is_empty() {
                break;
            }
            for f in free {
                left.remove(&f);
            }
        }
        // Of what is left, name only the files on a cycle (those that reach themselves),
        // not the ones that merely use a file on one.
        let reaches_itself = |start: &String| {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = uses[start].iter().filter(|u| left.contains(*u)).collect();
            while let Some(f) = todo.pop() {
                if f == start {
                    return true;
                }
                if seen.insert(f.clone()) {
                    todo.extend(uses[f].iter().filter(|u| left.contains(*u)));
                }
            }
            false
        };
        let on_a_cycle: BTreeSet<&String> = left.iter().filter(|f| reaches_itself(f)).collect();
        if !on_a_cycle.is_empty() {
            problems.push(format!("{}: {on_a_cycle:?} use each other", room.display()));
        }
    }
    assert!(problems.is_empty(), "cycles inside rooms:\n{}", problems.join("\n"));
}

#[test]
fn the_room_scanner_sees_super_paths() {
    let siblings: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let src = "use super::{a::X, Y};\nuse super::b::Z;\nfn f() { super::c::g(); super::h(); }";
    assert_eq!(named_siblings(src, &siblings), siblings);
}

/// `docs/architecture.md`'s "Layers" names the modules in the order of the list.
#[test]
fn the_architecture_doc_lists_the_layers_in_order() {
    let doc = fs::read_to_string(kernel_src().join("../../docs/architecture.md"))
        .expect("docs/architecture.md");
    let section = doc.split("## Layers").nth(1).expect("a Layers section");
    let list = section.split("bottom first:").nth(1).expect("a list, bottom first");
    let sentence = list.split("Where a lower layer").next().unwrap_or(list);
    let named: Vec<String> = sentence.split('`').skip(1).step_by(2).map(String::from).collect();
    let mut want = layers();
    // Declarations below every layer, named apart in the doc.
    want.retain(|m| !["main", "layers", "param"].contains(&m.as_str()));
    assert_eq!(named, want, "docs/architecture.md's layer order differs from kernel/src/layers.rs");
}
