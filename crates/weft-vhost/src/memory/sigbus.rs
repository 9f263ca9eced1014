//! Guest memory that vanishes under the switch. A frontend may shrink the file behind a
//! region after we mapped it (hugetlbfs files and unsealed memfds allow it); touching a page
//! past the new end raises SIGBUS, whose default action kills the whole process: every port
//! and every guest on it.
//!
//! Here a SIGBUS handler looks the faulting address up among the mapped guest regions. In
//! one, it maps anonymous memory over the faulting page (a hugetlbfs region's whole huge
//! page), so that the access reads zeros and the thread goes on, and marks the region
//! tripped; the rings in that memory then break with [`QueueFault::MemoryTruncated`]
//! (`vring.rs`), the way a malformed ring does, and only they. Any other SIGBUS goes to the
//! disposition there was before (the process dies as it would have).
//!
//! The registry is a fixed array of atomics, so that the handler reads it without locks or
//! allocation. A region is registered when its table is mapped and leaves the registry just
//! before it is unmapped: the [`SigbusGuard`] lives inside the mapping's owner
//! ([`GuardedMemory`](super::GuardedMemory)), so it is released only when the last holder
//! lets go of the memory — the memory table, a ring, or a data-path batch still holding
//! frames lent from a table the frontend has since replaced. The handler thus never maps
//! over an address that is no longer guest memory, and never lets guest memory go
//! unguarded. A table that finds no free slot is refused.
//!
//! [`QueueFault::MemoryTruncated`]: crate::counters::QueueFault::MemoryTruncated

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use vm_memory::{GuestMemoryBackend, GuestMemoryMmap};

/// Regions guarded at once (up to 8 per memory table: 128 ports' tables at the most).
const SLOTS: usize = 1024;

/// One registered region: host addresses `[start, end)`, replaced `page` bytes at a time.
/// `seq` is a sequence lock: odd while the slot is being written, so that the handler never
/// takes a start and an end from two different registrations.
struct Slot {
    seq: AtomicU64,
    start: AtomicUsize,
    end: AtomicUsize,
    page: AtomicUsize,
    tripped: AtomicBool,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            page: AtomicUsize::new(0),
            tripped: AtomicBool::new(false),
        }
    }

    /// Sets the slot to `[start, end)` in `page`s (all zero: free). Registration only.
    fn write(&self, start: usize, end: usize, page: usize) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.tripped.store(false, Ordering::Relaxed);
        self.page.store(page, Ordering::Relaxed);
        self.start.store(start, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// `(start, end, page)` as one registration wrote them; `None` while it is being
    /// written or when free.
    fn read(&self) -> Option<(usize, usize, usize)> {
        let before = self.seq.load(Ordering::Acquire);
        if before % 2 == 1 {
            return None;
        }
        let start = self.start.load(Ordering::Relaxed);
        let end = self.end.load(Ordering::Relaxed);
        let page = self.page.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let after = self.seq.load(Ordering::Relaxed);
        (before == after && start != 0 && end > start && page > 0).then_some((start, end, page))
    }
}

static REGISTRY: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// Serializes registration (the handler only reads).
static REGISTERING: Mutex<()> = Mutex::new(());
/// SIGBUS faults handled in guest memory since the process started.
static HANDLED: AtomicU64 = AtomicU64::new(0);
/// The disposition before ours, for faults outside guest memory.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// How many SIGBUS faults in guest memory were handled so far: a data path that saw this
/// number unchanged needs not look at its regions again.
pub(crate) fn handled() -> u64 {
    HANDLED.load(Ordering::Acquire)
}

/// Why a memory table could not be guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// Every slot of the registry is taken by regions still mapped.
    #[error(
        "no free slot to guard its {regions} regions against SIGBUS ({SLOTS} regions of \
         guest memory are guarded already); the frontend may retry once other ports' \
         memory is released"
    )]
    NoFreeSlot {
        /// Regions of the refused table.
        regions: usize,
    },
    /// The SIGBUS handler could not be installed in this process.
    #[error("the SIGBUS handler for guest memory could not be installed")]
    NoHandler,
}

/// The regions of one memory table, guarded while this lives. It must be dropped before
/// the regions are unmapped ([`GuardedMemory`](super::GuardedMemory) sees to that).
pub(crate) struct SigbusGuard {
    slots: Vec<usize>,
}

