//! Walking descriptor chains in guest memory: reading a frame the guest transmits, writing
//! a frame into the guest's receive buffers.
//!
//! The walk itself is [`DescChain`] (`ring_access.rs`, the same checks as `virtio-queue`'s
//! iterator), which bounds a chain by its table size (no loops), reads indirect tables and
//! refuses nested ones, caps a chain at 4 GiB and at [`MAX_CHAIN_DESCRIPTORS`] buffers. It
//! ends silently on any of these; a chain that ends on a descriptor still flagged NEXT
//! (or yields nothing) has therefore been cut short: past the cap the walk says so
//! itself, otherwise a second, cold look ([`diagnose`]) names the reason for the counters.
//! A walk stops at the first descriptor that decides the chain's fate (a zero-length or
//! wrong-direction buffer, the frame grown past [`MAX_FRAME_LEN`], a buffer outside guest
//! memory): nothing after it is read. Every buffer is translated through
//! the guest memory map, so a buffer outside guest memory, or wrapping past the end of the
//! address space, faults the queue instead of being touched.

use virtio_bindings::bindings::virtio_ring::{VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT};
use virtio_queue::desc::split::Descriptor;
use vm_memory::guest_memory::GuestMemoryBackendSliceIterator;
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, VolatileMemory, VolatileSlice,
};
use weft_packet::{ethernet, virtio_net, OffloadInfo};
use weft_switch::TxFrame;

use crate::bounce::Bounce;
use crate::config::MAX_FRAME_LEN;
use crate::counters::{FrameDrop, QueueFault};
use crate::ring_access::{spans_overlap, DescChain, GuestBytes, GuestView, MAX_CHAIN_DESCRIPTORS};

/// The descriptor table a chain comes from (for [`diagnose`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableRef {
    pub(crate) desc_table: GuestAddress,
    pub(crate) size: u16,
}

/// What went wrong with one chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChainError {
    /// The ring cannot be trusted any more.
    Fault(QueueFault),
    /// This frame is dropped; the chain goes back to the guest.
    Drop(FrameDrop),
    /// No room left in the bounce buffer for this batch: leave the chain for the next one.
    NoRoom,
}

/// A pointer into mapped guest memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuestPtr(pub(crate) *const u8);

// SAFETY: the pointer is only an address inside a guest memory mapping; the mapping is
// process-wide (no thread affinity), and whoever holds a GuestPtr also holds the Arc that
// keeps the mapping alive (see `rx.rs`).
unsafe impl Send for GuestPtr {}

/// Where a received frame's bytes are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FrameLoc {
    /// Contiguous in guest memory: `len` bytes at the pointer.
    Guest(GuestPtr, usize),
    /// Copied into the bounce buffer: `len` bytes at `start`.
    Bounce(usize, usize),
}

/// A frame read from a transmit chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxFrameRead {
    /// The virtio-net header as the guest wrote it (a private copy).
    pub(crate) header: [u8; virtio_net::HEADER_LEN],
    /// Frame length (header excluded).
    pub(crate) len: usize,
    pub(crate) loc: FrameLoc,
}

/// Reads the frame of transmit chain `chain`: its `hdr_len`-byte virtio-net header into a
/// private copy, and its bytes either lent in place (when they are contiguous and `lend`)
/// or copied into `bounce`. Afterwards `chain` tells how many descriptors were read.
pub(crate) fn read_tx_chain<'m>(
    chain: &mut DescChain<'_, 'm>,
    table: TableRef,
    hdr_len: usize,
    bounce: &mut Bounce,
    lend: bool,
) -> Result<TxFrameRead, ChainError> {
    if let Some(read) = chain
        .single()
        .and_then(|desc| read_single_tx(chain.view(), &desc, hdr_len, bounce, lend))
    {
        return read;
    }
    let start = bounce.used();
    let result = walk_tx_chain(chain, table, hdr_len, bounce, lend, start);
    if result.is_err() {
        bounce.truncate(start);
    }
    result
}

