//! Corey §6.2's application cores (Figures 6, 11 and 12): each front end hands its
//! `/filesum/NAME` requests to an application core over a pair of URPC channels of its
//! own in the program's memory; that core maps the file (`/www/NAME` of the disk, read
//! once into a segment of its own with `File::map`, kept for later requests) and answers
//! with the sum of its bytes. Which core takes a request is the mode: **Random** (any
//! application core: over time every core maps every file) or **Locality** (a file always
//! goes to the same core, chosen by a hash of its name: each core maps a part of the
//! files, which stays in its cache).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
use libatoll::fs::File;
use libatoll::shared::SharedMem;
use libatoll::thread::{Builder, Thread};
use libatoll::Status;
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// Slots of each channel: requests a front end may have waiting at one core.
const SLOTS: usize = 16;
/// The longest file name a request carries (five payload words).
pub const NAME_MAX: usize = 40;
/// The message that ends a front end's part of an application core.
const STOP: u32 = 0;
/// A request's tag (the request id is in its payload).
const SUM: u32 = 1;

/// How requests are spread over the application cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Any core, at random.
    Random,
    /// A file's core, by a hash of its name.
    Locality,
}

/// What an application core answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The file's size and the sum of its bytes, and whether the core mapped the file for
    /// this request (its first on that core) rather than finding it mapped.
    Sum { size: u64, sum: u64, fresh: bool },
    /// No such file (or it could not be mapped).
    Missing,
}

/// One application core as one front end sees it: the channels to and from it, and its
/// doorbell.
struct Link {
    to: Sender<'static, SLOTS>,
    from: Receiver<'static, SLOTS>,
    bell: &'static AtomicU32,
}

/// The application cores' threads: the first front end keeps them and joins them last.
pub struct AppThreads(Vec<Thread>);

/// The application cores, as one front end sees them.
pub struct Apps {
    links: Vec<Link>,
    mode: Mode,
    /// The Random mode's generator (xorshift).
    seed: u64,
    next_id: u64,
    answers: BTreeMap<u64, Answer>,
}

/// Polls an idle application core makes before it sleeps on its doorbell (Multikernel
/// §5.2: poll, then block): a core that spins while idle takes a host CPU from the front
/// end's vCPU when the VM has more cores than the host.
const IDLE_POLLS: u32 = 2000;
/// How long an idle application core sleeps before it looks again, at most.
const IDLE_SLEEP_US: u64 = 10_000;

/// Rings `bell`: wakes its core if it sleeps.
fn ring(bell: &AtomicU32) {
    if bell.swap(1, Ordering::AcqRel) == 0 {
        let _ = libatoll::thread::wake(bell, 1);
    }
}

/// Starts an application core on each of `cores` for `front_ends` front ends: the
/// front ends' views (one each, in order) and the threads.
pub fn start(
    cores: &[usize],
    mode: Mode,
    front_ends: usize,
) -> Result<(Vec<Apps>, AppThreads), String> {
    let mut views: Vec<Apps> = (0..front_ends)
        .map(|f| Apps {
            links: Vec::new(),
            mode,
            seed: 0x9e37_79b9_7f4a_7c15 ^ f as u64,
            next_id: 1,
            answers: BTreeMap::new(),
        })
        .collect();
    let mut threads = Vec::new();
    for &core in cores {
        let bell: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let mut ends = Vec::new();
        for view in views.iter_mut() {
            let to_app: &'static ChannelMemory<SLOTS> = Box::leak(Box::new(ChannelMemory::new()));
            let to_front: &'static ChannelMemory<SLOTS> = Box::leak(Box::new(ChannelMemory::new()));
            view.links.push(Link { to: Sender::new(to_app), from: Receiver::new(to_front), bell });
            ends.push((Receiver::new(to_app), Sender::new(to_front)));
        }
        let thread = Builder::new()
            .core(core)
            .spawn(move || serve(ends, bell))
            .map_err(|e| alloc::format!("application core {core}: {e:?}"))?;
        threads.push(thread);
    }
    Ok((views, AppThreads(threads)))
}

