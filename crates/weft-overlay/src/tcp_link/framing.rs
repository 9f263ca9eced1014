//! The TCP link's wire format, and the reassembly of frames from a byte stream.
//!
//! Every frame travels as a 22-byte header followed by the frame's bytes:
//!
//! ```text
//!  0      3   4          8          12                          22
//! +------+---+----------+----------+----------------------------+----------...
//! | "WFT"| v | link id  | length   | virtio-net header (legacy) | frame
//! +------+---+----------+----------+----------------------------+----------...
//! ```
//!
//! - magic `WFT` and version [`VERSION`]: a peer speaking anything else is cut off;
//! - link id (big-endian): both ends are configured with the same number, so a peer wired to
//!   the wrong link (another switch, another tenant) is detected and cut off;
//! - length (big-endian): the frame's bytes, [`MIN_FRAME_LEN`] to [`MAX_WIRE_FRAME_LEN`] (a
//!   64 KB TSO/USO super-frame plus its Ethernet header and two VLAN tags). A length outside
//!   that range would desynchronize or bloat the stream: the connection is cut;
//! - the 10-byte legacy virtio-net header (little-endian, as virtio has it) carries the
//!   frame's offload state, so super-frames and pending checksums cross the link unsegmented
//!   (dual-stack paper §6). It is validated like a guest's; a frame with a bad one is dropped
//!   alone, since its length still frames the stream.
//!
//! [`Reassembler`] keeps one fixed buffer: the socket reads into its free tail, complete
//! frames are lent in place, and the partial frame at the end moves to the front only when
//! the tail is too short for a largest frame. Nothing allocates per frame.

use std::ops::Range;

use weft_packet::virtio_net::{VirtioNetHeader, LEGACY_HEADER_LEN};
use weft_packet::OffloadInfo;

use super::stats::TcpLinkDrop;

/// The magic bytes that open every frame header.
pub const MAGIC: [u8; 3] = *b"WFT";
/// The wire format's version.
pub const VERSION: u8 = 1;
/// Length of the frame header.
pub const HEADER_LEN: usize = 12 + LEGACY_HEADER_LEN;
/// Shortest frame: an Ethernet header.
pub const MIN_FRAME_LEN: usize = 14;
/// Longest frame on the wire: a 64 KB super-frame, Ethernet header and two VLAN tags.
pub const MAX_WIRE_FRAME_LEN: usize = 65_535 + 22;

mod field {
    use std::ops::Range;
    pub(super) const MAGIC: Range<usize> = 0..3;
    pub(super) const VERSION: usize = 3;
    pub(super) const LINK_ID: Range<usize> = 4..8;
    pub(super) const LENGTH: Range<usize> = 8..12;
    pub(super) const VNET: Range<usize> = 12..22;
}

/// Writes the header of a `frame_len`-byte frame into `out`.
pub fn write_header(
    out: &mut [u8; HEADER_LEN],
    link_id: u32,
    frame_len: u32,
    offload: &OffloadInfo,
) {
    out[field::MAGIC].copy_from_slice(&MAGIC);
    out[field::VERSION] = VERSION;
    out[field::LINK_ID].copy_from_slice(&link_id.to_be_bytes());
    out[field::LENGTH].copy_from_slice(&frame_len.to_be_bytes());
    let mut vnet = VirtioNetHeader::new_unchecked(&mut out[field::VNET]);
    vnet.set_offload_info(offload);
}

/// What a receiver checks frames against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeRules {
    /// The link id both ends are configured with.
    pub link_id: u32,
    /// Largest ordinary frame (MTU + 22).
    pub max_frame_len: usize,
    /// Accept super-frames and pending checksums (else frames carrying them are dropped).
    pub offloads: bool,
}

/// A decoded header: the frame's length, or why the stream must be cut.
fn parse_header(h: &[u8; HEADER_LEN], rules: &DecodeRules) -> Result<usize, TcpLinkDrop> {
    if h[field::MAGIC] != MAGIC {
        return Err(TcpLinkDrop::BadMagic);
    }
    if h[field::VERSION] != VERSION {
        return Err(TcpLinkDrop::BadVersion);
    }
    let word = |r: Range<usize>| {
        u32::from_be_bytes([h[r.start], h[r.start + 1], h[r.start + 2], h[r.start + 3]])
    };
    if word(field::LINK_ID) != rules.link_id {
        return Err(TcpLinkDrop::WrongLinkId);
    }
    let len = usize::try_from(word(field::LENGTH)).map_err(|_| TcpLinkDrop::BadLength)?;
    if !(MIN_FRAME_LEN..=MAX_WIRE_FRAME_LEN).contains(&len) {
        return Err(TcpLinkDrop::BadLength);
    }
    Ok(len)
}

