//! Memory tables a port refused, counted by reason.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a memory table (`SET_MEM_TABLE`) was refused, as counted
/// ([`MemoryTableError::reason`](super::MemoryTableError::reason)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryRefusal {
    /// No region, or more than eight.
    RegionCount,
    /// Not one file descriptor per region.
    FdCount,
    /// A region of size zero or overflowing.
    BadRegion,
    /// Regions overlapping in guest physical memory.
    GuestOverlap,
    /// Regions overlapping in the frontend's virtual memory.
    UserOverlap,
    /// A file shorter than its region.
    FileTooShort,
    /// A file that is not a memfd, nor a regular file on tmpfs or hugetlbfs.
    NotSharedMemory,
    /// More bytes than the port's `max_guest_memory`.
    TooLarge,
    /// Two regions mapping the same pages of one file.
    FileAlias,
    /// No free slot of the SIGBUS guard (or no guard at all).
    Unguarded,
    /// The file could not be inspected or mapped.
    Map,
}

impl MemoryRefusal {
    /// Every reason, in counter order.
    pub const ALL: [MemoryRefusal; 11] = [
        MemoryRefusal::RegionCount,
        MemoryRefusal::FdCount,
        MemoryRefusal::BadRegion,
        MemoryRefusal::GuestOverlap,
        MemoryRefusal::UserOverlap,
        MemoryRefusal::FileTooShort,
        MemoryRefusal::NotSharedMemory,
        MemoryRefusal::TooLarge,
        MemoryRefusal::FileAlias,
        MemoryRefusal::Unguarded,
        MemoryRefusal::Map,
    ];

    /// The counter index.
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }

    /// The reason's name in counters (`snake_case`).
    pub fn counter_name(self) -> &'static str {
        match self {
            MemoryRefusal::RegionCount => "region_count",
            MemoryRefusal::FdCount => "fd_count",
            MemoryRefusal::BadRegion => "bad_region",
            MemoryRefusal::GuestOverlap => "guest_overlap",
            MemoryRefusal::UserOverlap => "user_overlap",
            MemoryRefusal::FileTooShort => "file_too_short",
            MemoryRefusal::NotSharedMemory => "not_shared_memory",
            MemoryRefusal::TooLarge => "too_large",
            MemoryRefusal::FileAlias => "file_alias",
            MemoryRefusal::Unguarded => "unguarded",
            MemoryRefusal::Map => "map_failed",
        }
    }
}

/// Requests a port refused, counted by reason (`N` reasons, by their index); written by its
/// control thread, read by anyone.
#[derive(Debug)]
pub(crate) struct Refusals<const N: usize>([AtomicU64; N]);

impl<const N: usize> Default for Refusals<N> {
    fn default() -> Self {
        Refusals(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl<const N: usize> Refusals<N> {
    /// One more refusal for the reason at `index`.
    pub(crate) fn count(&self, index: usize) {
        if let Some(counter) = self.0.get(index) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Refusals per reason index.
    pub(crate) fn snapshot(&self) -> [u64; N] {
        std::array::from_fn(|i| self.0.get(i).map_or(0, |c| c.load(Ordering::Relaxed)))
    }
}

/// One port's refused memory tables by [`MemoryRefusal::index`].
pub(crate) type MemoryRefusals = Refusals<{ MemoryRefusal::ALL.len() }>;