/// The buffer of the most common transmit chain, found without the general walk: one
/// readable descriptor, alone (no flags: not write-only, no NEXT, not INDIRECT), holding a
/// 12-byte virtio-net header and a frame of a length weft takes, inside one region. `None`
/// for anything else, which [`read_tx_chain`] then reads (and names, if it is malformed).
#[inline(always)]
pub(crate) fn plain_tx_buffer<'m>(
    view: &GuestView<'m>,
    desc: &Descriptor,
) -> Option<GuestBytes<'m>> {
    if desc.flags() != 0 {
        return None;
    }
    let len = usize::try_from(desc.len()).ok()?;
    let frame_len = len.checked_sub(virtio_net::HEADER_LEN)?;
    if !(ethernet::HEADER_LEN..=MAX_FRAME_LEN).contains(&frame_len) {
        return None;
    }
    view.bytes(desc.addr(), len)
}

/// The common transmit chain: one readable descriptor holding header and frame. `None`
/// for anything else (too short or long, unmapped, writable), which the general walk then
/// reads and names.
fn read_single_tx(
    view: &GuestView<'_>,
    desc: &Descriptor,
    hdr_len: usize,
    bounce: &mut Bounce,
    lend: bool,
) -> Option<Result<TxFrameRead, ChainError>> {
    let len = usize::try_from(desc.len()).ok()?;
    let frame_len = len.checked_sub(hdr_len)?;
    if desc.is_write_only()
        || hdr_len > virtio_net::HEADER_LEN
        || !(ethernet::HEADER_LEN..=MAX_FRAME_LEN).contains(&frame_len)
    {
        return None;
    }
    let slice = view.slice(desc.addr(), len)?;
    let mut header = [0u8; virtio_net::HEADER_LEN];
    if hdr_len == virtio_net::HEADER_LEN {
        header = slice
            .get_ref::<[u8; virtio_net::HEADER_LEN]>(0)
            .ok()?
            .load();
    } else {
        slice
            .subslice(0, hdr_len)
            .ok()?
            .copy_to(header.get_mut(..hdr_len)?);
    }
    let frame = slice.offset(hdr_len).ok()?;
    let loc = if lend {
        FrameLoc::Guest(GuestPtr(frame.ptr_guard().as_ptr()), frame_len)
    } else {
        let start = bounce.used();
        if let Err(e) = bounce.append(&frame) {
            return Some(Err(e));
        }
        FrameLoc::Bounce(start, frame_len)
    };
    Some(Ok(TxFrameRead {
        header,
        len: frame_len,
        loc,
    }))
}

struct TxWalk<'m> {
    header: [u8; virtio_net::HEADER_LEN],
    hdr_got: usize,
    hdr_len: usize,
    first: Option<VolatileSlice<'m>>,
    copying: bool,
    len: usize,
}

impl<'m> TxWalk<'m> {
    fn take(&mut self, slice: VolatileSlice<'m>, bounce: &mut Bounce) -> Result<(), ChainError> {
        let mut slice = slice;
        if self.hdr_got == 0 && self.hdr_len == virtio_net::HEADER_LEN {
            // The usual case, the whole header at the start of the first buffer: one
            // volatile 12-byte read rather than a `memcpy` call.
            if let Ok(header) = slice.get_ref::<[u8; virtio_net::HEADER_LEN]>(0) {
                self.header = header.load();
                self.hdr_got = virtio_net::HEADER_LEN;
                slice = slice
                    .offset(virtio_net::HEADER_LEN)
                    .map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?;
            }
        }
        if self.hdr_got < self.hdr_len {
            let n = slice.len().min(self.hdr_len - self.hdr_got);
            let dst = self
                .header
                .get_mut(self.hdr_got..self.hdr_got + n)
                .ok_or(ChainError::Fault(QueueFault::MalformedChain))?;
            let head = slice
                .subslice(0, n)
                .map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?;
            head.copy_to(dst);
            self.hdr_got += n;
            slice = slice
                .offset(n)
                .map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?;
        }
        if slice.is_empty() {
            return Ok(());
        }
        self.len += slice.len();
        if self.len > MAX_FRAME_LEN {
            // Known too long now: the rest of the chain is not read.
            return Err(ChainError::Drop(FrameDrop::FrameTooLong));
        }
        match self.first {
            None => self.first = Some(slice),
            Some(first) => {
                if !self.copying {
                    bounce.append(&first)?;
                    self.copying = true;
                }
                bounce.append(&slice)?;
            }
        }
        Ok(())
    }
}

