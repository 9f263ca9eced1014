//! Guest memory as the frontend describes it (`SET_MEM_TABLE`): validated, mapped, and
//! able to translate the frontend's virtual addresses (used for ring addresses) into guest
//! physical ones (used by descriptors).

use std::fs::File;
use std::sync::Arc;

use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use sigbus::SigbusGuard;

/// The most regions a memory table may have (vhost-user sends at most 8 fds per message).
pub const MAX_REGIONS: usize = 8;

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

/// A mapped, validated memory table.
#[derive(Debug)]
pub struct GuestMemoryTable {
    mem: Arc<GuestMemoryMmap>,
    regions: Vec<RegionDesc>,
    /// Keeps a frontend shrinking its files from killing the process (`sigbus.rs`); `None`
    /// for memory mapped by the caller.
    _sigbus: Option<SigbusGuard>,
}

impl GuestMemoryTable {
    /// Validates `regions` against their `files` and maps them (shared, read-write).
    pub fn map(regions: &[RegionDesc], files: Vec<File>) -> Result<Self, MemoryTableError> {
        validate_layout(regions)?;
        if files.len() != regions.len() {
            return Err(MemoryTableError::FdCount {
                regions: regions.len(),
                files: files.len(),
            });
        }
        let mut mapped = Vec::with_capacity(regions.len());
        for (index, (r, file)) in regions.iter().zip(files).enumerate() {
            check_file_len(index, r, &file)?;
            warn_if_unsealed(index, &file);
            let page = sigbus::page_size_of(&file);
            let size = usize::try_from(r.size).map_err(|_| MemoryTableError::BadRegion(index))?;
            let mapping = MmapRegion::<()>::from_file(FileOffset::new(file, r.mmap_offset), size)
                .map_err(|e| MemoryTableError::Map {
                index,
                message: e.to_string(),
            })?;
            let region = GuestRegionMmap::new(mapping, GuestAddress(r.guest_phys_addr))
                .ok_or(MemoryTableError::BadRegion(index))?;
            mapped.push((r.guest_phys_addr, page, region));
        }
        mapped.sort_by_key(|(gpa, _, _)| *gpa);
        let pages: Vec<usize> = mapped.iter().map(|(_, page, _)| *page).collect();
        let mem = GuestMemoryMmap::from_regions(mapped.into_iter().map(|(_, _, r)| r).collect())
            .map_err(|_| MemoryTableError::GuestOverlap)?;
        let mem = Arc::new(mem);
        Ok(GuestMemoryTable {
            _sigbus: Some(SigbusGuard::register(Arc::clone(&mem), &pages)),
            mem,
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
            mem: Arc::new(mem),
            regions: regions.to_vec(),
            _sigbus: None,
        })
    }

    /// The guest memory.
    pub fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }

    /// The guest memory, shared.
    pub fn memory_arc(&self) -> Arc<GuestMemoryMmap> {
        Arc::clone(&self.mem)
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

/// Mapping past the end of a file succeeds, but touching those pages raises SIGBUS: a
/// frontend that sends a short file must be refused here.
fn check_file_len(index: usize, r: &RegionDesc, file: &File) -> Result<(), MemoryTableError> {
    let len = file
        .metadata()
        .map_err(|source| MemoryTableError::Stat { index, source })?
        .len();
    let needed = r.mmap_offset.saturating_add(r.size);
    if len < needed {
        return Err(MemoryTableError::FileTooShort { index, needed, len });
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

pub(crate) mod sigbus;
#[cfg(test)]
mod tests;
