//! Guest memory as the frontend describes it (`SET_MEM_TABLE`): validated, mapped, and
//! able to translate the frontend's virtual addresses (used for ring addresses) into guest
//! physical ones (used by descriptors).

use std::fs::File;
use std::sync::Arc;

use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use admit::{admit_file, check_aliasing, check_total};
#[cfg(test)]
pub(crate) use dirty_log::marked_pages;
pub use dirty_log::{max_log_bytes, DirtyLogError, LogRefusal, LOG_PAGE};
pub(crate) use dirty_log::{DirtyLog, LogCounters, LogRefusals, RingLog};
pub use guarded::GuardedMemory;
pub use refusals::MemoryRefusal;
pub(crate) use refusals::MemoryRefusals;
pub use sigbus::GuardError;
use sigbus::SigbusGuard;

/// The most regions a memory table may have (vhost-user sends at most 8 fds per message).
pub const MAX_REGIONS: usize = 8;

/// The default of [`VhostPortConfig::max_guest_memory`](crate::VhostPortConfig): 1 TiB, a
/// very large VM's memory, and 1/128 of a process's address space on x86-64.
pub const DEFAULT_MAX_GUEST_MEMORY: u64 = 1 << 40;

/// One region as the frontend describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionDesc {
    /// Guest physical address of the region.
    pub guest_phys_addr: u64,
    /// Size in bytes.
    pub size: u64,
    /// Where the frontend has it mapped (its own virtual address).
    pub user_addr: u64,
    /// Offset of the region in the file descriptor sent with it.
    pub mmap_offset: u64,
}

/// Why a memory table was refused.
#[derive(Debug, thiserror::Error)]
pub enum MemoryTableError {
    /// No region, or more than [`MAX_REGIONS`].
    #[error("{0} memory regions (1..=8 allowed)")]
    RegionCount(usize),
    /// Not one file descriptor per region.
    #[error("{regions} regions but {files} file descriptors")]
    FdCount {
        /// Regions described.
        regions: usize,
        /// Descriptors received.
        files: usize,
    },
    /// A region of size zero, or one whose end overflows 64 bits (guest, user or file
    /// offset), or larger than the address space.
    #[error("region {0} has a zero size or overflows")]
    BadRegion(usize),
    /// Two regions overlap in guest physical addresses.
    #[error("regions overlap in guest physical memory")]
    GuestOverlap,
    /// Two regions overlap in the frontend's virtual addresses (ring translation would be
    /// ambiguous).
    #[error("regions overlap in frontend virtual memory")]
    UserOverlap,
    /// The file behind a region is shorter than the region (touching it would fault).
    #[error("region {index} needs {needed} bytes of its file, which has {len}")]
    FileTooShort {
        /// The region.
        index: usize,
        /// `mmap_offset + size`.
        needed: u64,
        /// The file's length.
        len: u64,
    },
    /// The file behind a region is not a regular file (a device, a socket, a pipe ...).
    #[error(
        "the file of region {index} is {kind}; guest memory must be a memfd or a file on \
         tmpfs or hugetlbfs (QEMU: memory-backend-memfd, or memory-backend-file under \
         /dev/shm or /dev/hugepages, with share=on)"
    )]
    NotRegularFile {
        /// The region.
        index: usize,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file behind a region is not in shared memory (a file on a disk filesystem).
    #[error(
        "the file of region {index} is on {filesystem}; guest memory must be a memfd or a \
         file on tmpfs or hugetlbfs (QEMU: memory-backend-memfd, or memory-backend-file \
         under /dev/shm or /dev/hugepages, with share=on)"
    )]
    NotSharedMemory {
        /// The region.
        index: usize,
        /// The filesystem it is on.
        filesystem: String,
    },
    /// The regions add up to more than the port may map.
    #[error(
        "the memory table maps {total} bytes, more than the port's limit of {limit}; raise \
         the port's max_guest_memory (weftd: [vhost] max_guest_memory_gib) for a VM this \
         large"
    )]
    TooLarge {
        /// The regions' sizes added up (saturating).
        total: u64,
        /// The port's `max_guest_memory`.
        limit: u64,
    },
    /// Two regions map overlapping parts of one file (the same pages twice).
    #[error(
        "regions {first} and {second} map the same pages of one file; each page of guest \
         memory may back one region only"
    )]
    FileAlias {
        /// The first region.
        first: usize,
        /// The region mapping some of its pages again.
        second: usize,
    },
    /// The memory could not be guarded against the frontend shrinking its files (and a
    /// shrunk file would then kill the process).
    #[error("memory table refused: {0}")]
    Unguarded(#[from] GuardError),
    /// The file descriptor could not be inspected.
    #[error("cannot inspect the file of region {index}: {source}")]
    Stat {
        /// The region.
        index: usize,
        /// What went wrong.
        source: std::io::Error,
    },
    /// mmap refused the region.
    #[error("cannot map region {index}: {message}")]
    Map {
        /// The region.
        index: usize,
        /// What mmap said.
        message: String,
    },
}

