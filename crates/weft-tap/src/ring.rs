//! A memory-mapped `TPACKET_V3` receive ring (see the kernel's
//! `Documentation/networking/packet_mmap.rst`).
//!
//! The ring is `block_count` blocks of `block_size` bytes. The kernel fills one block at a
//! time with packets and hands it to user space by setting `TP_STATUS_USER` in the block
//! header (when the block is full, or after the retire timeout); user space reads every
//! packet of the block and gives it back by storing `TP_STATUS_KERNEL`. A block user space
//! owns is never written by the kernel, so it can be viewed as an ordinary byte slice; the
//! ownership word itself is only ever touched atomically.
//!
//! The layout readers ([`BlockHeader`], [`PacketHeader`]) are safe code over byte slices,
//! bounds-checked, so a corrupt block cannot make them read outside it.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys;

/// Offset of `block_status` in `struct tpacket_block_desc` (after `version` and
/// `offset_to_priv`).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
const BLOCK_LEN: usize = 20;
/// Size of the block header (`tpacket_block_desc`, 48 bytes).
const BLOCK_HEADER_LEN: usize = 48;

/// Offsets in `struct tpacket3_hdr`.
mod pkt {
    pub(super) const NEXT_OFFSET: usize = 0;
    pub(super) const SNAPLEN: usize = 12;
    pub(super) const LEN: usize = 16;
    pub(super) const STATUS: usize = 20;
    pub(super) const MAC: usize = 24;
    pub(super) const VLAN_TCI: usize = 32;
    pub(super) const VLAN_TPID: usize = 36;
    /// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the `sockaddr_ll` starts.
    pub(super) const HEADER_LEN: usize = 48;
    /// `sll_pkttype` inside the `sockaddr_ll`.
    pub(super) const PKTTYPE: usize = HEADER_LEN + 10;
}

/// Per-packet status bits.
pub(crate) const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub(crate) const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes([b[0], b[1]]))
}

fn to_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The header of a block user space owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    pub(crate) num_pkts: u32,
    pub(crate) first_offset: usize,
}

impl BlockHeader {
    /// Reads the header of `block`; `None` when it is too short or its lengths point
    /// outside the block.
    pub(crate) fn read(block: &[u8]) -> Option<BlockHeader> {
        let num_pkts = read_u32(block, BLOCK_NUM_PKTS)?;
        let first_offset = to_usize(read_u32(block, BLOCK_FIRST_PKT)?);
        let len = to_usize(read_u32(block, BLOCK_LEN)?);
        let sane = first_offset >= BLOCK_HEADER_LEN && len <= block.len();
        sane.then_some(BlockHeader {
            num_pkts,
            first_offset,
        })
    }
}

/// What the ring says about one packet, offsets relative to the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacketHeader {
    /// Where this packet's header starts.
    pub(crate) offset: usize,
    /// Distance to the next packet's header (0 on the last).
    pub(crate) next_offset: usize,
    /// Bytes captured in the ring.
    pub(crate) snaplen: usize,
    /// Bytes the packet had.
    pub(crate) len: usize,
    pub(crate) status: u32,
    /// Where the Ethernet header starts (from the block's start).
    pub(crate) mac: usize,
    pub(crate) vlan_tci: u16,
    pub(crate) vlan_tpid: u16,
    /// `sll_pkttype` (PACKET_HOST, PACKET_OUTGOING...).
    pub(crate) pkttype: u8,
}

impl PacketHeader {
    /// Reads the packet header at `offset` in `block`; `None` when it, or the bytes it
    /// describes, do not fit in the block, or the Ethernet header does not come after it.
    pub(crate) fn read(block: &[u8], offset: usize) -> Option<PacketHeader> {
        let at = |field: usize| offset.checked_add(field);
        let snaplen = to_usize(read_u32(block, at(pkt::SNAPLEN)?)?);
        let mac = offset.checked_add(usize::from(read_u16(block, at(pkt::MAC)?)?))?;
        if mac < at(pkt::PKTTYPE + 1)? || mac.checked_add(snaplen)? > block.len() {
            return None;
        }
        Some(PacketHeader {
            offset,
            next_offset: to_usize(read_u32(block, at(pkt::NEXT_OFFSET)?)?),
            snaplen,
            len: to_usize(read_u32(block, at(pkt::LEN)?)?),
            status: read_u32(block, at(pkt::STATUS)?)?,
            mac,
            // The TCI is a 32-bit field holding a 16-bit value.
            vlan_tci: read_u16(block, at(pkt::VLAN_TCI)?)?,
            vlan_tpid: read_u16(block, at(pkt::VLAN_TPID)?)?,
            pkttype: *block.get(at(pkt::PKTTYPE)?)?,
        })
    }

    /// Where the packet's own area starts after its headers (the bytes before `mac` that
    /// belong to it).
    pub(crate) fn data_floor(&self) -> usize {
        self.offset + pkt::PKTTYPE + 1
    }
}

