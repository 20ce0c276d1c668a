//! The web servers of the Linux guest (`web_static`, Multikernel §5.4; issue M12): Debian's
//! `lighttpd` and `nginx`, fetched with `apt-get download` and unpacked with `dpkg -x` (the
//! host is not changed), with the shared libraries they load, for the guest's initramfs.
//! The libraries are found by following each program's `DT_NEEDED` entries, first in the
//! unpacked packages (the servers' own `lib*` dependencies are fetched too), then on the
//! host, which is Debian like the guest. `atoll-bench-linux web_static,SERVER` writes
//! their configuration and starts them (`workloads/src/linux/webserver.rs`).
//! Cached in `target/linux-guest/servers/`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
use object::Endianness;

use super::guest::{apt_download, dpkg_field, fresh_dir, unpack};
use crate::Result;

/// The Debian packages of the servers, and the programs of each that the guest runs.
const SERVERS: [(&str, &str); 2] = [("lighttpd", "usr/sbin/lighttpd"), ("nginx", "usr/sbin/nginx")];

/// Where shared libraries are looked for, under the unpacked packages and then on the host.
const LIBRARY_DIRS: [&str; 4] =
    ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib"];

/// The account files nginx looks its workers' user up in (`nobody`, `nogroup`).
/// (lighttpd loads no module: its configuration takes only the built-in ones.)
const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// One file of the initramfs: its path (no leading `/`), mode and bytes.
pub type Entry = (String, u32, Vec<u8>);

/// The servers' files for the initramfs, fetched first if they are not cached in `dir`.
pub fn files(dir: &Path) -> Result<Vec<Entry>> {
    let root = dir.join("servers");
    if !root.join(".complete").is_file() {
        fetch(&root)?;
    }
    let mut entries: Vec<Entry> = vec![
        ("etc/passwd".into(), 0o100_644, PASSWD.into()),
        ("etc/group".into(), 0o100_644, GROUP.into()),
    ];
    let mut libraries = BTreeSet::new();
    for (_, program) in SERVERS {
        let bytes = read(&root.join(program))?;
        needed_closure(&root, &bytes, &mut libraries)?;
        entries.push((program.to_string(), 0o100_755, bytes));
    }
    for (guest_path, found) in libraries {
        entries.push((guest_path, 0o100_755, read(&found)?));
    }
    Ok(entries)
}

/// Downloads and unpacks the servers and their `lib*` dependencies into `root`.
fn fetch(root: &Path) -> Result {
    let work = fresh_dir(&root.with_extension("download"))?;
    fresh_dir(root)?;
    for (package, _) in SERVERS {
        eprintln!(
            "bench: fetching {package} for the Linux guest (once; cached in {})",
            root.display()
        );
        let deb = apt_download(&work, package)?;
        unpack(&deb, root)?;
        for library in library_packages(&dpkg_field(&deb, "Depends")?) {
            let deb = apt_download(&work, &library)?;
            unpack(&deb, root)?;
        }
    }
    let _ = fs::remove_dir_all(&work);
    fs::write(root.join(".complete"), b"").map_err(|e| format!("{}: {e}", root.display()))
}

/// The library packages of a `Depends` field (the first of each set of alternatives), but
/// the C library: that comes from the host with its dynamic loader, which must match it.
fn library_packages(depends: &str) -> Vec<String> {
    depends
        .split(',')
        .filter_map(|d| d.split('|').next())
        .filter_map(|d| d.split_whitespace().next())
        .filter(|name| name.starts_with("lib") && *name != "libc6")
        .map(String::from)
        .collect()
}

/// Adds to `libraries` (guest path, where found) the dynamic loader and every library
/// `elf_bytes` needs, and theirs in turn.
fn needed_closure(
    root: &Path,
    elf_bytes: &[u8],
    libraries: &mut BTreeSet<(String, PathBuf)>,
) -> Result {
    let (interpreter, needed) = dynamic_needs(elf_bytes)?;
    if let Some(loader) = interpreter {
        let path = loader.trim_start_matches('/').to_string();
        let found = Some(PathBuf::from(&loader)).filter(|p| p.is_file());
        let found = found.ok_or_else(|| format!("the dynamic loader {loader} is not found"))?;
        libraries.insert((path, found));
    }
    let mut todo = needed;
    while let Some(name) = todo.pop() {
        if libraries.iter().any(|(guest, _)| guest.ends_with(&format!("/{name}"))) {
            continue;
        }
        let found = find_library(root, &name).ok_or_else(|| {
            format!("the shared library {name} is in no package fetched nor on the host")
        })?;
        let (_, more) = dynamic_needs(&read(&found)?)?;
        todo.extend(more);
        libraries.insert((format!("lib/x86_64-linux-gnu/{name}"), found));
    }
    Ok(())
}

/// Where library `name` is: under the unpacked packages, else on the host.
fn find_library(root: &Path, name: &str) -> Option<PathBuf> {
    let under =
        |base: &Path| LIBRARY_DIRS.iter().map(|d| base.join(d).join(name)).collect::<Vec<_>>();
    under(root).into_iter().chain(under(Path::new("/"))).find(|p| p.is_file())
}

/// The `PT_INTERP` path and the `DT_NEEDED` names of an ELF64 file.
fn dynamic_needs(bytes: &[u8]) -> Result<(Option<String>, Vec<String>)> {
    let file =
        ElfFile64::<Endianness>::parse(bytes).map_err(|e| format!("not an ELF64 file: {e}"))?;
    let endian = file.endian();
    let header = file.elf_header();
    let mut interpreter = None;
    for segment in header.program_headers(endian, bytes).map_err(|e| e.to_string())? {
        if segment.p_type(endian) == elf::PT_INTERP {
            let data = segment.data(endian, bytes).map_err(|_| "a bad PT_INTERP")?;
            let text = String::from_utf8_lossy(data).trim_end_matches('\0').to_string();
            interpreter = Some(text);
        }
    }
    let sections = header.sections(endian, bytes).map_err(|e| e.to_string())?;
    let mut needed = Vec::new();
    if let Some((entries, link)) = sections.dynamic(endian, bytes).map_err(|e| e.to_string())? {
        let strings = sections.strings(endian, bytes, link).map_err(|e| e.to_string())?;
        for entry in entries {
            if entry.tag32(endian) == Some(elf::DT_NEEDED) {
                let name = entry.string(endian, strings).map_err(|e| e.to_string())?;
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok((interpreter, needed))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_library_packages_are_fetched() {
        let depends = "libc6 (>= 2.34), libcrypt1 (>= 1:4.1.0), nginx-common (= 1.22.1-9), \
                       libssl3 (>= 3.0.0) | libssl1, iproute2, media-types | mime-support";
        assert_eq!(library_packages(depends), ["libcrypt1", "libssl3"]);
    }

    #[test]
    fn a_host_program_needs_libc_through_the_loader() {
        // The build machine's own programs are Debian's, like the guest's.
        let Ok(bytes) = fs::read("/bin/sh") else { return };
        let Ok((interpreter, needed)) = dynamic_needs(&bytes) else { return };
        assert!(interpreter.is_some_and(|i| i.contains("ld-linux")));
        assert!(needed.iter().any(|n| n.starts_with("libc.so")));
    }

    #[test]
    fn a_static_program_needs_nothing() {
        assert!(dynamic_needs(b"#!/bin/sh\n").is_err());
    }
}
