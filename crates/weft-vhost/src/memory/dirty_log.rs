//! The dirty page log of a live migration (vhost-user "Migration", `VHOST_F_LOG_ALL` with
//! `VHOST_USER_PROTOCOL_F_LOG_SHMFD`): a bitmap in shared memory the frontend hands over
//! with `SET_LOG_BASE`, one bit per 4 KiB page of guest physical memory. While the
//! frontend has logging on, every page the port writes (frames and headers in receive
//! buffers, used rings) gets its bit set with an atomic OR after the write, so that the
//! frontend, which fetches and clears the bits concurrently, copies the page again.
//!
//! The bitmap is the frontend's memory: it is mapped, never referenced as `&[u8]`, and
//! each byte touched only through an atomic reference. The file is admitted as guest
//! memory is (a memfd, or a file on tmpfs or hugetlbfs, long enough) and guarded against
//! being shrunk under us like guest memory (`sigbus.rs`).

use std::fs::File;
use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use vm_memory::{
    FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestRegionMmap, MmapRegion,
    VolatileMemory,
};

use super::admit::admit_file;
use super::sigbus::SigbusGuard;
use super::{GuardedMemory, MemoryTableError, RegionDesc};

/// Guest memory each bit of the log stands for (`VHOST_LOG_PAGE`).
pub const LOG_PAGE: u64 = 4096;

/// The most bytes of log a port maps: enough for guest physical addresses up to twice
/// `max_guest_memory` (a VM's RAM above 4 GiB starts past the PCI hole, so its highest
/// address exceeds its size), and at least 1 MiB (32 GiB of addresses).
pub fn max_log_bytes(max_guest_memory: u64) -> u64 {
    max_guest_memory
        .saturating_mul(2)
        .div_ceil(LOG_PAGE * 8)
        .max(1 << 20)
}

/// Why a log (`SET_LOG_BASE`) or a logging request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogRefusal {
    /// A log of size zero, or larger than the port's guest memory limit needs.
    BadSize,
    /// A file shorter than the offset and size given.
    FileTooShort,
    /// A file that is not a memfd, nor a regular file on tmpfs or hugetlbfs.
    NotSharedMemory,
    /// The file could not be inspected or mapped.
    Map,
    /// No free slot of the SIGBUS guard.
    Unguarded,
    /// `SET_LOG_FD` with something other than an eventfd, or a malformed message.
    BadLogFd,
    /// `SET_VRING_ADDR` asking for used-ring logging without `VHOST_F_LOG_ALL` offered, or
    /// a log address outside guest memory.
    BadRingLog,
    /// A malformed `SEND_RARP`, or one without the `RARP` protocol feature.
    BadAnnounce,
    /// A `SEND_RARP` sooner than 10 ms after the last one (ignored, the frontend kept).
    AnnounceTooFast,
}

impl LogRefusal {
    /// Every reason, in counter order.
    pub const ALL: [LogRefusal; 9] = [
        LogRefusal::BadSize,
        LogRefusal::FileTooShort,
        LogRefusal::NotSharedMemory,
        LogRefusal::Map,
        LogRefusal::Unguarded,
        LogRefusal::BadLogFd,
        LogRefusal::BadRingLog,
        LogRefusal::BadAnnounce,
        LogRefusal::AnnounceTooFast,
    ];

    /// The counter index.
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }

    /// The reason's name in counters (`snake_case`).
    pub fn counter_name(self) -> &'static str {
        match self {
            LogRefusal::BadSize => "log_bad_size",
            LogRefusal::FileTooShort => "log_file_too_short",
            LogRefusal::NotSharedMemory => "log_not_shared_memory",
            LogRefusal::Map => "log_map_failed",
            LogRefusal::Unguarded => "log_unguarded",
            LogRefusal::BadLogFd => "log_bad_fd",
            LogRefusal::BadRingLog => "log_bad_ring_address",
            LogRefusal::BadAnnounce => "bad_announce",
            LogRefusal::AnnounceTooFast => "announce_too_fast",
        }
    }
}