impl Apps {
    /// Sends a request for the sum of file `name` to an application core; its id, or
    /// `None` if the name is too long or that core's channel is full (the caller answers
    /// 414 or 503).
    pub fn submit(&mut self, name: &str) -> Option<u64> {
        if name.len() > NAME_MAX || self.links.is_empty() {
            return None;
        }
        let which = match self.mode {
            Mode::Locality => name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            }),
            Mode::Random => {
                self.seed ^= self.seed << 13;
                self.seed ^= self.seed >> 7;
                self.seed ^= self.seed << 17;
                self.seed
            }
        } as usize
            % self.links.len();
        let id = self.next_id;
        let mut payload = [0u64; PAYLOAD_WORDS];
        payload[0] = id;
        payload[1] = name.len() as u64;
        let mut bytes = [0u8; NAME_MAX];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        for (w, chunk) in payload[2..].iter_mut().zip(bytes.chunks(8)) {
            *w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        }
        self.links[which].to.try_send(SUM, &payload).ok()?;
        ring(self.links[which].bell);
        self.next_id += 1;
        Some(id)
    }

    /// Takes the answers that came back.
    pub fn poll(&mut self) {
        for link in &mut self.links {
            while let Some(m) = link.from.try_recv() {
                let answer = match m.payload[1] {
                    0 => Answer::Sum {
                        size: m.payload[2],
                        sum: m.payload[3],
                        fresh: m.payload[4] != 0,
                    },
                    _ => Answer::Missing,
                };
                self.answers.insert(m.payload[0], answer);
            }
        }
    }

    /// The answer to request `id`, once it came.
    pub fn take(&mut self, id: u64) -> Option<Answer> {
        self.answers.remove(&id)
    }

    /// Ends this front end's part of every application core (a core ends when every front
    /// end has ended its part). Answers still coming are taken and dropped meanwhile, so
    /// a core waiting to send one can read the `STOP`; `threads` (the first front end's)
    /// tell whether a core ended already, so a dead one is not waited for.
    pub fn stop(mut self, threads: Option<&AppThreads>) {
        for i in 0..self.links.len() {
            loop {
                self.poll();
                let link = &mut self.links[i];
                let stopped = link.to.try_send(STOP, &[0; PAYLOAD_WORDS]).is_ok();
                ring(link.bell);
                let running = threads
                    .and_then(|t| t.0.get(i))
                    .is_none_or(|t| matches!(t.status(), Status::Idle | Status::Running));
                if stopped || !running {
                    break;
                }
                libatoll::thread::yield_now();
            }
        }
    }
}

impl AppThreads {
    /// Waits for every application core to end (once every front end stopped its part);
    /// whether all ended well.
    pub fn join(self) -> bool {
        // Every thread is joined, even after one that ended badly.
        let ended: Vec<bool> = self.0.into_iter().map(|t| t.join().ok()).collect();
        ended.into_iter().all(|ok| ok)
    }
}

/// An application core: answers each front end's requests until every front end sent
/// `STOP`, keeping each file it mapped.
fn serve(
    mut ends: Vec<(Receiver<'static, SLOTS>, Sender<'static, SLOTS>)>,
    bell: &'static AtomicU32,
) -> i32 {
    let mut mapped: BTreeMap<String, (SharedMem, u64)> = BTreeMap::new();
    let mut live = alloc::vec![true; ends.len()];
    let mut idle = 0u32;
    while live.iter().any(|&l| l) {
        let mut got = false;
        for (i, (from, to)) in ends.iter_mut().enumerate() {
            if !live[i] {
                continue;
            }
            let Some(m) = from.try_recv() else {
                from.flush_credits();
                continue;
            };
            got = true;
            if m.tag == STOP {
                live[i] = false;
                continue;
            }
            let reply = answer(&mut mapped, &m.payload);
            while to.try_send(SUM, &reply).is_err() {
                libatoll::thread::yield_now();
            }
        }
        if got {
            idle = 0;
        } else {
            idle += 1;
            if idle >= IDLE_POLLS {
                // Sleep until a front end rings (it sets the bell, then wakes): a bell rung
                // since we last cleared it makes `wait` return at once.
                let _ = libatoll::thread::wait(bell, 0, IDLE_SLEEP_US);
                bell.store(0, Ordering::Release);
                idle = 0;
            } else {
                core::hint::spin_loop();
            }
        }
    }
    for (_, (mem, _)) in mapped {
        mem.free();
    }
    0
}

/// The reply to one request's payload: `[id, 0, size, sum, fresh]`, or `[id, 1, ...]` for a
/// missing file.
fn answer(
    mapped: &mut BTreeMap<String, (SharedMem, u64)>,
    payload: &[u64; PAYLOAD_WORDS],
) -> [u64; PAYLOAD_WORDS] {
    let len = (payload[1] as usize).min(NAME_MAX);
    let mut bytes = [0u8; NAME_MAX];
    for (chunk, w) in bytes.chunks_mut(8).zip(&payload[2..]) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    let name = String::from_utf8_lossy(&bytes[..len]).into_owned();
    let mut reply = [0u64; PAYLOAD_WORDS];
    reply[0] = payload[0];
    let fresh = !mapped.contains_key(&name);
    match sum_of(mapped, &name) {
        Some((size, sum)) => (reply[2], reply[3], reply[4]) = (size, sum, fresh as u64),
        None => reply[1] = 1,
    }
    reply
}

/// The size and byte sum of `/www/NAME`, mapped on this core the first time.
fn sum_of(mapped: &mut BTreeMap<String, (SharedMem, u64)>, name: &str) -> Option<(u64, u64)> {
    if name.split('/').any(|part| part == "..") {
        return None;
    }
    if !mapped.contains_key(name) {
        let file = File::open(&alloc::format!("/www/{name}")).ok()?;
        let size = file.stat().ok()?.size;
        let mem = file.map().ok()?;
        mapped.insert(String::from(name), (mem, size));
    }
    let (mem, size) = mapped.get(name)?;
    // SAFETY: `map` mapped `mem.bytes` (at least `size`) bytes at `mem.va`, this program's
    // alone, never written after.
    let bytes = unsafe { core::slice::from_raw_parts(mem.va as *const u8, *size as usize) };
    Some((*size, workloads::filesum::sum(bytes)))
}
