//! The client's shared memory: one sealed memfd, mapped shared, handed to the backend in
//! `SET_MEM_TABLE`. Rings and buffers live in it at fixed offsets ([`crate::layout`]).
//!
//! Every access goes through `vm-memory` (bounds-checked, volatile for bytes, atomic for
//! ring indexes), so this crate needs no `unsafe` of its own: the backend shares the mapping
//! and may write anything anywhere in it at any time, and `vm-memory` is built for exactly
//! that (guest memory a VMM shares with a guest).

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;

use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use vm_memory::{Bytes, FileOffset, GuestRegionMmap, MemoryRegionAddress, MmapRegion};

use crate::error::ClientError;

/// The shared memory region. Guest-physical address 0 is its first byte.
#[derive(Debug)]
pub(crate) struct SharedMemory {
    file: File,
    region: GuestRegionMmap<()>,
    len: usize,
}

impl SharedMemory {
    /// Creates a `len`-byte memfd, seals its size (so neither side can make the other's
    /// accesses fault by shrinking it) and maps it shared.
    pub(crate) fn new(len: usize) -> Result<SharedMemory, ClientError> {
        let fd = memfd_create(
            "weft-client",
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )
        .map_err(|e| ClientError::Memory(e.into()))?;
        let file = File::from(fd);
        let size = u64::try_from(len).map_err(|_| ClientError::MemoryTooLarge(len))?;
        file.set_len(size).map_err(ClientError::Memory)?;
        fcntl(
            &file,
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )
        .map_err(|e| ClientError::Memory(e.into()))?;
        let map_file = file.try_clone().map_err(ClientError::Memory)?;
        let mapping = MmapRegion::<()>::from_file(FileOffset::new(map_file, 0), len)
            .map_err(|e| ClientError::Memory(std::io::Error::other(e)))?;
        let region = GuestRegionMmap::new(mapping, vm_memory::GuestAddress(0))
            .ok_or(ClientError::MemoryTooLarge(len))?;
        Ok(SharedMemory { file, region, len })
    }

    /// The memfd, for `SET_MEM_TABLE`.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Where the mapping starts in this process: the "frontend virtual address" that
    /// `SET_MEM_TABLE` and `SET_VRING_ADDR` speak in.
    pub(crate) fn host_address(&self) -> u64 {
        // A pointer's address, not a dereference; usize is 64 bits on every target we build.
        self.region.as_ptr() as usize as u64
    }

    fn addr(offset: u64) -> MemoryRegionAddress {
        MemoryRegionAddress(offset)
    }

    /// Loads a 16-bit ring field with `order`.
    pub(crate) fn load_u16(&self, offset: u64, order: Ordering) -> Result<u16, ClientError> {
        self.region
            .load(Self::addr(offset), order)
            .map_err(|_| ClientError::OutOfBounds(offset))
    }

    /// Loads a little-endian 32-bit ring field (relaxed).
    pub(crate) fn load_u32(&self, offset: u64) -> Result<u32, ClientError> {
        self.region
            .load(Self::addr(offset), Ordering::Relaxed)
            .map(u32::from_le)
            .map_err(|_| ClientError::OutOfBounds(offset))
    }

    /// Stores a 16-bit ring field with `order`.
    pub(crate) fn store_u16(
        &self,
        offset: u64,
        value: u16,
        order: Ordering,
    ) -> Result<(), ClientError> {
        self.region
            .store(value.to_le(), Self::addr(offset), order)
            .map_err(|_| ClientError::OutOfBounds(offset))
    }

    /// Stores a little-endian 32-bit field (relaxed).
    pub(crate) fn store_u32(&self, offset: u64, value: u32) -> Result<(), ClientError> {
        self.region
            .store(value.to_le(), Self::addr(offset), Ordering::Relaxed)
            .map_err(|_| ClientError::OutOfBounds(offset))
    }

    /// Stores a little-endian 64-bit field (relaxed).
    pub(crate) fn store_u64(&self, offset: u64, value: u64) -> Result<(), ClientError> {
        self.region
            .store(value.to_le(), Self::addr(offset), Ordering::Relaxed)
            .map_err(|_| ClientError::OutOfBounds(offset))
    }

    /// Copies `bytes` in at `offset`.
    pub(crate) fn write(&self, bytes: &[u8], offset: u64) -> Result<(), ClientError> {
        self.region
            .write_slice(bytes, Self::addr(offset))
            .map_err(|_| ClientError::OutOfBounds(offset))
    }

    /// Copies `out.len()` bytes out from `offset`.
    pub(crate) fn read(&self, out: &mut [u8], offset: u64) -> Result<(), ClientError> {
        self.region
            .read_slice(out, Self::addr(offset))
            .map_err(|_| ClientError::OutOfBounds(offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_sealed_against_resizing_and_bounds_checked() {
        let mem = SharedMemory::new(8192).unwrap();
        assert!(mem.file.set_len(4096).is_err(), "shrinking must be sealed");
        assert!(mem.file.set_len(16384).is_err(), "growing must be sealed");
        mem.store_u16(8190, 7, Ordering::Release).unwrap();
        assert_eq!(mem.load_u16(8190, Ordering::Acquire).unwrap(), 7);
        assert!(matches!(
            mem.load_u16(8192, Ordering::Acquire),
            Err(ClientError::OutOfBounds(8192))
        ));
        let mut out = [0u8; 2];
        mem.read(&mut out, 8190).unwrap();
        assert_eq!(out, [7, 0]);
        assert!(mem.write(&[1, 2, 3], 8190).is_err());
        assert!(mem.read(&mut [0u8; 3], 8190).is_err());
    }
}