/// The offload state of a complete frame, or why the frame alone is dropped.
fn frame_offload(
    h: &[u8; HEADER_LEN],
    frame_len: usize,
    rules: &DecodeRules,
) -> Result<OffloadInfo, TcpLinkDrop> {
    let vnet = VirtioNetHeader::new_unchecked(&h[field::VNET]);
    let offload = vnet
        .to_offload_info(frame_len)
        .map_err(|_| TcpLinkDrop::BadOffload)?;
    if !rules.offloads && (offload.needs_csum || offload.is_gso()) {
        return Err(TcpLinkDrop::BadOffload);
    }
    if !offload.is_gso() && frame_len > rules.max_frame_len {
        return Err(TcpLinkDrop::FrameTooBig);
    }
    Ok(offload)
}

/// One step of reassembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A complete, valid frame at this range of [`Reassembler::bytes`].
    Frame(Range<usize>, OffloadInfo),
    /// A complete frame the rules refuse (consumed; the stream goes on).
    Dropped(TcpLinkDrop),
    /// No complete frame buffered: read more.
    NeedMore,
}

/// Reassembles frames from a byte stream in one fixed buffer.
#[derive(Debug)]
pub struct Reassembler {
    buf: Vec<u8>,
    /// Start of the first byte not yet decoded.
    start: usize,
    /// End of the bytes received.
    end: usize,
}

impl Reassembler {
    /// Smallest buffer: room for a largest frame and its header after any partial one.
    pub const MIN_CAPACITY: usize = 2 * (HEADER_LEN + MAX_WIRE_FRAME_LEN);

    /// A reassembler with a buffer of `capacity` bytes (at least [`Self::MIN_CAPACITY`]).
    pub fn new(capacity: usize) -> Reassembler {
        Reassembler {
            buf: vec![0; capacity.max(Self::MIN_CAPACITY)],
            start: 0,
            end: 0,
        }
    }

    /// The buffer; ranges from [`Decoded::Frame`] index it.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The free tail to receive into (empty when full: decode and [`Self::compact`] first).
    pub fn spare(&mut self) -> &mut [u8] {
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were received into [`Self::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Bytes received but not decoded yet.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Decodes the next frame. `Err`: the stream is broken (cut the connection).
    pub fn next_frame(&mut self, rules: &DecodeRules) -> Result<Decoded, TcpLinkDrop> {
        if self.pending() < HEADER_LEN {
            return Ok(Decoded::NeedMore);
        }
        let Some(h) = self.buf.get(self.start..self.start + HEADER_LEN) else {
            return Ok(Decoded::NeedMore);
        };
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(h);
        let len = parse_header(&header, rules)?;
        let frame_start = self.start + HEADER_LEN;
        if self.end - frame_start < len {
            return Ok(Decoded::NeedMore);
        }
        self.start = frame_start + len;
        Ok(match frame_offload(&header, len, rules) {
            Ok(offload) => Decoded::Frame(frame_start..frame_start + len, offload),
            Err(reason) => Decoded::Dropped(reason),
        })
    }

    /// Moves the undecoded bytes to the front when the free tail could not take a largest
    /// frame. Only between batches: ranges lent before are invalid afterwards.
    pub fn compact(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < HEADER_LEN + MAX_WIRE_FRAME_LEN {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// A placeholder without a buffer (decodes nothing, receives nothing).
    pub(crate) fn empty() -> Reassembler {
        Reassembler {
            buf: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// The bytes received but not decoded yet.
    pub fn pending_bytes(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or(&[])
    }

    /// Starts over with `bytes` as the bytes received (a stream carried over from another
    /// process); false (nothing changed) when they do not fit the buffer.
    pub fn load(&mut self, bytes: &[u8]) -> bool {
        let Some(to) = self.buf.get_mut(..bytes.len()) else {
            return false;
        };
        to.copy_from_slice(bytes);
        self.start = 0;
        self.end = bytes.len();
        true
    }

    /// True when a whole frame (valid or not) is buffered: decoding goes on without reading.
    pub fn has_frame(&self) -> bool {
        let p = self.pending_bytes();
        let (Some(l), true) = (p.get(field::LENGTH), p.len() >= HEADER_LEN) else {
            return false;
        };
        let len =
            usize::try_from(u32::from_be_bytes([l[0], l[1], l[2], l[3]])).unwrap_or(usize::MAX);
        // A length that cuts the stream is acted on at once too.
        !(MIN_FRAME_LEN..=MAX_WIRE_FRAME_LEN).contains(&len) || p.len() - HEADER_LEN >= len
    }

    /// Forgets everything buffered (a new connection starts a new stream).
    pub fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}
