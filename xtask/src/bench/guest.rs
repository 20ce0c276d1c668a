//! The Linux guest of `make bench`, prepared once and cached in `target/linux-guest/`:
//! Debian's `linux-image-amd64` (followed to the versioned image package it depends on) and
//! `busybox-static`, fetched with `apt-get download` and unpacked with `dpkg -x`, so the
//! host system is not changed. The vmlinux inside the bzImage is extracted (its payload is
//! XZ) and booted through PVH like Atoll, which is faster than the bzImage under TCG; if
//! that fails the bzImage is booted. The initramfs (cpio newc) holds busybox,
//! `atoll-bench-linux`, the kernel package's virtio network modules, and an `/init` that
//! brings up the network device if the VM has one (10.0.2.15/24, as Atoll's servers),
//! runs the benchmark named by `bench=` on the kernel command line, prints its lines on
//! the serial console and powers off.
//! `rm -rf target/linux-guest` fetches everything again.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{elf, guest_servers};
use crate::deps::find_program;
use crate::{build, Result};

/// The Debian packages.
const KERNEL_META: &str = "linux-image-amd64";
const BUSYBOX: &str = "busybox-static";

/// Printed by `/init` after the benchmark, with its exit status.
pub const DONE_MARKER: &str = "BENCH DONE status=";

/// Starts a line that states one condition of the run: `CONDITION <name> <value>` (the
/// guest's `/init` prints its huge-page policy and its speculative-execution mitigations).
pub const CONDITION_MARKER: &str = "CONDITION ";

/// The guest's kernel command line always turns transparent huge pages off, so that a
/// first touch faults in one 4 KiB page on Linux as on Atoll (which has no huge user pages).
const THP: &str = "transparent_hugepage=never";

/// `/init`: mount the pseudo file systems, run the benchmark, say so, power off.
const INIT: &str = "#!/bin/busybox sh
# /init of the Linux guest of `make bench` (written by xtask/src/bench/guest.rs).
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo \"LINUX READY cpus=$(/bin/busybox nproc) kernel=$(/bin/busybox uname -r)\"
t=/sys/kernel/mm/transparent_hugepage/enabled
[ -r $t ] && echo \"CONDITION thp $(/bin/busybox cat $t)\"
for v in /sys/devices/system/cpu/vulnerabilities/meltdown /sys/devices/system/cpu/vulnerabilities/spectre_v2; do
    [ -r $v ] && echo \"CONDITION ${v##*/} $(/bin/busybox cat $v)\"
done
# The loopback interface (`loopback`), and the network device (issue M12: `tcp_conn`) when
# the VM has one: the virtio modules in dependency order, then QEMU's user-network address,
# as Atoll's servers take. The block device and ext2 (issue M13: `file_read`): the bench
# image, when the VM has one, mounted at /mnt.
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net virtio_blk crc16 mbcache jbd2 crc32c_generic ext4; do
    [ -s /lib/guest/$m.ko ] && /bin/busybox insmod /lib/guest/$m.ko
done
if [ -b /dev/vda ]; then
    /bin/busybox mount -t ext2 /dev/vda /mnt && echo \"disk: /dev/vda ext2 on /mnt\"
fi
/bin/busybox ip link set lo up
if [ -d /sys/class/net/eth0 ]; then
    /bin/busybox ip link set eth0 up
    /bin/busybox ip addr add 10.0.2.15/24 dev eth0
    echo \"net: eth0 10.0.2.15/24\"
fi
/bin/atoll-bench-linux --cmdline
echo \"BENCH DONE status=$?\"
/bin/busybox poweroff -f
";

/// A prepared guest.
#[derive(Clone, Debug)]
pub struct Guest {
    /// What QEMU boots (`-kernel`): the extracted vmlinux, or the bzImage.
    pub kernel: PathBuf,
    /// The initramfs (`-initrd`).
    pub initramfs: PathBuf,
    /// For the report: package, version and how it boots.
    pub describe: String,
    /// The kernel's tick rate (`CONFIG_HZ` of its build configuration), if known.
    pub hz: Option<u64>,
}

