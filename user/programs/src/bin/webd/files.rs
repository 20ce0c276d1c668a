//! The files `webd` serves (Corey §6.2's static pages): the disk's `/www` when the disk
//! has one (issue M13), else the initrd's files; each read once and kept, `/` is
//! `index.html` or a list of the files; and filesum on the front end.

use crate::apps::Answer;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use libatoll::fs;
use libatoll::obj::{file_open, root_share, segment_read, share_delobj, ObjRef};

/// Where the pages come from: the disk's [`WWW`] directory when the disk has one (issue
/// M13), else the initrd.
const WWW: &str = "/www";

/// The files served, each read once (the initrd's few MiB, or the disk's pages), and the
/// index page.
pub struct Files {
    read: BTreeMap<String, Vec<u8>>,
    /// Serve the disk's [`WWW`] (else the initrd's files).
    from_disk: bool,
}

impl Files {
    pub fn new() -> Files {
        let from_disk = fs::stat(WWW).is_ok_and(|st| st.kind == libatoll::abi::fs::kind::DIR);
        Files { read: BTreeMap::new(), from_disk }
    }

    /// Says where the pages come from.
    pub fn describe(&self) -> &'static str {
        if self.from_disk {
            "the disk's /www"
        } else {
            "the initrd"
        }
    }

    /// Filesum on this core: the size and byte sum of the disk's `/www/NAME`.
    pub fn sum(&mut self, name: &str) -> Option<Answer> {
        if !self.from_disk {
            return None;
        }
        let bytes = read_disk_file(name)?;
        let sum = workloads::filesum::sum(&bytes);
        Some(Answer::Sum { size: bytes.len() as u64, sum, fresh: true })
    }

    /// The bytes of `name` (`index.html`: the list of files, unless there is one).
    pub fn get(&mut self, name: &str) -> Option<&[u8]> {
        if !self.read.contains_key(name) {
            let found = if self.from_disk { read_disk_file(name) } else { read_file(name) };
            let bytes = match found {
                Some(bytes) => bytes,
                None if name == "index.html" && self.from_disk => disk_index_page(),
                None if name == "index.html" => index_page(),
                None => return None,
            };
            self.read.insert(String::from(name), bytes);
        }
        self.read.get(name).map(Vec::as_slice)
    }
}

/// The disk file `name` under [`WWW`], whole. A name with a `..` component is not served
/// (it could leave the directory).
pub fn read_disk_file(name: &str) -> Option<Vec<u8>> {
    if name.split('/').any(|part| part == "..") {
        return None;
    }
    let bytes = fs::read(&alloc::format!("{WWW}/{name}")).ok()?;
    Some(bytes)
}

/// `/` for the disk: a page listing [`WWW`]'s files, each a link.
fn disk_index_page() -> Vec<u8> {
    let mut page = String::from(
        "<!DOCTYPE html>\n<html><head><title>Atoll webd</title></head><body>\n\
         <h1>Atoll</h1>\n<p>webd (Corey &sect;6.2) on a TCP/IP stack of its own. The disk's /www:</p>\n<ul>\n",
    );
    for e in fs::read_dir(WWW).unwrap_or_default() {
        page.push_str(&alloc::format!("<li><a href=\"/{0}\">{0}</a></li>\n", e.name));
    }
    page.push_str("</ul>\n</body></html>\n");
    page.into_bytes()
}

/// The initrd file `name`, whole.
fn read_file(name: &str) -> Option<Vec<u8>> {
    let root = root_share();
    let seg = ObjRef::new(root, file_open(root, name).ok()?);
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match segment_read(seg, bytes.len() as u64, &mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n as usize]),
            Err(_) => {
                let _ = share_delobj(seg);
                return None;
            }
        }
    }
    let _ = share_delobj(seg);
    Some(bytes)
}

/// `/`: a page listing the initrd's files, each a link.
fn index_page() -> Vec<u8> {
    let mut names = vec![0u8; 4096];
    let n = libatoll::sys::file_list(&mut names).unwrap_or(0) as usize;
    let list = core::str::from_utf8(&names[..n.min(names.len())]).unwrap_or("");
    let mut page = String::from(
        "<!DOCTYPE html>\n<html><head><title>Atoll webd</title></head><body>\n\
         <h1>Atoll</h1>\n<p>webd (Corey &sect;6.2) on a TCP/IP stack of its own. The initrd's files:</p>\n<ul>\n",
    );
    for name in list.lines().filter(|l| !l.is_empty()) {
        page.push_str(&alloc::format!("<li><a href=\"/{name}\">{name}</a></li>\n"));
    }
    page.push_str("</ul>\n</body></html>\n");
    page.into_bytes()
}
