//! TCP segments (RFC 9293), with checksums over the IPv4 or IPv6 pseudo-header.
//!
//! TCP has no length field: the segment is the whole buffer, so the caller slices it to the
//! IP payload length before wrapping it.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::error::{ParseError, Result};

/// Length of the TCP header without options.
pub const HEADER_LEN: usize = 20;
/// Largest TCP header (data offset 15 words).
pub const MAX_HEADER_LEN: usize = 60;
/// IP protocol number of TCP.
pub const PROTOCOL: u8 = 6;

/// Bits of the flags byte.
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push buffered data to the application.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment number is significant.
    pub const ACK: u8 = 0x10;
    /// The urgent pointer is significant.
    pub const URG: u8 = 0x20;
    /// ECN-Echo (RFC 3168).
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: u8 = 0x80;
}

mod field {
    use core::ops::Range;
    pub(super) const SRC_PORT: Range<usize> = 0..2;
    pub(super) const DST_PORT: Range<usize> = 2..4;
    pub(super) const SEQ_NUM: Range<usize> = 4..8;
    pub(super) const ACK_NUM: Range<usize> = 8..12;
    pub(super) const DATA_OFFSET: usize = 12;
    pub(super) const FLAGS: usize = 13;
    pub(super) const WINDOW: Range<usize> = 14..16;
    pub(super) const CHECKSUM: Range<usize> = 16..18;
    pub(super) const URGENT: Range<usize> = 18..20;
    pub(super) const OPTIONS: usize = 20;
}

/// Byte offset of the checksum in the TCP header (virtio `csum_offset` for TCP).
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;
/// Byte offset of the sequence number in the TCP header.
pub const SEQ_NUM_OFFSET: usize = field::SEQ_NUM.start;
/// Byte offset of the flags byte in the TCP header.
pub const FLAGS_OFFSET: usize = field::FLAGS;

/// A view over a TCP segment.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checks: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer and checks the header and its data offset.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Ensures every accessor is in bounds: the fixed header fits, the data offset is at least
    /// 5 words ([`ParseError::BadLength`] otherwise) and the options fit in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::truncated(HEADER_LEN, available));
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(ParseError::BadLength);
        }
        if header_len > available {
            return Err(ParseError::truncated(header_len, available));
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

    fn read_u32(&self, range: core::ops::Range<usize>) -> u32 {
        let d = &self.buffer.as_ref()[range];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.read_u16(field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.read_u16(field::DST_PORT)
    }
    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        self.read_u32(field::SEQ_NUM)
    }
    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        self.read_u32(field::ACK_NUM)
    }
    /// Data offset in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::DATA_OFFSET] >> 4
    }
    /// Header length in bytes (data offset × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
    }
    /// The flags byte (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    fn flag(&self, bit: u8) -> bool {
        self.flags() & bit != 0
    }
    /// FIN flag.
    pub fn fin(&self) -> bool {
        self.flag(flags::FIN)
    }
    /// SYN flag.
    pub fn syn(&self) -> bool {
        self.flag(flags::SYN)
    }
    /// RST flag.
    pub fn rst(&self) -> bool {
        self.flag(flags::RST)
    }
    /// PSH flag.
    pub fn psh(&self) -> bool {
        self.flag(flags::PSH)
    }
    /// ACK flag.
    pub fn ack(&self) -> bool {
        self.flag(flags::ACK)
    }
    /// URG flag.
    pub fn urg(&self) -> bool {
        self.flag(flags::URG)
    }
    /// ECE flag.
    pub fn ece(&self) -> bool {
        self.flag(flags::ECE)
    }
    /// CWR flag.
    pub fn cwr(&self) -> bool {
        self.flag(flags::CWR)
    }
    /// Receive window.
    pub fn window(&self) -> u16 {
        self.read_u16(field::WINDOW)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }
    /// Urgent pointer.
    pub fn urgent_pointer(&self) -> u16 {
        self.read_u16(field::URGENT)
    }
    /// The options (between the fixed header and the data offset).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }
    /// The payload (after the data offset, to the end of the buffer).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// True when the checksum is correct over the IPv4 pseudo-header (false if the segment is
    /// too long for an IPv4 packet).
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        pseudo_v4(src, dst, self.buffer.as_ref().len())
            .is_ok_and(|pseudo| self.sums_to_ffff(pseudo))
    }

    /// True when the checksum is correct over the IPv6 pseudo-header.
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        pseudo_v6(src, dst, self.buffer.as_ref().len())
            .is_ok_and(|pseudo| self.sums_to_ffff(pseudo))
    }

    fn sums_to_ffff(&self, pseudo: u16) -> bool {
        checksum::combine(pseudo, checksum::sum(self.buffer.as_ref())) == 0xffff
    }
}

