//! The experiments whose server in the VM serves a client on the host (issue M12): the VM
//! gets a virtio-net on QEMU's user network with `restrict=on`, and a forward from a free
//! port of 127.0.0.1 to the server's port; the client (`netclient`) runs on a thread of
//! the build machine while the VM runs, bounded by a count and the job's time limit. The
//! server measures and prints the result; the client's counts go to the job's output.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::runner::{self, Outcome};
use crate::netclient::{self, Proto};
use crate::qemu::Vm;
use crate::Result;

/// The client an experiment's server needs.
pub struct Load {
    /// The port the server listens on in the VM.
    pub guest_port: u16,
    /// Talks to it until stopped; a line about what it saw.
    pub client: fn(SocketAddr, &AtomicBool, Instant) -> Result<String>,
}

/// The client of experiment `name`, if it serves one.
pub fn load_of(name: &str) -> Option<Load> {
    match name {
        "tcp_conn" => Some(Load { guest_port: 80, client: netclient::connection_load }),
        "webd_filesum" => Some(Load { guest_port: 80, client: super::benchdisk::filesum_load }),
        _ => None,
    }
}

/// Boots `vm` as [`runner::boot`] does, with `load`'s forward and client.
pub fn boot_with_load(
    vm: &Vm,
    log: &Path,
    timeout: Duration,
    linux: bool,
    load: &Load,
) -> Result<Outcome> {
    let port = netclient::free_port(Proto::Tcp)?;
    let mut vm = vm.clone();
    vm.extra.extend(netclient::nic_args(&[netclient::Forward::to(
        Proto::Tcp,
        port,
        load.guest_port,
    )]));
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    std::thread::scope(|scope| {
        let client = scope.spawn(|| (load.client)(addr, &stop, deadline));
        let outcome = runner::boot(&vm, log, timeout, linux);
        stop.store(true, Ordering::Relaxed);
        match client.join() {
            Ok(Ok(line)) => println!("    client: {line}"),
            Ok(Err(why)) => println!("    client: {why}"),
            Err(_) => println!("    client: panicked"),
        }
        outcome
    })
}