fn walk_tx_chain<'m>(
    chain: &mut DescChain<'_, 'm>,
    table: TableRef,
    hdr_len: usize,
    bounce: &mut Bounce,
    lend: bool,
    start: usize,
) -> Result<TxFrameRead, ChainError> {
    let head = chain.head_index();
    let view = chain.view();
    let mut walk = TxWalk {
        header: [0; virtio_net::HEADER_LEN],
        hdr_got: 0,
        hdr_len: hdr_len.min(virtio_net::HEADER_LEN),
        first: None,
        copying: false,
        len: 0,
    };
    let mut ended = false;
    for desc in chain.by_ref() {
        if desc.is_write_only() {
            return Err(ChainError::Fault(QueueFault::WrongDirection));
        }
        ended = !desc.has_next();
        if desc.len() == 0 {
            // The frame is dropped whatever follows: the rest of the chain is not read
            // (a guest's cheapest way to make a walk long).
            return Err(ChainError::Drop(FrameDrop::ZeroLengthDescriptor));
        }
        for slice in buffer_slices(view, &desc)? {
            let slice = slice.map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?;
            walk.take(slice, bounce)?;
        }
    }
    if !ended {
        return Err(ChainError::Fault(cut_short(chain, table, head)));
    }
    if walk.hdr_got < walk.hdr_len {
        return Err(ChainError::Drop(FrameDrop::HeaderTooShort));
    }
    if walk.len < ethernet::HEADER_LEN {
        return Err(ChainError::Drop(FrameDrop::FrameTooShort));
    }
    let loc = match walk.first {
        Some(first) if !walk.copying && lend => {
            FrameLoc::Guest(GuestPtr(first.ptr_guard().as_ptr()), walk.len)
        }
        Some(first) if !walk.copying => {
            bounce.append(&first)?;
            FrameLoc::Bounce(start, walk.len)
        }
        _ => FrameLoc::Bounce(start, walk.len),
    };
    Ok(TxFrameRead {
        header: walk.header,
        len: walk.len,
        loc,
    })
}

/// Why `chain`, whose walk ended on a descriptor still flagged NEXT, was cut short.
fn cut_short(chain: &DescChain<'_, '_>, table: TableRef, head: u16) -> QueueFault {
    if chain.over_cap() {
        QueueFault::TooManyDescriptors
    } else {
        diagnose(chain.view().mem(), table, head)
    }
}

/// The mapped slices of one descriptor's buffer (several when it spans adjacent regions).
fn buffer_slices<'m>(
    view: &GuestView<'m>,
    desc: &Descriptor,
) -> Result<BufferSlices<'m>, ChainError> {
    let len =
        usize::try_from(desc.len()).map_err(|_| ChainError::Fault(QueueFault::ChainTooLarge))?;
    // A buffer ending past the top of the address space wraps around: refuse it here
    // rather than rely on the memory map refusing the wrapped part.
    if desc.addr().0.checked_add(u64::from(desc.len())).is_none() {
        return Err(ChainError::Fault(QueueFault::AddressOutOfRange));
    }
    // Nearly every buffer lies inside one region, usually the previous buffer's: no region
    // search, no general iterator (which cost a quarter of a busy worker's time in the vhost
    // benchmark's profile).
    Ok(match view.slice(desc.addr(), len) {
        Some(slice) => BufferSlices::One(Some(slice)),
        None => BufferSlices::Many(GuestMemoryBackend::get_slices(view.mem(), desc.addr(), len)),
    })
}

