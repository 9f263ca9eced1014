//! IPv4 headers (RFC 791).
//!
//! The buffer may extend past the total length (Ethernet pads short frames to 60 bytes):
//! [`Ipv4Packet::payload`] stops at the total length.

use core::net::Ipv4Addr;

use crate::checksum;
use crate::error::{ParseError, Result};

/// IP protocol numbers (IPv4 protocol field, IPv6 next header) the crate knows about.
pub mod protocol {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;
}

mod field {
    use core::ops::Range;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const TOTAL_LEN: Range<usize> = 2..4;
    pub(super) const IDENT: Range<usize> = 4..6;
    pub(super) const FLAGS_FRAG: Range<usize> = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Range<usize> = 10..12;
    pub(super) const SRC: Range<usize> = 12..16;
    pub(super) const DST: Range<usize> = 16..20;
    pub(super) const OPTIONS: usize = 20;
}

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = field::OPTIONS;
/// The longest IPv4 header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

/// Byte offset of the header checksum.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view over an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer and checks it (see [`check_len`](Self::check_len)).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures the header is a well-formed IPv4 header within the buffer, so no accessor panics.
    ///
    /// Errors, in the order checked: fewer than 20 bytes ([`ParseError::Truncated`]); version
    /// not 4 ([`ParseError::BadVersion`]); IHL below 5, header past the total length or past the
    /// buffer ([`ParseError::BadIhl`]); total length below 20 ([`ParseError::BadLength`]);
    /// total length past the buffer ([`ParseError::Truncated`]). The header checksum is not
    /// checked here (see [`verify_checksum`](Self::verify_checksum)).
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_len_of(self.buffer.as_ref().len())
    }

    /// [`check_len`](Self::check_len) for a packet of `available` bytes of which the buffer
    /// holds only the first ones (a snapshot of a frame's head): the same errors, with
    /// `available` standing for the buffer's length. Reads only the first four bytes, and none
    /// when `available` is below 20.
    ///
    /// One more error, checked second, keeps the fixed-field accessors from panicking: a buffer
    /// holding fewer than 20 bytes ([`ParseError::Truncated`] with the held length). After
    /// success, [`payload`](Self::payload) and [`options`](Self::options) are empty unless the
    /// buffer holds them whole.
    #[inline]
    pub fn check_len_of(&self, available: usize) -> Result<()> {
        if available < MIN_HEADER_LEN {
            return Err(ParseError::truncated(MIN_HEADER_LEN, available));
        }
        let held = self.buffer.as_ref().len();
        if held < MIN_HEADER_LEN {
            return Err(ParseError::truncated(MIN_HEADER_LEN, held));
        }
        if self.version() != 4 {
            return Err(ParseError::BadVersion);
        }
        let header_len = self.header_len();
        let total_len = usize::from(self.total_len());
        if header_len < MIN_HEADER_LEN {
            return Err(ParseError::BadIhl);
        }
        if total_len < MIN_HEADER_LEN {
            return Err(ParseError::BadLength);
        }
        if header_len > total_len || header_len > available {
            return Err(ParseError::BadIhl);
        }
        if total_len > available {
            return Err(ParseError::truncated(total_len, available));
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn be16(&self, range: core::ops::Range<usize>) -> u16 {
        let d = &self.buffer.as_ref()[range];
        u16::from_be_bytes([d[0], d[1]])
    }
    fn addr(&self, range: core::ops::Range<usize>) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[range];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// The version nibble (4 once checked).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Internet header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }
    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }
    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }
    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }
    /// Total length: header plus payload, in bytes.
    pub fn total_len(&self) -> u16 {
        self.be16(field::TOTAL_LEN)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        self.be16(field::IDENT)
    }
    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.be16(field::FLAGS_FRAG) & FLAG_DF != 0
    }
    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.be16(field::FLAGS_FRAG) & FLAG_MF != 0
    }
    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.be16(field::FLAGS_FRAG) & FRAG_OFFSET_MASK) << 3
    }
    /// True for any fragment: More Fragments set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.be16(field::FLAGS_FRAG) & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }
    /// True for the first fragment of a fragmented packet (offset 0, More Fragments set): the
    /// only fragment that carries the L4 header. False for unfragmented packets.
    pub fn is_first_fragment(&self) -> bool {
        self.be16(field::FLAGS_FRAG) & (FLAG_MF | FRAG_OFFSET_MASK) == FLAG_MF
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    /// Protocol of the payload (see [`protocol`]).
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        self.be16(field::CHECKSUM)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        self.addr(field::SRC)
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        self.addr(field::DST)
    }
    /// The header bytes, options included (empty if the IHL was changed to a bad value).
    pub fn header(&self) -> &[u8] {
        self.buffer.as_ref().get(..self.header_len()).unwrap_or(&[])
    }
    /// The options (empty if there are none, or if the IHL was changed to a bad value).
    pub fn options(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(field::OPTIONS..self.header_len())
            .unwrap_or(&[])
    }
    /// The payload: from the end of the header to the total length (padding excluded).
    /// Empty if the lengths were changed to bad values after the check.
    pub fn payload(&self) -> &[u8] {
        let range = self.header_len()..usize::from(self.total_len());
        self.buffer.as_ref().get(range).unwrap_or(&[])
    }
    /// True when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::is_valid(self.header())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_be16(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }
    fn set_flags_frag(&mut self, mask: u16, bits: u16) {
        let old = self.be16(field::FLAGS_FRAG);
        self.set_be16(field::FLAGS_FRAG, (old & !mask) | (bits & mask));
    }

    /// Writes version 4 and the header length in 32-bit words (low four bits of `ihl`).
    pub fn set_version_and_ihl(&mut self, ihl: u8) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (ihl & 0x0f);
    }
    /// Sets the DSCP (low six bits of `dscp`), keeping the ECN bits.
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }
    /// Sets the ECN bits (low two bits of `ecn`), keeping the DSCP.
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & !0x03) | (ecn & 0x03);
    }
    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        self.set_be16(field::TOTAL_LEN, value);
    }
    /// Sets the identification.
    pub fn set_ident(&mut self, value: u16) {
        self.set_be16(field::IDENT, value);
    }
    /// Sets the Don't Fragment flag.
    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flags_frag(FLAG_DF, if value { FLAG_DF } else { 0 });
    }
    /// Sets the More Fragments flag.
    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flags_frag(FLAG_MF, if value { FLAG_MF } else { 0 });
    }
    /// Sets the fragment offset in bytes, rounded down to a multiple of 8.
    pub fn set_frag_offset(&mut self, bytes: u16) {
        self.set_flags_frag(FRAG_OFFSET_MASK, bytes >> 3);
    }
    /// Sets the time to live.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }
    /// Sets the protocol.
    pub fn set_protocol(&mut self, value: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = value;
    }
    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_be16(field::CHECKSUM, value);
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.octets());
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.octets());
    }
    /// Computes and stores the header checksum (over the header the IHL describes, or the
    /// fixed 20 bytes if the IHL is bad).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let len = self.header_len().max(MIN_HEADER_LEN);
        let value = self
            .buffer
            .as_ref()
            .get(..len)
            .map_or(0, checksum::checksum);
        self.set_checksum(value);
    }
    /// Mutable payload, as [`payload`](Ipv4Packet::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        self.buffer.as_mut().get_mut(range).unwrap_or(&mut [])
    }
}

#[cfg(test)]
mod tests;
