//! memif's shared memory: the regions weft allocates as a client (a memfd sealed to its
//! size, so the peer can neither shrink nor grow it) or maps from its client's files as a
//! server (admitted only as a memfd or a tmpfs/hugetlbfs file at least as long as the
//! region; a file the peer truncates later is caught by the SIGBUS guard).
//!
//! Mapped with vm-memory, each region at its own synthetic address (`index << 40`), and
//! guarded by weft-vhost's SIGBUS handler (one handler per process, whatever kind of
//! shared memory). Every access goes through vm-memory's bounds-checked volatile (or
//! atomic) accessors: no reference to peer-writable memory is ever formed, and nothing
//! here needs `unsafe`.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::sync::atomic::Ordering;

use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::sys::statfs::{fstatfs, HUGETLBFS_MAGIC, TMPFS_MAGIC};
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestRegionMmap,
    MmapRegion, VolatileSlice,
};
use weft_vhost::{GuardError, GuardedMemory};

/// Regions lie this far apart in the synthetic address space: no region is larger.
const REGION_STRIDE: u64 = 1 << 40;
/// The page size of memfd and tmpfs mappings.
const BASE_PAGE: usize = 4096;

/// Why memory could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// A region's file is not a regular file in shared memory.
    #[error("the file of region {index} is not a memfd or a tmpfs/hugetlbfs file")]
    NotSharedMemory {
        /// The region.
        index: usize,
    },
    /// A region's file is shorter than the region.
    #[error("the file of region {index} has {len} bytes, the region {size}")]
    FileTooShort {
        /// The region.
        index: usize,
        /// The file's length.
        len: u64,
        /// The region's size.
        size: u64,
    },
    /// A region of size zero or over the stride.
    #[error("region {index} of {size} bytes cannot be mapped")]
    BadSize {
        /// The region.
        index: usize,
        /// Its size.
        size: u64,
    },
    /// No SIGBUS guard could be had.
    #[error("cannot guard the regions: {0}")]
    Unguarded(#[from] GuardError),
    /// A system call failed (memfd, seal, stat, mmap).
    #[error("{what}: {message}")]
    Sys {
        /// What was being done.
        what: &'static str,
        /// What the system said.
        message: String,
    },
}

fn sys(what: &'static str) -> impl FnOnce(nix::errno::Errno) -> MemoryError {
    move |e| MemoryError::Sys {
        what,
        message: e.to_string(),
    }
}

/// Mapped, guarded regions, by index.
#[derive(Debug)]
pub struct SharedMemory {
    mem: GuardedMemory,
    sizes: Vec<u64>,
}

impl SharedMemory {
    /// Allocates one region of `size` bytes (zeroed) for weft as a client: a memfd sealed
    /// against shrinking and growing. Returns the memory and the file to send the peer.
    pub fn create(size: u64) -> Result<(SharedMemory, File), MemoryError> {
        let fd = memfd_create(
            c"weft-memif",
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )
        .map_err(sys("memfd_create"))?;
        let len = i64::try_from(size).map_err(|_| MemoryError::BadSize { index: 0, size })?;
        nix::unistd::ftruncate(&fd, len).map_err(sys("sizing the memfd"))?;
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
        fcntl(&fd, FcntlArg::F_ADD_SEALS(seals)).map_err(sys("sealing the memfd"))?;
        let file = File::from(fd);
        let send = file.try_clone().map_err(|e| MemoryError::Sys {
            what: "duplicating the memfd",
            message: e.to_string(),
        })?;
        let memory = Self::map(vec![(size, file, BASE_PAGE)])?;
        Ok((memory, send))
    }

    /// Maps the regions a client handed over (`(size, file)` by index), each admitted
    /// first. Nothing is mapped unless all are admitted.
    pub fn map_peer(regions: Vec<(u64, OwnedFd)>) -> Result<SharedMemory, MemoryError> {
        let mut admitted = Vec::with_capacity(regions.len());
        for (index, (size, fd)) in regions.into_iter().enumerate() {
            let file = File::from(fd);
            let page = admit(index, size, &file)?;
            admitted.push((size, file, page));
        }
        Self::map(admitted)
    }