/// The slices [`buffer_slices`] found.
enum BufferSlices<'m> {
    /// The buffer inside one region (taken once).
    One(Option<VolatileSlice<'m>>),
    /// A buffer spanning regions, or partly unmapped: the general walk, which reports the
    /// unmapped part as an error.
    Many(GuestMemoryBackendSliceIterator<'m, GuestMemoryMmap>),
}

impl<'m> Iterator for BufferSlices<'m> {
    type Item = Result<VolatileSlice<'m>, vm_memory::GuestMemoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            BufferSlices::One(slice) => slice.take().map(Ok),
            BufferSlices::Many(slices) => slices.next(),
        }
    }
}

/// The source of a frame being written into receive buffers: its head, its body (weft's
/// memory), then its tail (another guest's memory, copied without forming a reference).
pub(crate) struct FrameSource<'f> {
    parts: [&'f [u8]; 2],
    tail: VolatileSlice<'f>,
    /// 0 and 1: `parts`; 2: `tail`; 3: done.
    part: usize,
    offset: usize,
}

impl<'f> FrameSource<'f> {
    pub(crate) fn new(frame: &'f TxFrame<'f>) -> Self {
        let mut s = FrameSource {
            parts: [frame.head(), frame.body],
            tail: frame.tail.as_volatile(),
            part: 0,
            offset: 0,
        };
        s.skip_empty();
        s
    }

    /// The length of piece `part`.
    fn piece_len(&self, part: usize) -> usize {
        match self.parts.get(part) {
            Some(p) => p.len(),
            None if part == 2 => self.tail.len(),
            None => 0,
        }
    }

    fn skip_empty(&mut self) {
        while self.part < 3 && self.offset >= self.piece_len(self.part) {
            self.part += 1;
            self.offset = 0;
        }
    }

    /// Bytes still to write.
    pub(crate) fn remaining(&self) -> usize {
        (self.part..3).map(|p| self.piece_len(p)).sum::<usize>() - self.offset
    }

    /// Whether `dst` overlaps a byte still to be written (a frame's tail lies in guest
    /// memory, possibly under a receive buffer of the same memory; copying would then write
    /// into the frame it reads).
    pub(crate) fn overlaps(&self, dst: &VolatileSlice<'_>) -> bool {
        let to = (dst.ptr_guard().as_ptr(), dst.len());
        let local = self.parts.iter().skip(self.part).any(|p| overlap(p, dst));
        let tail = self.part <= 2
            && spans_overlap(self.tail.ptr_guard().as_ptr(), self.tail.len(), to.0, to.1);
        local || tail
    }

    /// Copies as much as fits into `dst`; returns the bytes copied.
    fn fill(&mut self, dst: &VolatileSlice<'_>) -> usize {
        let mut done = 0;
        while done < dst.len() && self.part < 3 {
            let left = self.piece_len(self.part) - self.offset;
            let n = left.min(dst.len() - done);
            if let Ok(d) = dst.subslice(done, n) {
                match self.parts.get(self.part) {
                    Some(p) => {
                        if let Some(src) = p.get(self.offset..self.offset + n) {
                            d.copy_from(src);
                        }
                    }
                    None => {
                        if let Ok(src) = self.tail.subslice(self.offset, n) {
                            src.copy_to_volatile_slice(d);
                        }
                    }
                }
            }
            done += n;
            self.offset += n;
            self.skip_empty();
        }
        done
    }
}

/// Whether the bytes of `src` and `dst` share an address.
pub(crate) fn overlap(src: &[u8], dst: &VolatileSlice<'_>) -> bool {
    spans_overlap(src.as_ptr(), src.len(), dst.ptr_guard().as_ptr(), dst.len())
}

