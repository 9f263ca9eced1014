//! IPv6 fixed headers (RFC 8200) and a bounded walk over the extension-header chain.
//!
//! The buffer may extend past the payload length (Ethernet padding): [`Ipv6Packet::payload`]
//! and the extension-header walk stop at the payload length. Jumbograms (payload length 0
//! with a Hop-by-Hop jumbo option) are not supported: their payload reads as empty.

use core::net::Ipv6Addr;

use crate::error::{ParseError, Result};

/// Next-header values of the extension headers the walk understands.
pub mod next_header {
    /// Hop-by-Hop Options; allowed only directly after the fixed header.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating Security Payload: opaque, ends the walk.
    pub const ESP: u8 = 50;
    /// Authentication Header.
    pub const AUTH: u8 = 51;
    /// No Next Header: nothing follows.
    pub const NO_NEXT_HEADER: u8 = 59;
    /// Destination Options.
    pub const DEST_OPTS: u8 = 60;

    /// Whether `next` names an extension header the walk steps over (rather than the
    /// upper-layer protocol, or ESP and No Next Header, where it stops).
    #[inline]
    pub fn is_walked_extension(next: u8) -> bool {
        matches!(next, HOP_BY_HOP | ROUTING | FRAGMENT | DEST_OPTS | AUTH)
    }
}

/// Most extension headers the walk accepts before giving up with
/// [`ParseError::BadExtensionHeader`]. Real traffic uses two or three.
pub const MAX_EXTENSION_HEADERS: usize = 8;

mod field {
    use core::ops::Range;
    pub(super) const VER_TC_FLOW: Range<usize> = 0..4;
    pub(super) const PAYLOAD_LEN: Range<usize> = 4..6;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Range<usize> = 8..24;
    pub(super) const DST: Range<usize> = 24..40;
    pub(super) const PAYLOAD: usize = 40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// Length of a Fragment extension header.
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// What a Fragment extension header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Fragment {
    /// Offset of this fragment's data in the original packet, in bytes (a multiple of 8).
    pub offset: u16,
    /// The M flag: more fragments follow.
    pub more_fragments: bool,
    /// Identification.
    pub ident: u32,
}

impl Ipv6Fragment {
    /// True for a real fragment; false for an "atomic fragment" (offset 0, M clear, RFC 6946),
    /// which is a whole packet.
    pub const fn is_fragment(&self) -> bool {
        self.more_fragments || self.offset != 0
    }
    /// True for the first fragment (offset 0, M set), the only one that carries the L4 header.
    pub const fn is_first_fragment(&self) -> bool {
        self.more_fragments && self.offset == 0
    }
}

/// The result of walking the extension-header chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6UpperLayer {
    /// The protocol after the extension headers: TCP, UDP, ICMPv6, ..., or
    /// [`next_header::NO_NEXT_HEADER`], or [`next_header::ESP`] (opaque, the walk stops there).
    /// For a non-first fragment, the protocol of the fragmented data.
    pub protocol: u8,
    /// Offset of the upper-layer header (or of the fragment data) from the start of the IPv6
    /// header; at most `40 + payload length`.
    pub offset: usize,
    /// The Fragment header, if the chain has one.
    pub fragment: Option<Ipv6Fragment>,
}

impl Ipv6UpperLayer {
    /// True when the packet is a fragment (see [`Ipv6Fragment::is_fragment`]).
    pub fn is_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| f.is_fragment())
    }
    /// True when the packet is the first fragment of a fragmented packet.
    pub fn is_first_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| f.is_first_fragment())
    }
}

