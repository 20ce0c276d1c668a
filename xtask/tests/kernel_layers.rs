//! The kernel's top-level modules form layers that a reader can follow bottom up
//! (docs/architecture.md, "Layers"): each module uses only the modules below it. A lower
//! layer that must call up (a trap into the user layer, a `START` message, a console line
//! from a program) does it through a handler the upper layer installs, or, for the trap and
//! system-call stubs, through a link name. This test reads `kernel/src` and fails on any
//! use of a module at or above the user's own place in [`LAYERS`].

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The kernel's top-level modules, bottom layer first.
const LAYERS: &[&str] = &[
    "arch",       // hardware glue: boot entry, traps, APIC, paging, ACPI
    "percpu",     // each core's block (GS) and per-core state slots
    "throttle",   // emulated slow cores (duty cycle of the timer)
    "print",      // the serial console's output
    "tlb",        // TLB shootdown
    "mem",        // frames and heaps
    "initrd",     // the boot module of user programs
    "monitor",    // URPC channels, remote calls, frame returns
    "smp",        // starting cores, work on chosen cores
    "knowledge",  // the SKB and boot facts
    "twophase",   // two-phase commit between the monitors
    "retype",     // frames change owner by two-phase commit
    "bench",      // in-kernel experiments
    "thread",     // what every core knows of a thread; how a program ended
    "corey",      // Corey's objects: shares, segments, address ranges, pcores, devices
    "sched",      // threads, run queues, migration and load (AMPS)
    "user",       // loading and starting programs, the system-call dispatcher, user traps
    "interrupts", // where traps land (above the user layer they call into)
    "testing",    // the test registry
    "console",    // the kernel console
    "ktest",      // the in-kernel tests
    "boot",       // the boot core's path, top to bottom
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

/// The top-level module a file belongs to (`None` for `main.rs`).
fn owner(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(kernel_src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (name != "main").then(|| name.to_string())
}

/// Source without `//` comments (doc comments name modules freely).
fn without_comments(src: &str) -> String {
    src.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The top-level modules `src` names: `crate::name` paths and the first-level names of
/// `use crate::{a, b::c}` groups.
fn named_modules(src: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
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
    let mut files = Vec::new();
    rust_files(&kernel_src(), &mut files);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for path in files {
        let Some(module) = owner(&path) else { continue };
        seen.insert(module.clone());
        let Some(level) = LAYERS.iter().position(|&m| m == module) else {
            problems.push(format!("{module}: not in the layer list of this test"));
            continue;
        };
        let src = without_comments(&fs::read_to_string(&path).expect("readable source"));
        for used in named_modules(&src) {
            match LAYERS.iter().position(|&m| m == used) {
                Some(l) if l > level => problems.push(format!(
                    "{} uses {used}, a layer above {module}",
                    path.strip_prefix(kernel_src()).unwrap_or(&path).display()
                )),
                _ => {}
            }
        }
    }
    for &m in LAYERS {
        assert!(seen.contains(m), "{m} is in the layer list but not in kernel/src");
    }
    assert!(problems.is_empty(), "kernel layering broken:\n{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_paths_and_use_groups() {
    let src =
        "use crate::{arch::{cpu, paging}, mem, percpu::this_core};\nfn f() { crate::user::run(); }";
    let names = named_modules(src);
    let want: BTreeSet<String> =
        ["arch", "mem", "percpu", "user"].iter().map(|s| s.to_string()).collect();
    assert_eq!(names, want);
}
