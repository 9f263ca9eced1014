//! UDP datagrams (RFC 768), with checksums over the IPv4 or IPv6 pseudo-header.
//!
//! The length field bounds the datagram: bytes of the buffer past it (Ethernet padding, for
//! instance) are not part of the payload nor of the checksum.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::error::{ParseError, Result};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// IP protocol number of UDP.
pub const PROTOCOL: u8 = 17;

mod field {
    use core::ops::Range;
    pub(super) const SRC_PORT: Range<usize> = 0..2;
    pub(super) const DST_PORT: Range<usize> = 2..4;
    pub(super) const LENGTH: Range<usize> = 4..6;
    pub(super) const CHECKSUM: Range<usize> = 6..8;
}

/// Byte offset of the checksum in the UDP header (virtio `csum_offset` for UDP).
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

/// A view over a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checks: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer and checks the header and the length field.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures every accessor is in bounds: the header fits, and the length field is at least
    /// the header and at most the buffer.
    pub fn check_len(&self) -> Result<()> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::truncated(HEADER_LEN, available));
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(ParseError::BadLength);
        }
        if len > available {
            return Err(ParseError::truncated(len, available));
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn read_u16(&self, range: core::ops::Range<usize>) -> u16 {
        let d = &self.buffer.as_ref()[range];
        u16::from_be_bytes([d[0], d[1]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.read_u16(field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.read_u16(field::DST_PORT)
    }
    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        self.read_u16(field::LENGTH)
    }
    /// True when the datagram carries no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }
    /// The checksum field (0 over IPv4 means "no checksum").
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }

    /// The datagram as the length field bounds it: header and payload.
    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    /// The payload, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        &self.datagram()[HEADER_LEN..]
    }

    /// True when the checksum is correct over the IPv4 pseudo-header, or absent (zero), which
    /// IPv4 allows.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let pseudo = checksum::pseudo_header_v4(src, dst, PROTOCOL, self.len());
        checksum::combine(pseudo, checksum::sum(self.datagram())) == 0xffff
    }

    /// True when the checksum is correct over the IPv6 pseudo-header. A zero checksum is
    /// invalid over IPv6 (RFC 8200 §8.1); tunnels allowed to omit it (RFC 6935) check
    /// [`checksum`](Self::checksum) first.
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let pseudo = checksum::pseudo_header_v6(src, dst, PROTOCOL, u32::from(self.len()));
        checksum::combine(pseudo, checksum::sum(self.datagram())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn write_u16(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.write_u16(field::SRC_PORT, value);
    }
    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.write_u16(field::DST_PORT, value);
    }
    /// Sets the length field. Accessors stay in bounds only if it keeps within the buffer:
    /// call [`check_len`](Self::check_len) again if unsure.
    pub fn set_len(&mut self, value: u16) {
        self.write_u16(field::LENGTH, value);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.write_u16(field::CHECKSUM, value);
    }
    /// Mutable access to the payload, bounded by the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header. A computed zero is sent
    /// as 0xffff, since zero means "no checksum".
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let pseudo = checksum::pseudo_header_v4(src, dst, PROTOCOL, self.len());
        self.fill_checksum_with(pseudo);
    }

    /// Computes and stores the checksum over the IPv6 pseudo-header (0 sent as 0xffff).
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let pseudo = checksum::pseudo_header_v6(src, dst, PROTOCOL, u32::from(self.len()));
        self.fill_checksum_with(pseudo);
    }

    fn fill_checksum_with(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let value = checksum::finish(checksum::combine(pseudo, checksum::sum(self.datagram())));
        self.set_checksum(if value == 0 { 0xffff } else { value });
    }
}

#[cfg(test)]
mod tests;