/// A view over an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer and checks it (see [`check_len`](Self::check_len)).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures no accessor panics. Errors: fewer than 40 bytes, or a payload length past the
    /// buffer ([`ParseError::Truncated`]); version not 6 ([`ParseError::BadVersion`]).
    /// The extension headers are checked by [`upper_layer`](Self::upper_layer).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_len_of(self.buffer.as_ref().len())
    }

    /// [`check_len`](Self::check_len) for a packet of `available` bytes of which the buffer
    /// holds only the first ones (a snapshot of a frame's head): the same errors, with
    /// `available` standing for the buffer's length. Reads only the first six bytes, and none
    /// when `available` is below 40.
    ///
    /// One more error, checked second, keeps the fixed-field accessors from panicking: a buffer
    /// holding fewer than 40 bytes ([`ParseError::Truncated`] with the held length). After
    /// success, [`payload`](Self::payload) and [`upper_layer`](Self::upper_layer) see an empty
    /// payload unless the buffer holds it whole; walk the chain with
    /// [`upper_layer_prefix`](Self::upper_layer_prefix) instead.
    #[inline]
    pub fn check_len_of(&self, available: usize) -> Result<()> {
        if available < HEADER_LEN {
            return Err(ParseError::truncated(HEADER_LEN, available));
        }
        let held = self.buffer.as_ref().len();
        if held < HEADER_LEN {
            return Err(ParseError::truncated(HEADER_LEN, held));
        }
        if self.version() != 6 {
            return Err(ParseError::BadVersion);
        }
        let total = HEADER_LEN + usize::from(self.payload_len());
        if total > available {
            return Err(ParseError::truncated(total, available));
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }
    fn addr(&self, range: core::ops::Range<usize>) -> Ipv6Addr {
        let d = &self.buffer.as_ref()[range];
        let mut octets = [0u8; 16];
        octets.copy_from_slice(d);
        Ipv6Addr::from(octets)
    }

    /// The version nibble (6 once checked).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    /// Traffic class (DSCP in the upper six bits, ECN in the lower two).
    pub fn traffic_class(&self) -> u8 {
        let d = self.buffer.as_ref();
        (d[0] << 4) | (d[1] >> 4)
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }
    /// Payload length: everything after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::PAYLOAD_LEN];
        u16::from_be_bytes([d[0], d[1]])
    }
    /// Next header: the first extension header or the upper-layer protocol.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        self.addr(field::SRC)
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        self.addr(field::DST)
    }
    /// The payload (extension headers included), up to the payload length; empty if the
    /// payload length was changed to a bad value after the check.
    pub fn payload(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        self.buffer.as_ref().get(field::PAYLOAD..end).unwrap_or(&[])
    }

    /// Walks the extension headers to the upper-layer protocol.
    ///
    /// Understands Hop-by-Hop (first only), Routing, Fragment, Destination Options and AH; stops
    /// at ESP, No Next Header, any other value (taken as the upper layer), and after the
    /// Fragment header of a non-first fragment (what follows is fragment data).
    ///
    /// Errors: Hop-by-Hop not first, a second Fragment header, or more than
    /// [`MAX_EXTENSION_HEADERS`] headers ([`ParseError::BadExtensionHeader`]); a header that
    /// runs past the payload length ([`ParseError::Truncated`], offsets from the start of the
    /// IPv6 header).
    pub fn upper_layer(&self) -> Result<Ipv6UpperLayer> {
        let Ok(result) = walk_extension_headers(self.next_header(), self.payload());
        result
    }

    /// [`upper_layer`](Self::upper_layer) for a buffer that may hold only the first bytes of
    /// the packet (checked with [`check_len_of`](Self::check_len_of)): the payload length
    /// comes from the header, the bytes from the buffer.
    ///
    /// `Some` is exactly what [`upper_layer`](Self::upper_layer) gives on the whole packet;
    /// `None` when the walk needs a byte of the payload the buffer does not hold. The walk
    /// reads the first two bytes of each header (eight of a Fragment header), so long options
    /// need not be held, only the headers' starts.
    pub fn upper_layer_prefix(&self) -> Option<Result<Ipv6UpperLayer>> {
        let len = usize::from(self.payload_len());
        let after_header = self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[]);
        let held = after_header.get(..len).unwrap_or(after_header);
        walk_extension_headers(self.next_header(), Held { held, len }).ok()
    }
}

/// The payload bytes the extension-header walk reads: the whole payload (a slice), or the
/// first bytes of a longer one ([`Held`]). One walk serves both, so the prefix walk
/// can only agree with the whole one or give up.
trait PayloadBytes<'a>: Copy {
    /// Why a byte within the payload cannot be read: uninhabited for a whole payload.
    type Missing;
    /// The payload length.
    fn len(self) -> usize;
    /// The payload bytes `start..end`: `Ok(None)` past the payload length.
    fn get(self, start: usize, end: usize)
        -> core::result::Result<Option<&'a [u8]>, Self::Missing>;
}

impl<'a> PayloadBytes<'a> for &'a [u8] {
    type Missing = core::convert::Infallible;
    #[inline]
    fn len(self) -> usize {
        <[u8]>::len(self)
    }
    #[inline]
    fn get(
        self,
        start: usize,
        end: usize,
    ) -> core::result::Result<Option<&'a [u8]>, Self::Missing> {
        Ok(<[u8]>::get(self, start..end))
    }
}

/// The first bytes (`held`) of something `len` bytes long (an IPv6 payload here, a whole
/// frame in `summary.rs`); `held.len() <= len`.
#[derive(Clone, Copy)]
pub(crate) struct Held<'a> {
    pub(crate) held: &'a [u8],
    pub(crate) len: usize,
}

/// A byte the walk or parse needs is beyond the bytes held.
pub(crate) struct NotHeld;