impl MemoryTableError {
    /// The reason, as counted.
    pub fn reason(&self) -> MemoryRefusal {
        match self {
            MemoryTableError::RegionCount(_) => MemoryRefusal::RegionCount,
            MemoryTableError::FdCount { .. } => MemoryRefusal::FdCount,
            MemoryTableError::BadRegion(_) => MemoryRefusal::BadRegion,
            MemoryTableError::GuestOverlap => MemoryRefusal::GuestOverlap,
            MemoryTableError::UserOverlap => MemoryRefusal::UserOverlap,
            MemoryTableError::FileTooShort { .. } => MemoryRefusal::FileTooShort,
            MemoryTableError::NotRegularFile { .. } | MemoryTableError::NotSharedMemory { .. } => {
                MemoryRefusal::NotSharedMemory
            }
            MemoryTableError::TooLarge { .. } => MemoryRefusal::TooLarge,
            MemoryTableError::FileAlias { .. } => MemoryRefusal::FileAlias,
            MemoryTableError::Unguarded(_) => MemoryRefusal::Unguarded,
            MemoryTableError::Stat { .. } | MemoryTableError::Map { .. } => MemoryRefusal::Map,
        }
    }
}

/// A mapped, validated memory table.
#[derive(Debug)]
pub struct GuestMemoryTable {
    /// Also held by every ring and data-path batch using it: mapped, and guarded, until the
    /// last of them lets go.
    mem: Arc<GuardedMemory>,
    regions: Vec<RegionDesc>,
}

impl GuestMemoryTable {
    /// Validates `regions` against their `files` and maps them (shared, read-write),
    /// guarded against the frontend shrinking the files later (`sigbus.rs`). At most
    /// `max_bytes` in all; only memfds and files on tmpfs or hugetlbfs; no page of a file
    /// in two regions. Nothing is mapped unless all of it is admitted.
    pub fn map(
        regions: &[RegionDesc],
        files: Vec<File>,
        max_bytes: u64,
    ) -> Result<Self, MemoryTableError> {
        validate_layout(regions)?;
        if files.len() != regions.len() {
            return Err(MemoryTableError::FdCount {
                regions: regions.len(),
                files: files.len(),
            });
        }
        check_total(regions, max_bytes)?;
        let admitted = regions
            .iter()
            .zip(&files)
            .enumerate()
            .map(|(index, (r, file))| admit_file(index, r, file))
            .collect::<Result<Vec<_>, _>>()?;
        check_aliasing(regions, &admitted)?;
        let mut mapped = Vec::with_capacity(regions.len());
        for (index, ((r, file), admitted)) in regions.iter().zip(files).zip(&admitted).enumerate() {
            warn_if_unsealed(index, &file);
            let size = usize::try_from(r.size).map_err(|_| MemoryTableError::BadRegion(index))?;
            let mapping = MmapRegion::<()>::from_file(FileOffset::new(file, r.mmap_offset), size)
                .map_err(|e| MemoryTableError::Map {
                index,
                message: e.to_string(),
            })?;
            let region = GuestRegionMmap::new(mapping, GuestAddress(r.guest_phys_addr))
                .ok_or(MemoryTableError::BadRegion(index))?;
            mapped.push((r.guest_phys_addr, admitted.page, region));
        }
        mapped.sort_by_key(|(gpa, _, _)| *gpa);
        let pages: Vec<usize> = mapped.iter().map(|(_, page, _)| *page).collect();
        let mem = GuestMemoryMmap::from_regions(mapped.into_iter().map(|(_, _, r)| r).collect())
            .map_err(|_| MemoryTableError::GuestOverlap)?;
        // Guarded before anyone can touch it; refused (and unmapped) if it cannot be.
        let guard = SigbusGuard::register(&mem, &pages)?;
        Ok(GuestMemoryTable {
            mem: Arc::new(GuardedMemory::guarded(mem, guard)),
            regions: regions.to_vec(),
        })
    }

