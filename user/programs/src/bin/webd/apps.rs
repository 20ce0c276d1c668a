//! Corey §6.2's application cores (Figures 6, 11 and 12): the front end hands each
//! `/filesum/NAME` request to an application core over a pair of URPC channels in the
//! program's memory; that core maps the file (`/www/NAME` of the disk, read once into a
//! segment of its own with `File::map`, kept for later requests) and answers with the sum
//! of its bytes. Which core takes a request is the mode: **Random** (any application core:
//! over time every core maps every file) or **Locality** (a file always goes to the same
//! core, chosen by a hash of its name: each core maps a part of the files, which stays in
//! its cache).

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

/// Slots of each channel: requests a core may have waiting.
const SLOTS: usize = 16;
/// The longest file name a request carries (five payload words).
pub const NAME_MAX: usize = 40;
/// The message that ends an application core.
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

/// One application core: its thread, the channels to and from it, and its doorbell.
struct AppCore {
    thread: Thread,
    to: Sender<'static, SLOTS>,
    from: Receiver<'static, SLOTS>,
    bell: &'static AtomicU32,
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

/// The application cores, as the front end sees them.
pub struct Apps {
    cores: Vec<AppCore>,
    mode: Mode,
    /// The Random mode's generator (xorshift).
    seed: u64,
    next_id: u64,
    answers: BTreeMap<u64, Answer>,
}

impl Apps {
    /// Starts an application core on each of `cores`.
    pub fn start(cores: &[usize], mode: Mode) -> Result<Apps, String> {
        let mut started = Vec::new();
        for &core in cores {
            let to_app: &'static ChannelMemory<SLOTS> = Box::leak(Box::new(ChannelMemory::new()));
            let to_front: &'static ChannelMemory<SLOTS> = Box::leak(Box::new(ChannelMemory::new()));
            let bell: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
            let thread = Builder::new()
                .core(core)
                .spawn(move || serve(Receiver::new(to_app), Sender::new(to_front), bell))
                .map_err(|e| alloc::format!("application core {core}: {e:?}"))?;
            started.push(AppCore {
                thread,
                to: Sender::new(to_app),
                from: Receiver::new(to_front),
                bell,
            });
        }
        Ok(Apps {
            cores: started,
            mode,
            seed: 0x9e37_79b9_7f4a_7c15,
            next_id: 1,
            answers: BTreeMap::new(),
        })
    }

    /// Sends a request for the sum of file `name` to an application core; its id, or
    /// `None` if the name is too long or that core's channel is full (the caller answers
    /// 414 or 503).
    pub fn submit(&mut self, name: &str) -> Option<u64> {
        if name.len() > NAME_MAX || self.cores.is_empty() {
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
            % self.cores.len();
        let id = self.next_id;
        let mut payload = [0u64; PAYLOAD_WORDS];
        payload[0] = id;
        payload[1] = name.len() as u64;
        let mut bytes = [0u8; NAME_MAX];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        for (w, chunk) in payload[2..].iter_mut().zip(bytes.chunks(8)) {
            *w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        }
        self.cores[which].to.try_send(SUM, &payload).ok()?;
        ring(self.cores[which].bell);
        self.next_id += 1;
        Some(id)
    }

    /// Takes the answers that came back.
    pub fn poll(&mut self) {
        for core in &mut self.cores {
            while let Some(m) = core.from.try_recv() {
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

    /// Ends every application core and waits for it; whether all ended well. Answers
    /// still coming are taken and dropped meanwhile, so a core waiting to send one can
    /// read its `STOP`; a core that ended already is not waited for.
    pub fn stop(mut self) -> bool {
        for i in 0..self.cores.len() {
            loop {
                self.poll();
                let core = &mut self.cores[i];
                let stopped = core.to.try_send(STOP, &[0; PAYLOAD_WORDS]).is_ok();
                ring(core.bell);
                let running = matches!(core.thread.status(), Status::Idle | Status::Running);
                if stopped || !running {
                    break;
                }
                libatoll::thread::yield_now();
            }
        }
        // Every thread is joined, even after one that ended badly.
        let ended: Vec<bool> = self.cores.into_iter().map(|c| c.thread.join().ok()).collect();
        ended.into_iter().all(|ok| ok)
    }
}

/// An application core: answers requests until `STOP`, keeping each file it mapped.
fn serve(
    mut from: Receiver<'static, SLOTS>,
    mut to: Sender<'static, SLOTS>,
    bell: &'static AtomicU32,
) -> i32 {
    let mut mapped: BTreeMap<String, (SharedMem, u64)> = BTreeMap::new();
    let mut idle = 0u32;
    loop {
        let Some(m) = from.try_recv() else {
            from.flush_credits();
            idle += 1;
            if idle < IDLE_POLLS {
                core::hint::spin_loop();
            } else {
                // Sleep until the front end rings (it sets the bell, then wakes): a bell
                // rung since we last cleared it makes `wait` return at once.
                let _ = libatoll::thread::wait(bell, 0, IDLE_SLEEP_US);
                bell.store(0, Ordering::Release);
                idle = 0;
            }
            continue;
        };
        idle = 0;
        if m.tag == STOP {
            break;
        }
        let len = (m.payload[1] as usize).min(NAME_MAX);
        let mut bytes = [0u8; NAME_MAX];
        for (chunk, w) in bytes.chunks_mut(8).zip(&m.payload[2..]) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let name = String::from_utf8_lossy(&bytes[..len]).into_owned();
        let mut reply = [0u64; PAYLOAD_WORDS];
        reply[0] = m.payload[0];
        let fresh = !mapped.contains_key(&name);
        match sum_of(&mut mapped, &name) {
            Some((size, sum)) => (reply[2], reply[3], reply[4]) = (size, sum, fresh as u64),
            None => reply[1] = 1,
        }
        while to.try_send(SUM, &reply).is_err() {
            libatoll::thread::yield_now();
        }
    }
    for (_, (mem, _)) in mapped {
        mem.free();
    }
    0
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
    Some((*size, bytes.iter().fold(0u64, |s, &b| s.wrapping_add(b as u64))))
}
