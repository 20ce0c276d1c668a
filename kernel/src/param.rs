//! The kernel's tunables: limits, reserves, time-outs, budgets and sizes, in one place,
//! by the layer that uses each (M10). Hardware facts (registers, page-table bits, vectors)
//! and protocol layouts stay beside their code; these are choices a reader may change.

// ---------------------------------------------------------------------------------------
// Memory.

/// Heap mapped when a core starts, and the smallest step by which it grows.
pub const HEAP_GROW_STEP: u64 = 256 * 1024;

/// Frames a full-step growth must leave free; below that the heap grows by what it needs.
pub const HEAP_GROW_MARGIN_FRAMES: u64 = 16;

/// Least free space at the heap's top worth giving back (and the least a trimmed heap
/// keeps above its allocations, so a small burst does not map and unmap in turn).
pub const HEAP_TRIM_MIN: u64 = 256 * 1024;

/// Free frames a core keeps when it gives blocks away (8 blocks, 2 MiB): as many as the
/// user layer keeps back from programs' objects for the kernel heap
/// ([`RESERVE_FRAMES`]), so a giver can still grow its heap and run a program
/// (`hello` needs about 400). A core of a 64 MiB VM with 16 cores has about 840 free, and
/// can still give two blocks.
pub const RETYPE_RESERVE_FRAMES: u64 = 512;

/// Kernel stack pages per core, below an unmapped guard page.
pub const STACK_PAGES: u64 = 16;

/// Stack pages for double faults and NMIs.
pub const CRITICAL_STACK_PAGES: u64 = 4;

// ---------------------------------------------------------------------------------------
// Cores and messages.

/// How long the boot core waits for application processors to come online.
pub const ONLINE_TIMEOUT_US: u64 = 5_000_000;

/// How long a send waits for room (polling its own channels meanwhile) before giving up:
/// long enough for a slow receiver (16 virtual CPUs under TCG on two host CPUs: a core
/// can take seconds to drain a channel), short enough that a faulted one is reported.
pub const SEND_TIMEOUT_US: u64 = 10_000_000;

/// Poll budget before the SKB has measured the IPI cost: long (about 1 ms at 2 GHz), so
/// that cores answer the SKB's pings while polling rather than from a halt.
pub const DEFAULT_POLL_BUDGET: u64 = 2_000_000;

/// How many times the boot measures the IPI wake-up cost C before it gives up (a busy
/// host can delay both of a measurement's pings alike, which measures nothing).
pub const IPI_COST_TRIES: usize = 4;

/// Slots in each core-to-core channel (one 64-byte message each). 32 slots and the credit
/// line fit one 4 KiB frame; credits come back every 16 messages.
pub const CHANNEL_SLOTS: usize = 32;

/// Words (8 bytes) in each core's ring of console lines (`print`): 16 KiB, about 200
/// lines, before a printing core waits for the serial port's core to drain it.
pub const PRINT_RING_WORDS: usize = 2048;

/// How long a core whose console ring is full waits for the serial port's core to drain
/// it before writing to the port itself (late output, never lost): the port's core drains
/// at every poll and tick (10 ms).
pub const PRINT_WAIT_US: u64 = 100_000;

/// Most bytes of a message sent as fragments (a remote call's reply with its error text).
pub const LONG_MESSAGE_BYTES: usize = 256;

/// The throttling period (1 ms, as the paper's clock modulation repeats).
pub const THROTTLE_PERIOD_US: u64 = 1000;

// ---------------------------------------------------------------------------------------
// Agreement.

/// How long a participant may take to acknowledge (16 vCPUs under TCG on 2 host CPUs can
/// take seconds to get to a message).
pub const TLB_TIMEOUT_US: u64 = 10_000_000;

/// How long a wait may go before it is reported on the console (it goes on waiting).
pub const TLB_REPORT_US: u64 = 100_000;

/// More pages than this and a participant flushes its whole TLB instead of each page (as
/// Linux does: one flush beats many `invlpg`s, and the entries refill on demand).
pub const TLB_MOST_PAGES: u64 = 32;

/// How long [`Shootdown::wait`] spins without `pause`: a 2-core shootdown takes about 3 µs
/// under TCG, far less on hardware.
pub const TLB_PAUSE_AFTER_US: u64 = 20;

/// How long votes and acknowledgements may take (16 vCPUs under TCG on 2 host CPUs can
/// take seconds to get to a message).
pub const TWO_PHASE_TIMEOUT_US: u64 = 10_000_000;

/// Decisions a core remembers, to answer a participant whose coordinator faulted.
pub const TWO_PHASE_REMEMBERED: usize = 512;

/// How often an uncertain participant asks again those that have not answered.
pub const TWO_PHASE_ASK_AGAIN_US: u64 = 2_000;

/// How long a giver waits for room in the receiver's channel for the frames it gave.
pub const RETYPE_SEND_LIMIT_US: u64 = 1_000_000;

/// How often a waiting giver kicks a receiver that runs user code (which reads its
/// messages only at its ticks otherwise).
pub const RETYPE_KICK_EVERY_US: u64 = 200;

/// Most attempts `obj_revoke` makes when other revocations collide with it.
pub const REVOKE_ATTEMPTS: u32 = 20;

// ---------------------------------------------------------------------------------------
// Measurements (the SKB).

/// Time limit for one measurement job.
pub const SKB_JOB_TIMEOUT_US: u64 = 60_000_000;

/// Timed windows [`compute_speed`] takes the median of.
pub const SPEED_WINDOWS: usize = 3;