/// One port's refused logging requests by [`LogRefusal::index`].
pub(crate) type LogRefusals = super::refusals::Refusals<{ LogRefusal::ALL.len() }>;

/// Why a log could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum DirtyLogError {
    /// Size zero, or beyond what the port's guest memory limit needs.
    #[error(
        "a dirty log of {size} bytes is refused: it must be 1..={limit} bytes (one bit per \
         4 KiB page of guest memory); raise the port's max_guest_memory for a larger VM"
    )]
    BadSize {
        /// The size the frontend gave.
        size: u64,
        /// The most this port maps.
        limit: u64,
    },
    /// The file is not admitted (what guest memory must be).
    #[error("dirty log refused: {0}")]
    File(MemoryTableError),
}

impl DirtyLogError {
    /// The reason, as counted.
    pub fn reason(&self) -> LogRefusal {
        match self {
            DirtyLogError::BadSize { .. } => LogRefusal::BadSize,
            DirtyLogError::File(e) => match e.reason() {
                super::MemoryRefusal::FileTooShort => LogRefusal::FileTooShort,
                super::MemoryRefusal::NotSharedMemory => LogRefusal::NotSharedMemory,
                super::MemoryRefusal::Unguarded => LogRefusal::Unguarded,
                _ => LogRefusal::Map,
            },
        }
    }
}

/// A mapped dirty page log.
#[derive(Debug)]
pub(crate) struct DirtyLog {
    /// One region at address 0: the mapping from the page below the log's offset.
    map: GuardedMemory,
    /// Where the bitmap starts in the mapping (the offset's distance from its page).
    start: usize,
    /// Bytes of bitmap.
    len: usize,
}

impl DirtyLog {
    /// Maps `size` bytes of `file` from `offset` (the `SET_LOG_BASE` payload), after
    /// admitting the file as guest memory is admitted; at most `limit` bytes.
    pub(crate) fn map(
        file: File,
        size: u64,
        offset: u64,
        limit: u64,
    ) -> Result<DirtyLog, DirtyLogError> {
        if size == 0 || size > limit {
            return Err(DirtyLogError::BadSize { size, limit });
        }
        let file_err = DirtyLogError::File;
        // Mapped from the page holding `offset`: mmap wants a page-aligned file offset, and
        // QEMU gives 0, but the specification does not promise it.
        let page_start = offset - offset % LOG_PAGE;
        let start = offset - page_start;
        let mapped = size
            .checked_add(start)
            .filter(|m| offset.checked_add(size).is_some() && i64::try_from(*m).is_ok())
            .ok_or(DirtyLogError::BadSize { size, limit })?;
        let desc = RegionDesc {
            guest_phys_addr: 0,
            size: mapped,
            user_addr: 0,
            mmap_offset: page_start,
        };
        let admitted = admit_file(0, &desc, &file).map_err(file_err)?;
        let (Ok(map_len), Ok(start), Ok(len)) = (
            usize::try_from(mapped),
            usize::try_from(start),
            usize::try_from(size),
        ) else {
            return Err(DirtyLogError::BadSize { size, limit });
        };
        let region = MmapRegion::<()>::from_file(FileOffset::new(file, page_start), map_len)
            .map_err(|e| {
                file_err(MemoryTableError::Map {
                    index: 0,
                    message: e.to_string(),
                })
            })?;
        let region = GuestRegionMmap::new(region, GuestAddress(0))
            .ok_or(file_err(MemoryTableError::BadRegion(0)))?;
        let mem = GuestMemoryMmap::from_regions(vec![region])
            .map_err(|_| file_err(MemoryTableError::BadRegion(0)))?;
        let guard = SigbusGuard::register(&mem, &[admitted.page])
            .map_err(|e| file_err(MemoryTableError::Unguarded(e)))?;
        Ok(DirtyLog {
            map: GuardedMemory::guarded(mem, guard),
            start,
            len,
        })
    }