impl std::fmt::Debug for SigbusGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigbusGuard")
            .field("slots", &self.slots)
            .finish()
    }
}

impl SigbusGuard {
    /// Guards the regions of `mem`, each replaced `pages[i]` bytes at a time (its page
    /// size). All of them or none: a table that finds too few free slots, or a process
    /// where the handler could not be installed, is not guarded and must not be served.
    pub(crate) fn register(mem: &GuestMemoryMmap, pages: &[usize]) -> Result<Self, GuardError> {
        if !install() {
            return Err(GuardError::NoHandler);
        }
        let regions = mem.num_regions();
        let _serial = REGISTERING.lock().unwrap_or_else(|p| p.into_inner());
        // Free slots are written only here and in `drop`, both under the lock.
        let free: Vec<usize> = REGISTRY
            .iter()
            .enumerate()
            .filter(|(_, s)| s.read().is_none())
            .map(|(i, _)| i)
            .take(regions)
            .collect();
        if free.len() < regions {
            return Err(GuardError::NoFreeSlot { regions });
        }
        for ((region, page), index) in mem.iter().zip(pages).zip(&free) {
            let start = region.as_ptr() as usize;
            let end = start.saturating_add(region.size());
            if let Some(slot) = REGISTRY.get(*index) {
                slot.write(start, end, (*page).max(1));
            }
        }
        Ok(SigbusGuard { slots: free })
    }

    /// True when a region of this table lost pages under us (a SIGBUS was handled in it).
    pub(crate) fn tripped(&self) -> bool {
        handled() != 0
            && self.slots.iter().any(|index| {
                REGISTRY
                    .get(*index)
                    .is_some_and(|slot| slot.tripped.load(Ordering::Acquire))
            })
    }
}

impl Drop for SigbusGuard {
    fn drop(&mut self) {
        let _serial = REGISTERING.lock().unwrap_or_else(|p| p.into_inner());
        for index in &self.slots {
            if let Some(slot) = REGISTRY.get(*index) {
                slot.write(0, 0, 0);
            }
        }
    }
}

/// Regions guarded now (tests).
#[cfg(test)]
pub(crate) fn guarded_regions() -> usize {
    REGISTRY.iter().filter(|s| s.read().is_some()).count()
}

/// Slots of the registry.
#[cfg(test)]
pub(crate) const GUARD_SLOTS: usize = SLOTS;

/// Installs the handler once; false if it could not be.
fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        // SAFETY: sigaction is given valid pointers: a zeroed struct to read the current
        // action into, then ours, fully initialised (handler, empty mask, flags).
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return false;
            }
            // Set before the handler can run, so it always finds it.
            let _ = PREVIOUS.set(previous);
            let mut action: libc::sigaction = std::mem::zeroed();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_sigbus;
            action.sa_sigaction = handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let ok = libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0;
            if !ok {
                tracing::warn!("cannot install the SIGBUS handler for guest memory");
            }
            ok
        }
    })
}

/// The SIGBUS handler (see the module documentation). Async-signal-safe: atomics, `mmap`
/// and `sigaction` only.
extern "C" fn on_sigbus(_signal: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a handler installed with SA_SIGINFO;
    // `si_addr` is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    for slot in &REGISTRY {
        let Some((start, end, page)) = slot.read().filter(|(s, e, _)| (*s..*e).contains(&addr))
        else {
            continue;
        };
        let at = start + (addr - start) / page * page;
        let len = page.min(end - at);
        // SAFETY: `[at, at + len)` lies inside a guest region that is mapped (registered
        // regions leave the registry before they are unmapped) and that only guest memory
        // accessors use: replacing its pages with anonymous ones changes what those reads
        // return (zeros), never memory of ours. `at` is aligned to the region's page size
        // (regions start page aligned), as a hugetlbfs mapping requires.
        let mapped = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            break;
        }
        slot.tripped.store(true, Ordering::Release);
        HANDLED.fetch_add(1, Ordering::AcqRel);
        return;
    }
    // Not guest memory (or the page could not be replaced): the previous disposition takes
    // the fault when the access repeats on return.
    let previous = PREVIOUS.get().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `previous` is the action read from sigaction itself, or null; with null the
    // default action is restored instead.
    unsafe {
        if previous.is_null() {
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
        } else {
            libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests;