/// Writes the virtio-net header describing `info` and `num_buffers` into `slot` (its
/// `hdr_len` bytes). The 12-byte header goes as one volatile store of bytes made from two
/// words built in registers ([`virtio_net::header_words`]), never a `memcpy` call; the
/// 10-byte legacy one, which has no `num_buffers`, as bytes.
pub(crate) fn write_header(slot: &VolatileSlice<'_>, info: &OffloadInfo, num_buffers: u16) {
    let bytes = header_bytes(info, num_buffers);
    match slot.get_ref::<[u8; virtio_net::HEADER_LEN]>(0) {
        // Stored only when the buffer holds another header (see `GuestBytes::store_header`).
        Ok(whole) if slot.len() == virtio_net::HEADER_LEN => {
            if whole.load() != bytes {
                whole.store(bytes);
            }
        }
        _ => {
            if let Some(b) = bytes.get(..slot.len()) {
                slot.copy_from(b);
            }
        }
    }
}

fn header_bytes(info: &OffloadInfo, num_buffers: u16) -> [u8; virtio_net::HEADER_LEN] {
    let (low, high) = virtio_net::header_words(info, num_buffers);
    let mut bytes = [0u8; virtio_net::HEADER_LEN];
    bytes[..8].copy_from_slice(&low.to_le_bytes());
    bytes[8..].copy_from_slice(&high.to_le_bytes());
    bytes
}

/// Where a frame's virtio-net header goes in its first receive chain: usually the start of
/// its first buffer, but a driver may spread the header over several descriptors (virtio
/// 1.x makes no layout assumption), so up to one piece per byte.
#[derive(Debug, Default)]
pub(crate) struct HeaderSlot<'m> {
    pieces: [Option<VolatileSlice<'m>>; virtio_net::HEADER_LEN],
    count: usize,
}

impl<'m> HeaderSlot<'m> {
    fn push(&mut self, piece: VolatileSlice<'m>) {
        if let Some(slot) = self.pieces.get_mut(self.count) {
            *slot = Some(piece);
            self.count += 1;
        }
    }

    /// Writes the header saying `info` and `num_buffers` over the pieces.
    pub(crate) fn write(&self, info: &OffloadInfo, num_buffers: u16) {
        if let [Some(only), None, ..] = &self.pieces {
            write_header(only, info, num_buffers);
            return;
        }
        let bytes = header_bytes(info, num_buffers);
        let mut at = 0;
        for piece in self.pieces.iter().flatten() {
            if let Some(b) = bytes.get(at..at + piece.len()) {
                piece.copy_from(b);
            }
            at += piece.len();
        }
    }
}

/// One receive chain after writing.
#[derive(Debug)]
pub(crate) struct RxChainWritten<'m> {
    pub(crate) head: u16,
    /// Bytes written into the chain (header included).
    pub(crate) len: u32,
    /// Where the virtio-net header goes (first chain of a frame only).
    pub(crate) header: Option<HeaderSlot<'m>>,
}

