//! UMEM bookkeeping without touching the memory: which chunk is whose, descriptor checks.
//!
//! The UMEM is `frames` chunks of [`CHUNK_SIZE`] bytes. The first half is the receive
//! side's: each of its chunks is either in the fill ring (the kernel's, which may write it)
//! or held by the receive half (from the rx ring until `finish` puts it back in the fill
//! ring). The second half is the transmit side's: each chunk is either free (the transmit
//! half's, to write) or in flight (in the tx ring or not yet returned through the
//! completion ring; the kernel reads it). A chunk never changes sides, so the two halves
//! never touch the same memory.

use crate::options::CHUNK_SIZE;
use crate::stats::XdpDrop;

/// The shortest frame a port lends: an Ethernet header.
pub(crate) const MIN_FRAME: u32 = 14;

/// How the UMEM is divided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Chunks in the UMEM (a power of two).
    pub(crate) frames: u32,
}

impl Layout {
    /// Chunks on the receive side: `0..rx_chunks()`.
    pub(crate) fn rx_chunks(&self) -> u32 {
        self.frames / 2
    }
    /// Chunks on the transmit side: `rx_chunks()..frames`.
    pub(crate) fn tx_chunks(&self) -> u32 {
        self.frames - self.rx_chunks()
    }
    /// Bytes in the UMEM.
    pub(crate) fn bytes(&self) -> usize {
        self.frames as usize * CHUNK_SIZE as usize
    }
    /// The UMEM address (offset) of chunk `chunk`'s first byte.
    pub(crate) fn chunk_addr(chunk: u32) -> u64 {
        u64::from(chunk) * u64::from(CHUNK_SIZE)
    }
    /// The chunk holding UMEM address `addr`, if it is inside the UMEM.
    pub(crate) fn chunk_of(&self, addr: u64) -> Option<u32> {
        let chunk = u32::try_from(addr / u64::from(CHUNK_SIZE)).ok()?;
        (chunk < self.frames).then_some(chunk)
    }

    /// Checks a descriptor from the rx ring: its address inside a receive chunk, the frame
    /// wholly inside that chunk, at least an Ethernet header long. Returns the frame's byte
    /// range in the UMEM (start, length) and its chunk; on a refusal, the reason and the
    /// chunk to give back to the fill ring, when the address named one of the receive
    /// side's chunks.
    pub(crate) fn check_rx(&self, addr: u64, len: u32) -> Result<RxSlot, (XdpDrop, Option<u32>)> {
        let chunk = match self.chunk_of(addr) {
            Some(c) if c < self.rx_chunks() => c,
            // Outside the UMEM, or one of the transmit side's chunks: the kernel never
            // fills those, so there is nothing of ours to give back.
            _ => return Err((XdpDrop::BadAddress, None)),
        };
        let offset = addr - Layout::chunk_addr(chunk);
        if offset + u64::from(len) > u64::from(CHUNK_SIZE) {
            return Err((XdpDrop::CrossesChunk, Some(chunk)));
        }
        if len < MIN_FRAME {
            return Err((XdpDrop::Runt, Some(chunk)));
        }
        let start = usize::try_from(addr).map_err(|_| (XdpDrop::BadAddress, None))?;
        Ok(RxSlot {
            start,
            len: len as usize,
            chunk,
        })
    }
}

/// A received frame's place in the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxSlot {
    /// Its first byte's offset in the UMEM.
    pub(crate) start: usize,
    /// Its length.
    pub(crate) len: usize,
    /// Its chunk.
    pub(crate) chunk: u32,
}

/// The receive side's chunks that are out of the fill ring: held by the receive half
/// (lent to the switch) or waiting to go back.
#[derive(Debug)]
pub(crate) struct RxChunks {
    /// Per receive chunk: true while the receive half holds it.
    held: Vec<bool>,
    /// Chunks to put back in the fill ring at the next `finish`, in the order taken.
    to_fill: Vec<u32>,
}

impl RxChunks {
    /// Every receive chunk in the fill ring (as after the first fill).
    pub(crate) fn new(layout: Layout) -> Self {
        let n = layout.rx_chunks() as usize;
        RxChunks {
            held: vec![false; n],
            to_fill: Vec::with_capacity(n),
        }
    }

    /// The kernel handed `chunk` over through the rx ring. False when it was ours already
    /// (the kernel named it twice): the second naming is refused, the chunk goes back once.
    pub(crate) fn take(&mut self, chunk: u32) -> bool {
        match self.held.get_mut(chunk as usize) {
            Some(h) if !*h => {
                *h = true;
                self.to_fill.push(chunk);
                true
            }
            _ => false,
        }
    }

    /// Chunks to give back, oldest first.
    pub(crate) fn pending(&self) -> &[u32] {
        &self.to_fill
    }

    /// The first `n` pending chunks went back into the fill ring: the kernel's again.
    pub(crate) fn filled(&mut self, n: usize) {
        let n = n.min(self.to_fill.len());
        for &c in &self.to_fill[..n] {
            if let Some(h) = self.held.get_mut(c as usize) {
                *h = false;
            }
        }
        self.to_fill.drain(..n);
    }

    /// How many receive chunks the receive half holds.
    pub(crate) fn held(&self) -> usize {
        self.to_fill.len()
    }
}

/// The transmit side's chunks: a free list and the chunks in flight.
#[derive(Debug)]
pub(crate) struct TxChunks {
    first: u32,
    /// Free chunks (absolute chunk numbers), taken from the end.
    free: Vec<u32>,
    /// Per transmit chunk: true while the kernel has it (tx ring or not yet completed).
    in_flight: Vec<bool>,
}

impl TxChunks {
    /// Every transmit chunk free.
    pub(crate) fn new(layout: Layout) -> Self {
        let first = layout.rx_chunks();
        let n = layout.tx_chunks();
        TxChunks {
            first,
            free: (first..first + n).rev().collect(),
            in_flight: vec![false; n as usize],
        }
    }

    /// A free chunk, now the caller's to write; `None` when all are in flight.
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Gives back a chunk taken by [`TxChunks::alloc`] and not handed to the kernel.
    pub(crate) fn unalloc(&mut self, chunk: u32) {
        self.free.push(chunk);
    }

    /// `chunk` went into the tx ring.
    pub(crate) fn sent(&mut self, chunk: u32) {
        if let Some(f) = chunk
            .checked_sub(self.first)
            .and_then(|i| self.in_flight.get_mut(i as usize))
        {
            *f = true;
        }
    }

    /// The completion ring returned `addr`. False (and nothing changes) when it names no
    /// transmit chunk in flight.
    pub(crate) fn completed(&mut self, layout: &Layout, addr: u64) -> bool {
        let Some(chunk) = layout.chunk_of(addr) else {
            return false;
        };
        let Some(f) = chunk
            .checked_sub(self.first)
            .and_then(|i| self.in_flight.get_mut(i as usize))
        else {
            return false;
        };
        if !*f {
            return false;
        }
        *f = false;
        self.free.push(chunk);
        true
    }

    /// Free chunks now.
    pub(crate) fn free(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests;