/// Pseudo-header sum for a `len`-byte segment over IPv4.
fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> Result<u16> {
    let len = u16::try_from(len).map_err(|_| ParseError::BadLength)?;
    Ok(checksum::pseudo_header_v4(src, dst, PROTOCOL, len))
}

/// Pseudo-header sum for a `len`-byte segment over IPv6.
fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> Result<u16> {
    let len = u32::try_from(len).map_err(|_| ParseError::BadLength)?;
    Ok(checksum::pseudo_header_v6(src, dst, PROTOCOL, len))
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn write_u16(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    fn write_u32(&mut self, range: core::ops::Range<usize>, value: u32) {
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
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, value: u32) {
        self.write_u32(field::SEQ_NUM, value);
    }
    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, value: u32) {
        self.write_u32(field::ACK_NUM, value);
    }
    /// Sets the data offset (in words, 5..=15; the low nibble of its byte is kept). Accessors
    /// stay in bounds only if it keeps within the buffer: call `check_len` again if unsure.
    pub fn set_data_offset(&mut self, words: u8) {
        let byte = &mut self.buffer.as_mut()[field::DATA_OFFSET];
        *byte = (*byte & 0x0f) | (words << 4);
    }
    /// Sets the flags byte.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }
    fn set_flag(&mut self, bit: u8, on: bool) {
        let value = if on {
            self.flags() | bit
        } else {
            self.flags() & !bit
        };
        self.set_flags(value);
    }
    /// Sets or clears FIN.
    pub fn set_fin(&mut self, on: bool) {
        self.set_flag(flags::FIN, on);
    }
    /// Sets or clears SYN.
    pub fn set_syn(&mut self, on: bool) {
        self.set_flag(flags::SYN, on);
    }
    /// Sets or clears RST.
    pub fn set_rst(&mut self, on: bool) {
        self.set_flag(flags::RST, on);
    }
    /// Sets or clears PSH.
    pub fn set_psh(&mut self, on: bool) {
        self.set_flag(flags::PSH, on);
    }
    /// Sets or clears ACK.
    pub fn set_ack(&mut self, on: bool) {
        self.set_flag(flags::ACK, on);
    }
    /// Sets or clears URG.
    pub fn set_urg(&mut self, on: bool) {
        self.set_flag(flags::URG, on);
    }
    /// Sets or clears ECE.
    pub fn set_ece(&mut self, on: bool) {
        self.set_flag(flags::ECE, on);
    }
    /// Sets or clears CWR.
    pub fn set_cwr(&mut self, on: bool) {
        self.set_flag(flags::CWR, on);
    }
    /// Sets the receive window.
    pub fn set_window(&mut self, value: u16) {
        self.write_u16(field::WINDOW, value);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.write_u16(field::CHECKSUM, value);
    }
    /// Sets the urgent pointer.
    pub fn set_urgent_pointer(&mut self, value: u16) {
        self.write_u16(field::URGENT, value);
    }
    /// Mutable access to the options.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }
    /// Mutable access to the payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes and stores the checksum over the IPv4 pseudo-header.
    /// [`ParseError::BadLength`] if the segment is too long for an IPv4 packet.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<()> {
        let pseudo = pseudo_v4(src, dst, self.buffer.as_ref().len())?;
        self.fill_checksum_with(pseudo);
        Ok(())
    }

    /// Computes and stores the checksum over the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        let pseudo = pseudo_v6(src, dst, self.buffer.as_ref().len())?;
        self.fill_checksum_with(pseudo);
        Ok(())
    }

    fn fill_checksum_with(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let sum = checksum::combine(pseudo, checksum::sum(self.buffer.as_ref()));
        self.set_checksum(checksum::finish(sum));
    }
}

#[cfg(test)]
mod tests;