impl<'a> PayloadBytes<'a> for Held<'a> {
    type Missing = NotHeld;
    fn len(self) -> usize {
        self.len
    }
    fn get(self, start: usize, end: usize) -> core::result::Result<Option<&'a [u8]>, NotHeld> {
        match self.held.get(start..end) {
            Some(bytes) => Ok(Some(bytes)),
            None if start <= end && end <= self.len => Err(NotHeld),
            None => Ok(None),
        }
    }
}

/// The walk behind [`Ipv6Packet::upper_layer`] and [`Ipv6Packet::upper_layer_prefix`];
/// `payload` is everything after the fixed header. The outer `Err` only when a byte it needs is
/// not held; truncation errors give offsets from the start of the IPv6 header.
fn walk_extension_headers<'a, P: PayloadBytes<'a>>(
    first: u8,
    payload: P,
) -> core::result::Result<Result<Ipv6UpperLayer>, P::Missing> {
    let available = HEADER_LEN + payload.len();
    // The header starting at `start` needs `len` bytes (8 when its length byte is missing:
    // no extension header is shorter).
    let truncated =
        |start: usize, len: usize| ParseError::truncated(HEADER_LEN + start + len, available);
    let mut next = first;
    let mut at = 0usize;
    let mut fragment: Option<Ipv6Fragment> = None;
    let mut count = 0usize;
    loop {
        let len = match next {
            next_header::HOP_BY_HOP if count != 0 => {
                return Ok(Err(ParseError::BadExtensionHeader))
            }
            next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS => {
                match payload.get(at + 1, at + 2)? {
                    Some(&[words]) => (usize::from(words) + 1) * 8,
                    _ => return Ok(Err(truncated(at, 8))),
                }
            }
            next_header::AUTH => match payload.get(at + 1, at + 2)? {
                Some(&[words]) => (usize::from(words) + 2) * 4,
                _ => return Ok(Err(truncated(at, 8))),
            },
            next_header::FRAGMENT if fragment.is_some() => {
                return Ok(Err(ParseError::BadExtensionHeader))
            }
            next_header::FRAGMENT => FRAGMENT_HEADER_LEN,
            protocol => {
                return Ok(Ok(Ipv6UpperLayer {
                    protocol,
                    offset: HEADER_LEN + at,
                    fragment,
                }));
            }
        };
        if count == MAX_EXTENSION_HEADERS {
            return Ok(Err(ParseError::BadExtensionHeader));
        }
        count += 1;
        if at + len > payload.len() {
            return Ok(Err(truncated(at, len)));
        }
        // Only the next-header byte is read (all eight bytes of a Fragment header): a long
        // header's options need not be held.
        let is_fragment_header = next == next_header::FRAGMENT;
        let read = if is_fragment_header {
            FRAGMENT_HEADER_LEN
        } else {
            1
        };
        let Some(header) = payload.get(at, at + read)? else {
            return Ok(Err(truncated(at, len)));
        };
        next = header.first().copied().unwrap_or_default();
        at += len;
        if is_fragment_header {
            let frag = parse_fragment_header(header);
            fragment = Some(frag);
            if frag.offset != 0 {
                // The rest is the middle of the original packet, not headers.
                return Ok(Ok(Ipv6UpperLayer {
                    protocol: next,
                    offset: HEADER_LEN + at,
                    fragment,
                }));
            }
        }
    }
}

/// Reads a Fragment header (the walk passes exactly 8 bytes; anything else reads as zeros).
fn parse_fragment_header(header: &[u8]) -> Ipv6Fragment {
    let h = <[u8; FRAGMENT_HEADER_LEN]>::try_from(header).unwrap_or_default();
    let offset_flags = u16::from_be_bytes([h[2], h[3]]);
    Ipv6Fragment {
        offset: offset_flags & 0xfff8,
        more_fragments: offset_flags & 1 != 0,
        ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_ver_tc_flow(&mut self, value: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&value.to_be_bytes());
    }
    /// Writes version 6, keeping traffic class and flow label.
    pub fn set_version(&mut self) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0x0fff_ffff) | 0x6000_0000);
    }
    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, value: u8) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0xf00f_ffff) | (u32::from(value) << 20));
    }
    /// Sets the flow label (low 20 bits of `value`).
    pub fn set_flow_label(&mut self, value: u32) {
        let v = self.ver_tc_flow();
        self.set_ver_tc_flow((v & 0xfff0_0000) | (value & 0x000f_ffff));
    }
    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::PAYLOAD_LEN].copy_from_slice(&value.to_be_bytes());
    }
    /// Sets the next header.
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value;
    }
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }
    /// Mutable payload, as [`payload`](Ipv6Packet::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        self.buffer
            .as_mut()
            .get_mut(field::PAYLOAD..end)
            .unwrap_or(&mut [])
    }
}

#[cfg(test)]
mod tests;
