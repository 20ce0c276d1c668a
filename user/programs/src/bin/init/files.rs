//! The shell's commands on the disk's files (`libatoll::fs`): `ls DIR`, `cat /FILE`,
//! `write`, `append`, `mkdir`, `rm`, `mv`, `df` and `sync`. Errors print as
//! `command: path: Error`, and the shell goes on.

use libatoll::abi::fs::kind;
use libatoll::abi::Error;
use libatoll::fs::{self, File};
use libatoll::println;

/// `ls DIR`: each entry of disk directory `DIR` with its size (directories end in `/`).
pub fn ls(dir: &str) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(Error::NotADirectory) => return stat_line(dir),
        Err(e) => return println!("ls: {dir}: {e:?}"),
    };
    let base = dir.trim_end_matches('/');
    for e in entries {
        let path = alloc::format!("{base}/{}", e.name);
        match fs::stat(&path) {
            Ok(st) if st.kind == kind::DIR => println!("  {}/", e.name),
            Ok(st) => println!("  {:<24} {:>10} bytes", e.name, st.size),
            Err(_) => println!("  {}", e.name),
        }
    }
}

/// One line about `path` (`ls FILE`).
fn stat_line(path: &str) {
    match fs::stat(path) {
        Ok(st) => println!("  {path:<24} {:>10} bytes", st.size),
        Err(e) => println!("ls: {path}: {e:?}"),
    }
}

/// `cat /FILE`: prints a disk file.
pub fn cat(path: &str) {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return println!("cat: {path}: {e:?}"),
    };
    let mut buf = [0u8; 4096];
    let mut ended_line = true;
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let _ = libatoll::write(&buf[..n]);
                ended_line = buf[n - 1] == b'\n';
            }
            Err(e) => {
                println!("cat: {path}: {e:?}");
                break;
            }
        }
    }
    if !ended_line {
        // The console prints whole lines: end the file's last one.
        println!();
    }
}

/// The words of `line` after the command: (first word, the rest with its spaces kept).
fn operands(line: &str) -> (Option<&str>, &str) {
    let rest = line.trim_start().split_once(char::is_whitespace).map_or("", |(_, r)| r);
    let rest = rest.trim_start();
    match rest.split_once(char::is_whitespace) {
        Some((first, text)) => (Some(first), text.trim_start()),
        None if rest.is_empty() => (None, ""),
        None => (Some(rest), ""),
    }
}

/// The other file commands, by name, with the whole `line`.
pub fn command(name: &str, line: &str) {
    let (first, rest) = operands(line);
    let result = match (name, first) {
        ("write", Some(path)) => write_text(path, rest, false),
        ("append", Some(path)) => write_text(path, rest, true),
        ("mkdir", Some(path)) => fs::mkdir(path),
        ("rm", Some(path)) => fs::remove(path),
        ("mv", Some(from)) if !rest.is_empty() => fs::rename(from, rest),
        ("sync", None) => fs::sync(),
        ("df", None) => return df(),
        _ => return usage(name),
    };
    if let Err(e) = result {
        println!("{name}: {}: {e:?}", first.unwrap_or(""));
    }
}

/// Prints how `name` is used.
fn usage(name: &str) {
    let how = match name {
        "write" => "write FILE TEXT",
        "append" => "append FILE TEXT",
        "mkdir" => "mkdir DIR",
        "rm" => "rm PATH",
        "mv" => "mv FROM TO",
        other => other,
    };
    println!("usage: {how}");
}

/// `write`/`append FILE TEXT`: the text and a newline.
fn write_text(path: &str, text: &str, append: bool) -> Result<(), Error> {
    let mut file = if append { File::append(path)? } else { File::create(path)? };
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")
}

/// `df`: the disk's blocks and inodes, used and free, and the buffer cache's size.
fn df() {
    let st = match fs::statfs() {
        Ok(st) => st,
        Err(e) => return println!("df: {e:?}"),
    };
    let kib = |blocks: u64| blocks * st.block_size / 1024;
    println!(
        "  disk: {} KiB, {} KiB used, {} KiB free ({} blocks of {} bytes)",
        kib(st.blocks),
        kib(st.blocks - st.free_blocks),
        kib(st.free_blocks),
        st.blocks,
        st.block_size
    );
    println!("  inodes: {}, {} free", st.inodes, st.free_inodes);
    println!("  buffer cache: {} blocks ({} KiB)", st.cache_blocks, kib(st.cache_blocks));
    match st.driver {
        0 => println!("  driven by: each calling core"),
        core => println!(
            "  driven by: kernel core {} ({} transfers for other cores)",
            core - 1,
            st.remote_transfers
        ),
    }
}