/// The mapped ring. Owns the mapping; the socket it belongs to is kept open elsewhere (the
/// mapping holds its own reference to the socket, so the order of closing does not matter).
pub(crate) struct RxRing {
    base: NonNull<u8>,
    block_size: usize,
    block_count: usize,
}

// SAFETY: the mapping is ordinary process memory owned by this value alone; nothing about it
// is tied to the thread that created it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Asks for the ring on `fd` (a packet socket already set to `TPACKET_V3`) and maps it.
    pub(crate) fn new(
        fd: &(impl AsRawFd + AsFd),
        block_size: usize,
        block_count: usize,
        retire_ms: u32,
    ) -> io::Result<RxRing> {
        let invalid = || io::Error::from(io::ErrorKind::InvalidInput);
        // Frames have no fixed size in V3; the kernel still wants a consistent frame count.
        let frame_size: u32 = 2048;
        let block_size_u32 = u32::try_from(block_size).map_err(|_| invalid())?;
        let block_nr = u32::try_from(block_count).map_err(|_| invalid())?;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size_u32,
            tp_block_nr: block_nr,
            tp_frame_size: frame_size,
            tp_frame_nr: (block_size_u32 / frame_size)
                .checked_mul(block_nr)
                .ok_or_else(invalid)?,
            tp_retire_blk_tov: retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(fd.as_fd(), sys::opt::PACKET_RX_RING, &req)?;
        let len = block_size.checked_mul(block_count).ok_or_else(invalid)?;
        // SAFETY: a new shared mapping of the ring the kernel just allocated for `fd`; no
        // existing memory is affected. The result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(invalid)?;
        Ok(RxRing {
            base,
            block_size,
            block_count,
        })
    }

    /// An anonymous mapping laid out like a ring, every block owned by the kernel: tests
    /// fill blocks and hand them to user space themselves.
    #[cfg(test)]
    pub(crate) fn anonymous(block_size: usize, block_count: usize) -> RxRing {
        let len = block_size * block_count;
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        RxRing {
            base: NonNull::new(ptr.cast::<u8>()).unwrap(),
            block_size,
            block_count,
        }
    }

    /// Plays the kernel: writes `bytes` as block `block` (status word included) if it owns
    /// the block. False when user space owns it.
    #[cfg(test)]
    pub(crate) fn kernel_fill(&mut self, block: usize, bytes: &[u8]) -> bool {
        if self.is_user(block) || bytes.len() > self.block_size || block >= self.block_count {
            return false;
        }
        // SAFETY: the block is inside the mapping and (in tests) no slice of a block the
        // "kernel" owns exists: `block_mut` and `bytes` refuse kernel-owned blocks.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(block * self.block_size),
                bytes.len(),
            );
        }
        true
    }

    pub(crate) fn block_count(&self) -> usize {
        self.block_count
    }

    pub(crate) fn block_size(&self) -> usize {
        self.block_size
    }

    fn status_word(&self, block: usize) -> Option<&AtomicU32> {
        if block >= self.block_count {
            return None;
        }
        // SAFETY: `block < block_count`, so the word at `block * block_size + 8` lies inside
        // the mapping; it is 4-byte aligned (blocks are page-aligned); the kernel accesses it
        // only atomically (smp_load_acquire / smp_store_release in af_packet.c), as we do.
        Some(unsafe {
            AtomicU32::from_ptr(
                self.base
                    .as_ptr()
                    .add(block * self.block_size + BLOCK_STATUS)
                    .cast::<u32>(),
            )
        })
    }

    /// True when user space owns `block` (the kernel filled and retired it).
    pub(crate) fn is_user(&self, block: usize) -> bool {
        self.status_word(block)
            .is_some_and(|w| w.load(Ordering::Acquire) & libc::TP_STATUS_USER != 0)
    }

    /// The bytes of `block`, if user space owns it.
    pub(crate) fn block_mut(&mut self, block: usize) -> Option<&mut [u8]> {
        if !self.is_user(block) {
            return None;
        }
        // SAFETY: the block is inside the mapping and user-owned, so the kernel does not
        // write it until `release`, which needs `&mut self` and so cannot run while this
        // borrow lives; `&mut self` also rules out any other slice of it.
        Some(unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(block * self.block_size),
                self.block_size,
            )
        })
    }

    /// `len` bytes at `offset` in the ring, if they lie inside one user-owned block.
    pub(crate) fn bytes(&self, offset: usize, len: usize) -> Option<&[u8]> {
        let block = offset / self.block_size;
        let end = offset.checked_add(len)?;
        if end > (block + 1) * self.block_size || !self.is_user(block) {
            return None;
        }
        // SAFETY: the range lies inside one block of the mapping, which user space owns:
        // the kernel does not write it until `release` (`&mut self`, so not while this
        // shared borrow lives), and no `&mut` slice of it can exist alongside `&self`.
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), len) })
    }

    /// Gives `block` back to the kernel.
    pub(crate) fn release(&mut self, block: usize) {
        if let Some(w) = self.status_word(block) {
            w.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no slice of it can outlive
        // `self` (they all borrow it).
        unsafe {
            libc::munmap(
                self.base.as_ptr().cast(),
                self.block_size * self.block_count,
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