    /// A table over memory the caller mapped already, where the frontend's virtual
    /// addresses are `regions`' `user_addr` (tests, and frontends in this process).
    pub fn from_mapped(
        mem: GuestMemoryMmap,
        regions: &[RegionDesc],
    ) -> Result<Self, MemoryTableError> {
        validate_layout(regions)?;
        Ok(GuestMemoryTable {
            mem: Arc::new(GuardedMemory::unguarded(mem)),
            regions: regions.to_vec(),
        })
    }

    /// The guest memory.
    pub fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }

    /// The guest memory, shared: it stays mapped and guarded while this is held.
    pub fn memory_arc(&self) -> Arc<GuardedMemory> {
        Arc::clone(&self.mem)
    }

    /// The regions as the frontend described them.
    pub(crate) fn regions(&self) -> &[RegionDesc] {
        &self.regions
    }

    /// The file region `index` maps (a hand-over passes it on), if it was mapped from one.
    pub(crate) fn region_file(&self, index: usize) -> Option<&File> {
        use vm_memory::{GuestMemoryBackend, GuestMemoryRegion};
        let r = self.regions.get(index)?;
        self.mem
            .find_region(GuestAddress(r.guest_phys_addr))?
            .file_offset()
            .map(FileOffset::file)
    }

    /// The guest physical address of the frontend virtual range `[va, va + len)`, which must
    /// lie inside one region.
    pub fn va_to_gpa(&self, va: u64, len: u64) -> Option<GuestAddress> {
        let end = va.checked_add(len)?;
        self.regions.iter().find_map(|r| {
            let r_end = r.user_addr.checked_add(r.size)?;
            if va >= r.user_addr && end <= r_end {
                r.guest_phys_addr
                    .checked_add(va - r.user_addr)
                    .map(GuestAddress)
            } else {
                None
            }
        })
    }
}

fn validate_layout(regions: &[RegionDesc]) -> Result<(), MemoryTableError> {
    if regions.is_empty() || regions.len() > MAX_REGIONS {
        return Err(MemoryTableError::RegionCount(regions.len()));
    }
    for (i, r) in regions.iter().enumerate() {
        let fits = r.size != 0
            && usize::try_from(r.size).is_ok()
            && r.guest_phys_addr.checked_add(r.size).is_some()
            && r.user_addr.checked_add(r.size).is_some()
            && r.mmap_offset.checked_add(r.size).is_some()
            && i64::try_from(r.mmap_offset).is_ok();
        if !fits {
            return Err(MemoryTableError::BadRegion(i));
        }
    }
    // Ends do not overflow (checked above).
    let overlaps = |start: fn(&RegionDesc) -> u64| {
        regions.iter().enumerate().any(|(i, a)| {
            regions.iter().skip(i + 1).any(|b| {
                let (a0, b0) = (start(a), start(b));
                a0 < b0 + b.size && b0 < a0 + a.size
            })
        })
    };
    if overlaps(|r| r.guest_phys_addr) {
        return Err(MemoryTableError::GuestOverlap);
    }
    if overlaps(|r| r.user_addr) {
        return Err(MemoryTableError::UserOverlap);
    }
    Ok(())
}

/// A frontend could still shrink its file after we mapped it. memfds sealed against
/// shrinking cannot; for others the SIGBUS guard (`sigbus.rs`) breaks that port's rings
/// instead of the process. Noted once per region here.
fn warn_if_unsealed(index: usize, file: &File) {
    // Non-memfds answer EINVAL.
    let seals = nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GET_SEALS).unwrap_or(0);
    if seals & libc::F_SEAL_SHRINK == 0 {
        tracing::debug!(
            region = index,
            "guest memory file is not sealed against shrinking"
        );
    }
}

mod admit;
mod dirty_log;
mod guarded;
mod refusals;
pub(crate) mod sigbus;
#[cfg(test)]
mod tests;