/// Milliseconds in each: many periods of a slowed core's duty cycle, whose off phases
/// stretch under TCG.
pub const SPEED_WINDOW_MS: u64 = 16;

/// Shootdowns timed per protocol and size at boot (the median is kept).
pub const SHOOTDOWN_ROUNDS: usize = 9;

/// Untimed shootdowns per protocol and size before those.
pub const SHOOTDOWN_WARM_ROUNDS: usize = 4;

/// The smallest buffer the chase walks: inside any L1.
pub const CHASE_SMALLEST: u64 = 4 << 10;

/// The largest: past the LLC of the machines Atoll runs on (Table 1 of AMPS: 8 MiB L3),
/// unless this core's free memory is short (the chase takes at most an eighth of it).
pub const CHASE_LARGEST: u64 = 64 << 20;

/// The fewest loads a timed walk makes.
pub const CHASE_MIN_LOADS: usize = 1 << 16;

/// Bytes between the chase's slots: one cache line each.
pub const CHASE_STRIDE: usize = 64;

// ---------------------------------------------------------------------------------------
// Corey's objects.

/// Most live objects one core's programs may create (their metadata is kernel heap: a
/// program must not be able to exhaust it).
pub const MAX_OBJECTS_PER_CORE: usize = 16_384;

/// Free frames a core keeps back from calls that grow kernel memory (2 MiB: room for the
/// kernel heap), or a quarter of a small core's frames, but never fewer than
/// [`RESERVE_FRAMES_MIN`] (see `corey::reserve_frames`).
pub const RESERVE_FRAMES: u64 = 512;

/// The least a core keeps back (1 MiB): more than any one call's kernel allocation.
pub const RESERVE_FRAMES_MIN: u64 = 256;

/// Free frames the kernel keeps back when it loads a program (less than programs may use,
/// so a program that took objects up to the reserve does not stop the next from loading).
pub const LOAD_RESERVE_FRAMES: u64 = 64;

/// Free frames below which a soft page fault is refused (the program is stopped with a
/// page fault, reported as out of memory) rather than filled: what is left is for the
/// kernel heap, whose allocations must not fail.
pub const FAULT_RESERVE_FRAMES: u64 = 64;

/// How long a page fault that finds its core below [`FAULT_RESERVE_FRAMES`] waits for
/// memory on its way back before the thread is stopped as out of memory (50 ms: five
/// ticks). A program that just ended still has frames coming home: freed on other cores
/// and sent back by message, or free in the kernel heap until it is trimmed. The wait goes
/// on, to at most ten times as long, while the free count rises.
pub const FAULT_MEMORY_WAIT_US: u64 = 50_000;

/// Most mappings one address range holds (`ar_set_seg` past it: `NoResources`): each is
/// a node of the range's tree in the kernel heap, like an entry of a share (whose cap,
/// `objects::SHARE_MAX`, is the same).
pub const MAX_MAPPINGS: usize = 16_384;

/// Largest segment (in pages) one call may create or grow to.
pub const MAX_SEGMENT_PAGES: u64 = 1 << 20;

/// The smallest kernel-memory quota a program gets, whatever its core's memory.
pub const QUOTA_MIN_BYTES: u64 = 2 << 20;

/// The largest: 64 MiB of kernel metadata maps 4 M pages (16 GiB) of segments, or about
/// 450,000 mappings.
pub const QUOTA_MAX_BYTES: u64 = 64 << 20;

/// Most bytes `fault_in` fills ahead of a copy (a larger buffer must be touched first).
pub const FAULT_IN_MAX: u64 = 64 << 20;

// ---------------------------------------------------------------------------------------
// Threads and their scheduler.

/// Ready threads a run queue holds without growing (it shrinks back to this when empty,
/// so tests find a core's heap as they left it).
pub const QUEUE_CAPACITY: usize = 16;

/// Most live threads (thread objects) one core's programs may create.
pub const THREADS_PER_CORE_MAX: u64 = 1024;

/// Ticks between a core's unprompted load reports (it also reports when its load changes).
pub const REPORT_EVERY_TICKS: u64 = 10;

/// Ticks between balancing passes of a busy core (an idle core tries at every tick).
pub const BALANCE_EVERY_TICKS: u64 = 2;

/// Ticks a pull may stay unanswered before the puller tries again. One tick: a pull at
/// an omp barrier that misses (the thread moved or ran meanwhile) is tried again at the
/// next tick rather than four later (`crates/amps-sim`, docs/bench.md "AMPS at the
/// paper's gain": with 4, omp's barrier pulls miss whenever units are 5-13 % cheaper).
pub const PULL_PATIENCE_TICKS: u64 = 1;

/// Longest `sleep` (one minute).
pub const SLEEP_MAX_US: u64 = 60_000_000;

// ---------------------------------------------------------------------------------------
// Programs.

/// Time limit of a program started with [`run`]: 65 minutes, longer than any program's
/// own bound (`webd --seconds 3600`), so a server runs as long as it is asked to. (Ten
/// minutes cut a 10-minute soak short, `cargo xtask soak`.)
pub const DEFAULT_LIMIT_US: u64 = 3_900_000_000;

/// Most bytes of a program's output [`run_capturing`] keeps (later lines are dropped).
pub const CAPTURE_MAX: usize = 16 * 1024;

/// Bytes copied from user memory per step of a console write.
pub const WRITE_MAX: usize = 1024;

/// Most bytes one `write` call prints (it returns the count; the library loops): a call's
/// work is bounded.
pub const WRITE_CALL_MAX: u64 = 4096;

/// Longest console line a program prints before it is broken.
pub const LINE_MAX: usize = 200;
