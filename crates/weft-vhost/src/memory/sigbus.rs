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
//! allocation. A region is registered when its table is mapped and leaves the registry
//! before it is unmapped ([`SigbusGuard`] holds the memory): the handler never maps over an
//! address that is no longer guest memory. Between a table's end and the unmapping (the data
//! path holding the memory to the end of a batch) the region is unguarded, as before.
//!
//! [`QueueFault::MemoryTruncated`]: crate::counters::QueueFault::MemoryTruncated

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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

/// True when a region of `mem` lost pages under us (a SIGBUS was handled in it).
pub(crate) fn tripped(mem: &GuestMemoryMmap) -> bool {
    if handled() == 0 {
        return false;
    }
    mem.iter().any(|region| {
        let start = region.as_ptr() as usize;
        REGISTRY.iter().any(|slot| {
            slot.read().is_some_and(|(s, _, _)| s == start) && slot.tripped.load(Ordering::Acquire)
        })
    })
}

/// The regions of one memory table, guarded while this lives (it holds the memory, so the
/// regions stay mapped until after they leave the registry).
pub(crate) struct SigbusGuard {
    slots: Vec<usize>,
    _mem: Arc<GuestMemoryMmap>,
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
    /// size). Regions that find no free slot, or a process where the handler could not be
    /// installed, stay unguarded (logged).
    pub(crate) fn register(mem: Arc<GuestMemoryMmap>, pages: &[usize]) -> SigbusGuard {
        let mut slots = Vec::new();
        if install() {
            let _serial = REGISTERING.lock().unwrap_or_else(|p| p.into_inner());
            for (region, page) in mem.iter().zip(pages) {
                // Free slots are written only here and in `drop`, both under the lock.
                let free = REGISTRY.iter().position(|s| s.read().is_none());
                let Some(index) = free else {
                    tracing::warn!("too many guest memory regions to guard against SIGBUS");
                    break;
                };
                let start = region.as_ptr() as usize;
                let end = start.saturating_add(region.size());
                if let Some(slot) = REGISTRY.get(index) {
                    slot.write(start, end, (*page).max(1));
                    slots.push(index);
                }
            }
        }
        SigbusGuard { slots, _mem: mem }
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
        // `_mem` (perhaps the last reference, unmapping) drops after this.
    }
}

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

/// The page size mappings of `file` use: a hugetlbfs file's huge page, else the base page.
pub(crate) fn page_size_of(file: &std::fs::File) -> usize {
    const BASE: usize = 4096;
    match nix::sys::statfs::fstatfs(file) {
        Ok(fs) if fs.filesystem_type() == nix::sys::statfs::HUGETLBFS_MAGIC => {
            usize::try_from(fs.block_size()).unwrap_or(BASE).max(BASE)
        }
        _ => BASE,
    }
}

#[cfg(test)]
mod tests;