    fn map(regions: Vec<(u64, File, usize)>) -> Result<SharedMemory, MemoryError> {
        let mut mapped = Vec::with_capacity(regions.len());
        let mut pages = Vec::with_capacity(regions.len());
        let mut sizes = Vec::with_capacity(regions.len());
        for (index, (size, file, page)) in regions.into_iter().enumerate() {
            let bad = || MemoryError::BadSize { index, size };
            if size == 0 || size >= REGION_STRIDE {
                return Err(bad());
            }
            let len = usize::try_from(size).map_err(|_| bad())?;
            let mapping =
                MmapRegion::<()>::from_file(FileOffset::new(file, 0), len).map_err(|e| {
                    MemoryError::Sys {
                        what: "mapping a region",
                        message: e.to_string(),
                    }
                })?;
            let base = GuestAddress(u64::try_from(index).map_err(|_| bad())? * REGION_STRIDE);
            mapped.push(GuestRegionMmap::new(mapping, base).ok_or_else(bad)?);
            pages.push(page);
            sizes.push(size);
        }
        let mem = GuestMemoryMmap::from_regions(mapped).map_err(|e| MemoryError::Sys {
            what: "assembling the regions",
            message: e.to_string(),
        })?;
        // Guarded before anything touches it.
        let mem = GuardedMemory::guard(mem, &pages)?;
        Ok(SharedMemory { mem, sizes })
    }

    /// Regions mapped.
    pub fn regions(&self) -> usize {
        self.sizes.len()
    }

    /// Size of region `region`.
    pub fn region_size(&self, region: u16) -> Option<u64> {
        self.sizes.get(usize::from(region)).copied()
    }

    /// The file region `region` is mapped from (for a hand-over to another process).
    pub fn region_file(&self, region: u16) -> Option<&File> {
        let addr = GuestAddress(u64::from(region) * REGION_STRIDE);
        self.mem
            .memory()
            .find_region(addr)?
            .file_offset()
            .map(|f| f.file())
    }

    /// True once a SIGBUS was caught in these regions (the peer shrank a file).
    pub fn tripped(&self) -> bool {
        self.mem.tripped()
    }

    /// The address of `len` bytes at `offset` in `region`, when all of them lie inside it.
    fn addr(&self, region: u16, offset: u64, len: u64) -> Option<GuestAddress> {
        let size = self.region_size(region)?;
        (offset.checked_add(len)? <= size)
            .then(|| GuestAddress(u64::from(region) * REGION_STRIDE + offset))
    }

    /// `len` bytes at `offset` in `region`, for a volatile copy; `None` outside it.
    pub fn slice(&self, region: u16, offset: u64, len: usize) -> Option<VolatileSlice<'_>> {
        let addr = self.addr(region, offset, u64::try_from(len).ok()?)?;
        self.mem.get_slice(addr, len).ok()
    }

    /// Loads a ring index (atomically: the peer writes it concurrently).
    pub fn load_u16(&self, region: u16, offset: u64, order: Ordering) -> Option<u16> {
        self.mem.load(self.addr(region, offset, 2)?, order).ok()
    }

    /// Stores a ring index.
    pub fn store_u16(&self, region: u16, offset: u64, value: u16, order: Ordering) -> bool {
        self.addr(region, offset, 2)
            .is_some_and(|a| self.mem.store(value, a, order).is_ok())
    }

    /// Loads a 32-bit word (the ring cookie).
    pub fn load_u32(&self, region: u16, offset: u64) -> Option<u32> {
        self.mem
            .load(self.addr(region, offset, 4)?, Ordering::Acquire)
            .ok()
    }

    /// Stores a 32-bit word.
    pub fn store_u32(&self, region: u16, offset: u64, value: u32) -> bool {
        self.addr(region, offset, 4)
            .is_some_and(|a| self.mem.store(value, a, Ordering::Release).is_ok())
    }
}

/// Admits region `index`'s file: a regular file on tmpfs (memfds are) or hugetlbfs, at
/// least `size` bytes long. Returns the page size its mappings use.
fn admit(index: usize, size: u64, file: &File) -> Result<usize, MemoryError> {
    let meta = file.metadata().map_err(|e| MemoryError::Sys {
        what: "inspecting a region's file",
        message: e.to_string(),
    })?;
    let ft = meta.file_type();
    if !ft.is_file() || ft.is_socket() {
        return Err(MemoryError::NotSharedMemory { index });
    }
    let fs = fstatfs(file).map_err(sys("inspecting a region's filesystem"))?;
    let page = match fs.filesystem_type() {
        t if t == TMPFS_MAGIC => BASE_PAGE,
        t if t == HUGETLBFS_MAGIC => usize::try_from(fs.block_size())
            .unwrap_or(BASE_PAGE)
            .max(BASE_PAGE),
        _ => return Err(MemoryError::NotSharedMemory { index }),
    };
    // Mapping past a file's end succeeds; touching those pages would fault.
    if meta.len() < size {
        return Err(MemoryError::FileTooShort {
            index,
            len: meta.len(),
            size,
        });
    }
    Ok(page)
}

#[cfg(test)]
mod tests;