/// How the guest's speculative-execution mitigations are set: Atoll has none, so the
/// headline ratio is against `Off`; `AsBooted` (the distribution's defaults) is shown beside
/// it for experiments whose cost is kernel entry (issue 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mitigations {
    /// `mitigations=off` on the command line.
    Off,
    /// The kernel's defaults: the command line does not choose.
    AsBooted,
}

impl Mitigations {
    /// The `mitigations` field of the guest's records.
    pub fn name(self) -> &'static str {
        match self {
            Mitigations::Off => "off",
            Mitigations::AsBooted => "as-booted",
        }
    }
}

impl Guest {
    /// The kernel command line that runs `bench` (`atoll-bench-linux` arguments,
    /// comma-separated): serial console, quiet, reboot (and so exit) on a panic, no
    /// transparent huge pages, and the mitigations asked for.
    pub fn cmdline(&self, bench: &str, mitigations: Mitigations) -> String {
        let choice = match mitigations {
            Mitigations::Off => " mitigations=off",
            Mitigations::AsBooted => "",
        };
        format!("console=ttyS0 quiet panic=-1 {THP}{choice} bench={bench}")
    }
}

/// `CONFIG_HZ` from a kernel build configuration (`/boot/config-*`).
pub fn config_hz(config: &str) -> Option<u64> {
    config.lines().find_map(|l| l.strip_prefix("CONFIG_HZ=")).and_then(|v| v.trim().parse().ok())
}

/// Fetches and unpacks what is missing, then writes the initramfs around `bench_binary`;
/// with `web_servers`, Debian's lighttpd and nginx too (`web_static`, [`guest_servers`]),
/// which other experiments leave out so their guest boots as it always did.
pub fn prepare(bench_binary: &Path, web_servers: bool) -> Result<Guest> {
    let dir = build::target_dir().join("linux-guest");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (kernel, describe) = kernel(&dir)?;
    let busybox = busybox(&dir)?;
    let initramfs = dir.join("initramfs.cpio");
    let servers = if web_servers { guest_servers::files(&dir)? } else { Vec::new() };
    write_initramfs(&initramfs, &busybox, bench_binary, &dir.join("modules"), &servers)?;
    let hz = fs::read_to_string(dir.join("config")).ok().and_then(|c| config_hz(&c));
    Ok(Guest { kernel, initramfs, describe, hz })
}