    /// A log over memory the caller mapped (tests, fuzzing).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn from_mapped(mem: GuestMemoryMmap, len: usize) -> DirtyLog {
        DirtyLog {
            map: GuardedMemory::unguarded(mem),
            start: 0,
            len,
        }
    }

    /// Bytes of bitmap (it covers `8 × LOG_PAGE` bytes of guest memory each).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Marks the pages of `[gpa, gpa + len)` dirty, after the bytes were written. Returns
    /// the pages whose bit this set (they were clean) and the pages beyond the log (not
    /// marked: the frontend's log does not cover them).
    pub(crate) fn mark(&self, gpa: u64, len: u64) -> Marked {
        let mut marked = Marked::default();
        if len == 0 {
            return marked;
        }
        let Some(last) = gpa.checked_add(len - 1) else {
            marked.beyond = 1;
            return marked;
        };
        let Some(region) = self.map.memory().iter().next() else {
            return marked;
        };
        // The guest's bytes become visible before the bit that tells the frontend to copy
        // them (it reads and clears the bit, then copies the page).
        fence(Ordering::Release);
        for page in gpa / LOG_PAGE..=last / LOG_PAGE {
            let byte = usize::try_from(page / 8).unwrap_or(usize::MAX);
            if byte >= self.len {
                marked.beyond += (last / LOG_PAGE) - page + 1;
                break;
            }
            let bit = 1u8 << (page % 8);
            match region.get_atomic_ref::<AtomicU8>(self.start + byte) {
                Ok(cell) if cell.fetch_or(bit, Ordering::Relaxed) & bit == 0 => marked.newly += 1,
                Ok(_) => {}
                Err(_) => marked.beyond += 1,
            }
        }
        marked
    }
}

/// What [`DirtyLog::mark`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Marked {
    /// Pages whose bit was clear and is now set.
    pub(crate) newly: u64,
    /// Pages past the end of the log.
    pub(crate) beyond: u64,
}

/// What one port's rings logged, over every log it was given.
#[derive(Debug, Default)]
pub(crate) struct LogCounters {
    /// Pages whose bit a write of ours set.
    pub(crate) pages: AtomicU64,
    /// Pages written beyond the end of the log (not marked).
    pub(crate) beyond: AtomicU64,
}

/// Dirty logging as one ring does it: the port's log while the frontend has logging on
/// (`VHOST_F_LOG_ALL`), and where the ring's used ring is logged.
#[derive(Debug, Clone)]
pub(crate) struct RingLog {
    pub(crate) log: Arc<DirtyLog>,
    /// The used ring's guest physical address for logging (`SET_VRING_ADDR`'s
    /// `log_guest_addr` with `VHOST_VRING_F_LOG`); `None`: its writes are not logged.
    pub(crate) used: Option<u64>,
    pub(crate) counters: Arc<LogCounters>,
}

impl RingLog {
    /// `len` bytes of guest memory at `gpa` were written.
    pub(crate) fn written(&self, gpa: u64, len: u64) {
        let m = self.log.mark(gpa, len);
        if m.newly > 0 {
            self.counters.pages.fetch_add(m.newly, Ordering::Relaxed);
        }
        if m.beyond > 0 {
            self.counters.beyond.fetch_add(m.beyond, Ordering::Relaxed);
        }
    }

    /// `len` bytes at `offset` into the used ring were written.
    pub(crate) fn used_written(&self, offset: u64, len: u64) {
        if let Some(at) = self.used.and_then(|u| u.checked_add(offset)) {
            self.written(at, len);
        }
    }
}

/// The pages whose bit is set in `bitmap` (a log's bytes), in order (tests).
#[cfg(test)]
pub(crate) fn marked_pages(bitmap: &[u8]) -> Vec<u64> {
    let mut pages = Vec::new();
    for (i, byte) in bitmap.iter().enumerate().filter(|(_, b)| **b != 0) {
        let base = 8 * i as u64;
        pages.extend(
            (0..8)
                .filter(|bit| byte & (1 << bit) != 0)
                .map(|bit| base + bit),
        );
    }
    pages
}

#[cfg(test)]
mod tests;