/// Writes the next bytes of `src` into receive chain `chain`. When `hdr_len > 0` the
/// chain is a frame's first: its first `hdr_len` bytes are kept for the header, in its
/// first buffer or spread over the first few; a chain too short for them breaks the queue
/// (no frame could ever use it). (`RingWriter::put` writes a first chain that is one buffer
/// taking the whole frame itself, without this walk.) Afterwards `chain` tells how many
/// descriptors were read.
pub(crate) fn write_rx_chain<'m>(
    chain: &mut DescChain<'_, 'm>,
    table: TableRef,
    hdr_len: usize,
    src: &mut FrameSource<'_>,
) -> Result<RxChainWritten<'m>, ChainError> {
    let head = chain.head_index();
    let view = chain.view();
    let mut written = 0usize;
    let mut need_header = hdr_len;
    let mut header = HeaderSlot::default();
    let mut ended = false;
    'walk: for desc in chain.by_ref() {
        if !desc.is_write_only() {
            return Err(ChainError::Fault(QueueFault::WrongDirection));
        }
        ended = !desc.has_next();
        if desc.len() == 0 {
            continue;
        }
        for slice in buffer_slices(view, &desc)? {
            let mut slice = slice.map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?;
            if src.overlaps(&slice) {
                return Err(ChainError::Drop(FrameDrop::BufferOverlapsFrame));
            }
            if need_header > 0 {
                let n = slice.len().min(need_header);
                header.push(
                    slice
                        .subslice(0, n)
                        .map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?,
                );
                slice = slice
                    .offset(n)
                    .map_err(|_| ChainError::Fault(QueueFault::AddressOutOfRange))?;
                written += n;
                need_header -= n;
                if need_header > 0 {
                    continue;
                }
            }
            written += src.fill(&slice);
            if src.remaining() == 0 {
                ended = true;
                break 'walk;
            }
        }
    }
    if !ended {
        return Err(ChainError::Fault(cut_short(chain, table, head)));
    }
    if need_header > 0 {
        return Err(ChainError::Fault(QueueFault::ChainShorterThanHeader));
    }
    Ok(RxChainWritten {
        head,
        len: u32::try_from(written).map_err(|_| ChainError::Fault(QueueFault::ChainTooLarge))?,
        header: (hdr_len > 0).then_some(header),
    })
}

/// Names why the chain at `head` ended early: a second walk, step by step, over the raw
/// descriptors (cold path; the guest may have changed them meanwhile, hence the fallback).
pub(crate) fn diagnose(mem: &GuestMemoryMmap, table: TableRef, head: u16) -> QueueFault {
    if head >= table.size {
        return QueueFault::HeadIndexOutOfRange;
    }
    let mut desc_table = table.desc_table;
    let mut size = table.size;
    let mut index = head;
    let mut ttl = table.size;
    let mut indirect = false;
    let mut total: u64 = 0;
    let mut buffers = 0u16;
    loop {
        if ttl == 0 {
            return QueueFault::ChainTooLong;
        }
        if buffers >= MAX_CHAIN_DESCRIPTORS {
            return QueueFault::TooManyDescriptors;
        }
        if index >= size {
            return QueueFault::NextIndexOutOfRange;
        }
        let Some(addr) = desc_table.0.checked_add(u64::from(index) * 16) else {
            return QueueFault::DescriptorUnreadable;
        };
        let Ok(desc) = mem.read_obj::<Descriptor>(GuestAddress(addr)) else {
            return QueueFault::DescriptorUnreadable;
        };
        let flags = u32::from(desc.flags());
        if flags & VRING_DESC_F_INDIRECT != 0 {
            if indirect || desc.len() == 0 || desc.len() % 16 != 0 || desc.len() / 16 > 0xffff {
                return QueueFault::BadIndirectTable;
            }
            // A table starting in guest memory must lie wholly inside one region (the walk
            // maps it whole); one starting outside is unreadable, found below.
            let whole = usize::try_from(desc.len())
                .is_ok_and(|len| GuestMemoryBackend::get_slice(mem, desc.addr(), len).is_ok());
            if !whole && mem.find_region(desc.addr()).is_some() {
                return QueueFault::BadIndirectTable;
            }
            desc_table = desc.addr();
            size = u16::try_from(desc.len() / 16).unwrap_or(0);
            index = 0;
            ttl = size;
            indirect = true;
            continue;
        }
        total += u64::from(desc.len());
        if total > u64::from(u32::MAX) {
            return QueueFault::ChainTooLarge;
        }
        if flags & VRING_DESC_F_NEXT == 0 {
            return QueueFault::MalformedChain;
        }
        index = desc.next();
        ttl -= 1;
        buffers += 1;
    }
}

#[cfg(test)]
mod tests;