/// The cached kernel, fetched first if needed: (path to boot, description).
fn kernel(dir: &Path) -> Result<(PathBuf, String)> {
    let (vmlinux, bzimage, about) =
        (dir.join("vmlinux"), dir.join("bzImage"), dir.join("kernel.txt"));
    let config = dir.join("config");
    let modules = dir.join("modules");
    let have_modules = modules.join("virtio_blk.ko").is_file();
    if !about.is_file()
        || !config.is_file()
        || !(vmlinux.is_file() || bzimage.is_file())
        || !have_modules
    {
        let work = fresh_dir(&dir.join("download"))?;
        let meta = apt_download(&work, KERNEL_META)?;
        let package = versioned_image(&dpkg_field(&meta, "Depends")?)
            .ok_or_else(|| format!("{KERNEL_META} depends on no linux-image package"))?;
        eprintln!("bench: fetching {package} (once; cached in {})", dir.display());
        let deb = apt_download(&work, &package)?;
        let version = dpkg_field(&deb, "Version")?;
        let root = unpack(&deb, &work.join("root"))?;
        let boot = root.join("boot");
        let image = fs::read_dir(&boot)
            .map_err(|e| format!("{}: {e}", boot.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
            .ok_or_else(|| format!("{package} has no /boot/vmlinuz-*"))?;
        // The build configuration gives the tick rate; without one (an empty file, so it is
        // not fetched again) Atoll keeps its own tick and the records show both rates.
        let build_config = fs::read_dir(&boot)
            .map_err(|e| format!("{}: {e}", boot.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("config-")));
        let text = build_config.and_then(|p| fs::read(p).ok()).unwrap_or_default();
        fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
        copy_modules(&root, &modules)?;
        let bytes = fs::read(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        fs::write(&bzimage, &bytes).map_err(|e| format!("{}: {e}", bzimage.display()))?;
        let _ = fs::remove_file(&vmlinux);
        match extract_vmlinux(&bytes) {
            Ok(elf) => {
                fs::write(&vmlinux, elf).map_err(|e| format!("{}: {e}", vmlinux.display()))?
            }
            Err(why) => {
                eprintln!("bench: booting the bzImage: cannot extract a PVH vmlinux: {why}")
            }
        }
        fs::write(&about, format!("{package} {version}\n"))
            .map_err(|e| format!("{}: {e}", about.display()))?;
        let _ = fs::remove_dir_all(&work);
    }
    let name = fs::read_to_string(&about).unwrap_or_default().trim().to_string();
    if vmlinux.is_file() {
        Ok((vmlinux, format!("Debian {name}, vmlinux booted through PVH")))
    } else {
        Ok((bzimage, format!("Debian {name}, bzImage")))
    }
}

/// The modules the guest's virtio network and block devices and ext2 (through the ext4
/// driver) need (Debian builds them as modules), in the order `/init` loads them; those
/// the kernel has built in are simply absent.
const GUEST_MODULES: [&str; 14] = [
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
    "virtio_blk",
    "crc16",
    "mbcache",
    "jbd2",
    "crc32c_generic",
    "ext4",
];

/// Copies [`GUEST_MODULES`] from the unpacked kernel package `root` (`lib/modules/*/`) to
/// `to`, flat.
fn copy_modules(root: &Path, to: &Path) -> Result {
    fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let mut stack = vec![root.join("lib").join("modules")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let Some(stem) = name.as_deref().and_then(|n| n.strip_suffix(".ko")) else { continue };
            if GUEST_MODULES.contains(&stem) {
                let target = to.join(format!("{stem}.ko"));
                fs::copy(&path, &target).map_err(|e| format!("{}: {e}", target.display()))?;
            }
        }
    }
    if !to.join("virtio_blk.ko").is_file() {
        // Built in, or packaged otherwise: mark it so the package is not fetched again
        // (an empty module is never loaded).
        fs::write(to.join("virtio_blk.ko"), b"").map_err(|e| format!("{}: {e}", to.display()))?;
    }
    Ok(())
}

/// The cached static busybox, fetched first if needed.
fn busybox(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("busybox");
    if !path.is_file() {
        let work = fresh_dir(&dir.join("download-busybox"))?;
        let deb = apt_download(&work, BUSYBOX)?;
        let root = unpack(&deb, &work.join("root"))?;
        let found =
            ["bin/busybox", "usr/bin/busybox"].iter().map(|p| root.join(p)).find(|p| p.is_file());
        let found = found.ok_or_else(|| format!("{BUSYBOX} has no busybox binary"))?;
        fs::copy(&found, &path).map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = fs::remove_dir_all(&work);
    }
    Ok(path)
}

/// Writes the initramfs: `/init`, `/bin/busybox`, `/bin/atoll-bench-linux`, the guest's
/// modules found in `modules` (as `/lib/guest/NAME.ko`), the mount points and `/tmp`, and
/// `more` files (each in directories made for it).
/// (`/dev/console` comes from the kernel's built-in initramfs.)
fn write_initramfs(
    path: &Path,
    busybox: &Path,
    bench: &Path,
    modules: &Path,
    more: &[guest_servers::Entry],
) -> Result {
    let read = |p: &Path| fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let (busybox, bench) = (read(busybox)?, read(bench)?);
    const DIR: u32 = 0o040_755;
    const EXE: u32 = 0o100_755;
    const FILE: u32 = 0o100_644;
    let mut names = Vec::new();
    let mut files = Vec::new();
    for m in GUEST_MODULES {
        let bytes = fs::read(modules.join(format!("{m}.ko"))).unwrap_or_default();
        if !bytes.is_empty() {
            names.push(format!("lib/guest/{m}.ko"));
            files.push(bytes);
        }
    }
    let mut entries: Vec<(&str, u32, &[u8])> = vec![
        ("bin", DIR, &[]),
        ("dev", DIR, &[]),
        ("proc", DIR, &[]),
        ("sys", DIR, &[]),
        ("mnt", DIR, &[]),
        ("lib", DIR, &[]),
        ("lib/guest", DIR, &[]),
        ("tmp", 0o041_777, &[]),
        ("bin/busybox", EXE, &busybox),
        ("bin/atoll-bench-linux", EXE, &bench),
        ("init", EXE, INIT.as_bytes()),
    ];
    for (name, bytes) in names.iter().zip(&files) {
        entries.push((name, FILE, bytes));
    }
    let dirs = parent_dirs(more.iter().map(|(name, _, _)| name.as_str()));
    for dir in &dirs {
        if !entries.iter().any(|(name, _, _)| name == dir) {
            entries.push((dir, DIR, &[]));
        }
    }
    for (name, mode, bytes) in more {
        entries.push((name, *mode, bytes));
    }
    fs::write(path, cpio::write_archive(&entries)).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every directory above `paths`, each once, parents first.
fn parent_dirs<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    for path in paths {
        let mut at = 0;
        while let Some(slash) = path[at..].find('/') {
            let dir = &path[..at + slash];
            if !dirs.iter().any(|d| d == dir) {
                dirs.push(dir.to_string());
            }
            at += slash + 1;
        }
    }
    dirs
}

/// Decompresses the vmlinux ELF from a bzImage whose payload is XZ, and checks that it has
/// the PVH entry note.
pub fn extract_vmlinux(bzimage: &[u8]) -> Result<Vec<u8>> {
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    let at = bzimage
        .windows(XZ_MAGIC.len())
        .position(|w| w == XZ_MAGIC)
        .ok_or("the payload is not XZ-compressed")?;
    let mut out = Vec::new();
    xz4rust::XzReader::new(std::io::Cursor::new(bzimage[at..].to_vec()))
        .read_to_end(&mut out)
        .map_err(|e| format!("XZ: {e}"))?;
    if !elf::has_pvh_note(&out) {
        return Err("the vmlinux has no PVH entry note".into());
    }
    Ok(out)
}

/// The versioned image package in a `Depends` field, e.g. `linux-image-6.1.0-56-amd64`
/// from `linux-image-6.1.0-56-amd64 (= 6.1.192-2)`.
pub fn versioned_image(depends: &str) -> Option<String> {
    depends
        .split([',', '|'])
        .filter_map(|alt| alt.split_whitespace().next())
        .find(|name| name.starts_with("linux-image-") && *name != KERNEL_META)
        .map(String::from)
}

/// An empty directory at `path`.
pub(super) fn fresh_dir(path: &Path) -> Result<PathBuf> {
    let _ = fs::remove_dir_all(path);
    fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

/// `apt-get download PACKAGE` into `dir`; returns the .deb. If the package lists are
/// missing or stale and we are root, runs `apt-get update` once and tries again.
pub(super) fn apt_download(dir: &Path, package: &str) -> Result<PathBuf> {
    if find_program("apt-get").is_none() || find_program("dpkg-deb").is_none() {
        return Err(format!(
            "the Linux guest needs apt-get and dpkg (a Debian-like host) to fetch {package}"
        ));
    }
    let attempt =
        || Command::new("apt-get").args(["download", "-q", package]).current_dir(dir).output();
    let mut output = attempt().map_err(|e| format!("cannot run apt-get: {e}"))?;
    if !output.status.success() && is_root() {
        eprintln!("bench: apt-get download {package} failed; running apt-get update");
        let _ = Command::new("apt-get").args(["update", "-q"]).status();
        output = attempt().map_err(|e| format!("cannot run apt-get: {e}"))?;
    }
    if !output.status.success() {
        return Err(format!(
            "`apt-get download {package}` failed; run `sudo apt-get update` and try again:\n{}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let prefix = format!("{package}_");
    fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.starts_with(&prefix) && name.ends_with(".deb")
        })
        .ok_or_else(|| format!("apt-get download {package} left no .deb in {}", dir.display()))
}

/// One control field of a .deb (`dpkg-deb -f`).
pub(super) fn dpkg_field(deb: &Path, field: &str) -> Result<String> {
    let out = Command::new("dpkg-deb")
        .arg("-f")
        .arg(deb)
        .arg(field)
        .output()
        .map_err(|e| format!("cannot run dpkg-deb: {e}"))?;
    if !out.status.success() {
        return Err(format!("dpkg-deb -f {} {field} failed", deb.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `dpkg -x DEB DIR`: unpacks the files without installing anything.
pub(super) fn unpack(deb: &Path, dir: &Path) -> Result<PathBuf> {
    let status = Command::new("dpkg")
        .arg("-x")
        .arg(deb)
        .arg(dir)
        .status()
        .map_err(|e| format!("cannot run dpkg: {e}"))?;
    if !status.success() {
        return Err(format!("dpkg -x {} failed ({status})", deb.display()));
    }
    Ok(dir.to_path_buf())
}

/// True when our effective user id is 0.
fn is_root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find(|l| l.starts_with("Uid:"));
    uid.and_then(|l| l.split_whitespace().nth(2)) == Some("0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_before_their_files_once_each() {
        let dirs = parent_dirs(["usr/sbin/nginx", "usr/lib/x", "etc/passwd", "top"].into_iter());
        assert_eq!(dirs, ["usr", "usr/sbin", "usr/lib", "etc"]);
    }

    #[test]
    fn the_versioned_image_package_is_found() {
        let depends = "linux-image-6.1.0-56-amd64 (= 6.1.192-2)";
        assert_eq!(versioned_image(depends).as_deref(), Some("linux-image-6.1.0-56-amd64"));
        let alternatives = "kmod, linux-image-6.12.9-amd64 (= 6.12.9-1) | linux-image-amd64";
        assert_eq!(versioned_image(alternatives).as_deref(), Some("linux-image-6.12.9-amd64"));
        assert_eq!(versioned_image("kmod, linux-base"), None);
    }

    #[test]
    fn the_init_script_runs_the_benchmark_and_powers_off() {
        assert!(INIT.starts_with("#!/bin/busybox sh\n"));
        assert!(INIT.contains("atoll-bench-linux --cmdline"));
        assert!(INIT.contains(DONE_MARKER));
        assert!(INIT.trim_end().ends_with("poweroff -f"));
    }

    #[test]
    fn the_command_line_states_huge_pages_and_mitigations() {
        let guest = Guest {
            kernel: PathBuf::new(),
            initramfs: PathBuf::new(),
            describe: String::new(),
            hz: Some(250),
        };
        let off = guest.cmdline("nullsys,21", Mitigations::Off);
        assert!(off.contains("transparent_hugepage=never") && off.contains(" mitigations=off "));
        assert!(off.ends_with(" bench=nullsys,21"));
        let booted = guest.cmdline("nullsys,21", Mitigations::AsBooted);
        assert!(booted.contains("transparent_hugepage=never") && !booted.contains("mitigations"));
        assert!(INIT.contains("CONDITION thp") && INIT.contains("CONDITION ${v##*/}"));
    }

    #[test]
    fn the_tick_rate_comes_from_the_build_configuration() {
        let config =
            "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_HZ_PERIODIC=n\n";
        assert_eq!(config_hz(config), Some(250));
        assert_eq!(config_hz("CONFIG_HZ_1000=y\n"), None);
    }

    #[test]
    fn a_bzimage_without_xz_is_refused() {
        assert!(extract_vmlinux(b"MZ.....HdrS no payload").is_err());
    }
}
