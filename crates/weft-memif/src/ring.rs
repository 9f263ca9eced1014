//! One memif ring as weft walks it: where it lies, and what each end moves.
//!
//! A ring has a head and a tail; which side moves which depends on the direction, not on
//! who produces (DPDK `eth_memif_rx` / `eth_memif_tx`):
//!
//! | ring | producer | head moved by | tail moved by |
//! |---|---|---|---|
//! | C2S | client | client: slots filled | server: slots consumed |
//! | S2C | server | client: empty slots offered | server: slots filled |
//!
//! The peer can rewrite head, tail and descriptors at any moment. Every index and every
//! descriptor is read once into a local, checked, and only the local is used; a head or
//! tail that moved by more than the ring holds breaks the ring ([`RingFault`]), which
//! drops the peer. A bad descriptor drops one frame ([`FrameDrop`]).
//!
//! The client's own buffers: a client never trusts the region and offset it reads back
//! from a descriptor (the server can write them); it knows where slot `n`'s buffer is.

use std::sync::atomic::Ordering;

use crate::layout::{
    ring_bytes, ClientLayout, RING_ALIGN, RING_COOKIE, RING_COOKIE_AT, RING_FLAGS_AT, RING_HEAD_AT,
    RING_TAIL_AT,
};
use crate::memory::SharedMemory;
use crate::wire::Direction;

mod consumer;
mod producer;
mod view;
pub use consumer::{Consumer, ReadFrame};
pub use producer::{Producer, Sent};
pub use view::RingView;

/// Why a ring broke (the peer is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingFault {
    /// An index the peer moves jumped by more than the ring holds.
    #[error("{which} moved {by} slots past the other index in a ring of {size}")]
    IndexJump {
        /// `head` or `tail`.
        which: &'static str,
        /// How far.
        by: u16,
        /// Ring size.
        size: u16,
    },
    /// A buffer the client offered lies outside its region, or holds no room.
    #[error("an offered buffer lies outside its region")]
    BadOffer,
    /// The ring's memory could not be read (it lies outside its region, or was truncated).
    #[error("ring memory unreadable")]
    Unreadable,
    /// The ring's cookie is wrong (checked when it is set up).
    #[error("ring cookie {0:#x} (expected 0x3e31f20)")]
    Cookie(u32),
}

/// Why one received or transmitted frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDrop {
    /// A descriptor whose buffer lies outside its region, holds more than a buffer, or
    /// is empty.
    BadDescriptor,
    /// The frame is longer than the port carries.
    TooLong,
    /// A chain of more than [`MAX_CHAIN`](crate::config::MAX_CHAIN) buffers, or one that
    /// never ends within the slots published.
    BadChain,
}

/// Where one ring lies: checked to fit its region and be aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlace {
    region: u16,
    offset: u64,
    log2: u8,
}

impl RingPlace {
    /// The ring at `offset` of `region`, if it fits there.
    pub fn new(mem: &SharedMemory, region: u16, offset: u64, log2: u8) -> Option<RingPlace> {
        let size = mem.region_size(region)?;
        let fits = log2 <= 15
            && offset.is_multiple_of(RING_ALIGN)
            && offset.checked_add(ring_bytes(log2))? <= size;
        fits.then_some(RingPlace {
            region,
            offset,
            log2,
        })
    }

    /// The ring mapped for one burst.
    pub fn view<'m>(&self, mem: &'m SharedMemory) -> Result<RingView<'m>, RingFault> {
        RingView::new(self, mem)
    }

    /// Its region.
    pub fn region(&self) -> u16 {
        self.region
    }

    /// Its offset in the region.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Slots, as log2.
    pub fn log2(&self) -> u8 {
        self.log2
    }

    /// Slots.
    pub fn size(&self) -> u16 {
        1u16 << self.log2
    }

    fn store(&self, mem: &SharedMemory, at: u64, value: u16) -> Result<(), RingFault> {
        mem.store_u16(self.region, self.offset + at, value, Ordering::Release)
            .then_some(())
            .ok_or(RingFault::Unreadable)
    }

    /// Writes a fresh header (client, before announcing the ring): cookie, no flags,
    /// head and tail zero.
    pub fn init(&self, mem: &SharedMemory) -> Result<(), RingFault> {
        self.store(mem, RING_HEAD_AT, 0)?;
        self.store(mem, RING_TAIL_AT, 0)?;
        self.store(mem, RING_FLAGS_AT, 0)?;
        mem.store_u32(self.region, self.offset + RING_COOKIE_AT, RING_COOKIE)
            .then_some(())
            .ok_or(RingFault::Unreadable)
    }

    /// Checks the cookie, then zeroes head and tail (the server, on CONNECT, as DPDK
    /// does).
    pub fn check_and_reset(&self, mem: &SharedMemory) -> Result<(), RingFault> {
        self.check_cookie(mem)?;
        self.store(mem, RING_HEAD_AT, 0)?;
        self.store(mem, RING_TAIL_AT, 0)
    }

    /// Checks the cookie (a ring taken over keeps its indexes).
    pub fn check_cookie(&self, mem: &SharedMemory) -> Result<(), RingFault> {
        let cookie = mem
            .load_u32(self.region, self.offset + RING_COOKIE_AT)
            .ok_or(RingFault::Unreadable)?;
        if cookie != RING_COOKIE {
            return Err(RingFault::Cookie(cookie));
        }
        Ok(())
    }

    /// The consumer's wish: `true` asks the producer not to signal (polling).
    pub fn set_masked(&self, mem: &SharedMemory, masked: bool) -> Result<(), RingFault> {
        self.store(mem, RING_FLAGS_AT, u16::from(masked))
    }
}

/// Where a client's own buffers for one ring lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnBuffers {
    /// The client's region layout.
    pub layout: ClientLayout,
    /// The ring's direction.
    pub direction: Direction,
    /// The ring's index.
    pub index: u16,
}

impl OwnBuffers {
    /// Region and offset of `slot`'s buffer (region 0: the only one weft allocates).
    fn buffer(&self, slot: u16) -> (u16, u64) {
        (
            0,
            self.layout.buffer_offset(self.direction, self.index, slot),
        )
    }
}

#[cfg(test)]
mod tests;
