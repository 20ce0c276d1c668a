//! The experiments whose server in the VM serves a client on the host (issue M12): the VM
//! gets a virtio-net on QEMU's user network with `restrict=on`, and a forward from a free
//! port of 127.0.0.1 to the server's port; the client (`netclient`, `webload`) runs on a
//! thread of the build machine while the VM runs, bounded by a count and the job's time
//! limit. Either the server measures and prints the result, and the client's counts go to
//! the job's output ([`Client::Feeds`]); or the client measures, its lines are the job's
//! results, and the VM is stopped once it is done ([`Client::Measures`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::runner::{self, Outcome};
use crate::netclient::{self, Proto};
use crate::qemu::Vm;
use crate::Result;

/// Who the client's result lines are about: the job's system, configuration and cores.
#[derive(Clone, Copy, Debug)]
pub struct Measured<'a> {
    /// `atoll` or `linux`.
    pub system: &'a str,
    /// The job's variant (its `config`), or empty.
    pub config: &'a str,
    /// The VM's cores.
    pub cores: u32,
}

/// What the host's client does.
#[derive(Clone, Copy)]
pub enum Client {
    /// Talks to the server until stopped; returns a line about what it saw. The server
    /// measures, and the VM ends by itself.
    Feeds(fn(SocketAddr, &AtomicBool, Instant) -> Result<String>),
    /// Measures the server: returns the JSON of its `RESULT` lines, after which the VM is
    /// stopped. It gives up when the flag says the VM has ended (a server that never
    /// came up).
    Measures(fn(SocketAddr, &AtomicBool, Instant, Measured) -> Result<Vec<String>>),
}

/// The client an experiment's server needs.
pub struct Load {
    /// The port the server listens on in the VM.
    pub guest_port: u16,
    /// The client.
    pub client: Client,
}

/// The client of experiment `name`, if it serves one.
pub fn load_of(name: &str) -> Option<Load> {
    let client = match name {
        "tcp_conn" => Client::Feeds(netclient::connection_load),
        "webd_filesum" => Client::Feeds(super::benchdisk::filesum_load),
        "web_static" => Client::Measures(super::webload::web_static),
        _ => return None,
    };
    Some(Load { guest_port: 80, client })
}

/// Boots `vm` as [`runner::boot`] does, with `load`'s forward and client.
pub fn boot_with_load(
    vm: &Vm,
    log: &Path,
    timeout: Duration,
    linux: bool,
    load: &Load,
    measured: Measured,
) -> Result<Outcome> {
    let port = netclient::free_port(Proto::Tcp)?;
    let mut vm = vm.clone();
    vm.extra.extend(netclient::nic_args(&[netclient::Forward::to(
        Proto::Tcp,
        port,
        load.guest_port,
    )]));
    // `stop`: the client is done (Measures) or the VM is (Feeds); `ended`: the VM is.
    let (stop, ended) = (&AtomicBool::new(false), &AtomicBool::new(false));
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    std::thread::scope(|scope| match load.client {
        Client::Feeds(client) => {
            let client = scope.spawn(move || client(addr, stop, deadline));
            let outcome = runner::boot(&vm, log, timeout, linux);
            stop.store(true, Ordering::Relaxed);
            match client.join() {
                Ok(Ok(line)) => println!("    client: {line}"),
                Ok(Err(why)) => println!("    client: {why}"),
                Err(_) => println!("    client: panicked"),
            }
            outcome
        }
        Client::Measures(client) => {
            let client = scope.spawn(move || {
                let lines = client(addr, ended, deadline, measured);
                stop.store(true, Ordering::Relaxed);
                lines
            });
            let outcome = runner::boot_until(&vm, log, timeout, linux, stop);
            // The VM may have ended first (a failed boot): the client then gives up.
            ended.store(true, Ordering::Relaxed);
            let mut outcome = outcome?;
            match client.join() {
                Ok(Ok(lines)) => outcome.results.extend(lines),
                Ok(Err(why)) => outcome.complaints.push(format!("client: {why}")),
                Err(_) => outcome.complaints.push("client: panicked".into()),
            }
            Ok(outcome)
        }
    })
}
