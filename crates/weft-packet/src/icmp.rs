//! ICMPv4 (RFC 792) and ICMPv6 (RFC 4443) messages, and builders for the two errors that tell
//! a sender its packet is too big for the path: ICMPv4 Destination Unreachable / Fragmentation
//! Needed (RFC 1191) and ICMPv6 Packet Too Big.
//!
//! Both share the layout type (1), code (1), checksum (2), rest of header (4), body. ICMPv4's
//! checksum covers the message only; ICMPv6's also covers the IPv6 pseudo-header.
//!
//! The builders write the ICMP message only (not the IP header: its source address and TTL
//! are the caller's policy) and quote as much of the offending IP packet as keeps the whole
//! error datagram within 576 bytes (IPv4, RFC 1812 §4.3.2.3, assuming a 20-byte IP header)
//! or 1280 bytes (IPv6, RFC 4443 §2.4, assuming no extension headers).

use core::net::Ipv6Addr;

use crate::checksum;
use crate::error::{ParseError, Result};

/// Length of the ICMP header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;
/// IP protocol number of ICMPv4.
pub const PROTOCOL_V4: u8 = 1;
/// IPv6 next-header value of ICMPv6.
pub const PROTOCOL_V6: u8 = 58;
/// ICMPv4 type Destination Unreachable.
pub const V4_DEST_UNREACHABLE: u8 = 3;
/// ICMPv4 Destination Unreachable code "fragmentation needed and DF set".
pub const V4_CODE_FRAG_NEEDED: u8 = 4;
/// ICMPv6 type Packet Too Big.
pub const V6_PACKET_TOO_BIG: u8 = 2;
/// Most bytes of the offending packet an ICMPv4 error quotes: 576 - 20 (IP) - 8 (ICMP).
pub const V4_MAX_QUOTE: usize = 576 - 20 - HEADER_LEN;
/// Most bytes of the offending packet an ICMPv6 error quotes: 1280 - 40 (IPv6) - 8 (ICMP).
pub const V6_MAX_QUOTE: usize = 1280 - 40 - HEADER_LEN;
/// Fewest bytes of the offending packet an ICMPv4 error must quote: IP header and 64 bits.
const V4_MIN_QUOTE: usize = 20 + 8;
/// Fewest bytes of the offending packet the ICMPv6 builder quotes: IPv6 header and 64 bits.
const V6_MIN_QUOTE: usize = 40 + 8;

mod field {
    use core::ops::Range;
    pub(super) const TYPE: usize = 0;
    pub(super) const CODE: usize = 1;
    pub(super) const CHECKSUM: Range<usize> = 2..4;
    pub(super) const REST: Range<usize> = 4..8;
    pub(super) const MTU_V4: Range<usize> = 6..8;
    pub(super) const BODY: usize = 8;
}

/// Accessors shared by both views; `$name` is the view type.
macro_rules! icmp_common {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checks: accessors may panic until
            /// [`check_len`](Self::check_len) succeeds.
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }
            /// Wraps a buffer and checks that the header fits.
            pub fn new_checked(buffer: T) -> Result<Self> {
                let packet = Self::new_unchecked(buffer);
                packet.check_len()?;
                Ok(packet)
            }
            /// Ensures every accessor is in bounds.
            pub fn check_len(&self) -> Result<()> {
                let len = self.buffer.as_ref().len();
                if len < HEADER_LEN {
                    return Err(ParseError::truncated(HEADER_LEN, len));
                }
                Ok(())
            }
            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }
            /// Message type.
            pub fn msg_type(&self) -> u8 {
                self.buffer.as_ref()[field::TYPE]
            }
            /// Message code.
            pub fn code(&self) -> u8 {
                self.buffer.as_ref()[field::CODE]
            }
            /// Checksum field.
            pub fn checksum(&self) -> u16 {
                let d = &self.buffer.as_ref()[field::CHECKSUM];
                u16::from_be_bytes([d[0], d[1]])
            }
            /// The type-specific 32-bit word after the checksum.
            pub fn rest_of_header(&self) -> u32 {
                let d = &self.buffer.as_ref()[field::REST];
                u32::from_be_bytes([d[0], d[1], d[2], d[3]])
            }
            /// The message body (for errors: the quoted offending packet).
            pub fn body(&self) -> &[u8] {
                &self.buffer.as_ref()[field::BODY..]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Sets the message type.
            pub fn set_msg_type(&mut self, value: u8) {
                self.buffer.as_mut()[field::TYPE] = value;
            }
            /// Sets the message code.
            pub fn set_code(&mut self, value: u8) {
                self.buffer.as_mut()[field::CODE] = value;
            }
            /// Sets the checksum field.
            pub fn set_checksum(&mut self, value: u16) {
                self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
            }
            /// Sets the rest-of-header word.
            pub fn set_rest_of_header(&mut self, value: u32) {
                self.buffer.as_mut()[field::REST].copy_from_slice(&value.to_be_bytes());
            }
            /// Mutable access to the body.
            pub fn body_mut(&mut self) -> &mut [u8] {
                &mut self.buffer.as_mut()[field::BODY..]
            }
        }
    };
}

/// A view over an ICMPv4 message (the whole buffer is the message).
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

icmp_common!(Icmpv4Packet);

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Next-hop MTU of a Fragmentation Needed message (the low half of the rest of header).
    pub fn next_hop_mtu(&self) -> u16 {
        let d = &self.buffer.as_ref()[field::MTU_V4];
        u16::from_be_bytes([d[0], d[1]])
    }
    /// True when the checksum over the message is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::is_valid(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the next-hop MTU (and clears the unused high half of the rest of header).
    pub fn set_next_hop_mtu(&mut self, mtu: u16) {
        self.set_rest_of_header(u32::from(mtu));
    }
    /// Computes and stores the checksum over the message.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let value = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(value);
    }
}

/// A view over an ICMPv6 message (the whole buffer is the message).
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

icmp_common!(Icmpv6Packet);

/// Pseudo-header sum for a `len`-byte ICMPv6 message.
fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> Result<u16> {
    let len = u32::try_from(len).map_err(|_| ParseError::BadLength)?;
    Ok(checksum::pseudo_header_v6(src, dst, PROTOCOL_V6, len))
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// MTU of a Packet Too Big message (the rest of header).
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }
    /// True when the checksum over the IPv6 pseudo-header and the message is correct.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let data = self.buffer.as_ref();
        pseudo_v6(src, dst, data.len())
            .is_ok_and(|pseudo| checksum::combine(pseudo, checksum::sum(data)) == 0xffff)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the MTU of a Packet Too Big message.
    pub fn set_mtu(&mut self, mtu: u32) {
        self.set_rest_of_header(mtu);
    }
    /// Computes and stores the checksum over the IPv6 pseudo-header and the message.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        let pseudo = pseudo_v6(src, dst, self.buffer.as_ref().len())?;
        self.set_checksum(0);
        let sum = checksum::combine(pseudo, checksum::sum(self.buffer.as_ref()));
        self.set_checksum(checksum::finish(sum));
        Ok(())
    }
}

/// Copies the header and as much of `offending` as `max_quote` and `buf` allow (at least
/// `min_quote` bytes of it, or all of it if shorter) and returns the message.
fn quote_into<'b>(
    offending: &[u8],
    max_quote: usize,
    min_quote: usize,
    buf: &'b mut [u8],
) -> Result<&'b mut [u8]> {
    let needed = HEADER_LEN + offending.len().min(min_quote);
    if buf.len() < needed {
        return Err(ParseError::truncated(needed, buf.len()));
    }
    let quote_len = offending.len().min(max_quote).min(buf.len() - HEADER_LEN);
    let message = &mut buf[..HEADER_LEN + quote_len];
    message[..HEADER_LEN].fill(0);
    message[HEADER_LEN..].copy_from_slice(&offending[..quote_len]);
    Ok(message)
}

/// Writes an ICMPv4 Destination Unreachable / Fragmentation Needed message announcing
/// `next_hop_mtu`, quoting the offending IPv4 packet `offending` (IP header onwards), into
/// `buf`. Returns the message length (to be carried in an IPv4 packet, protocol 1).
///
/// Quotes at most [`V4_MAX_QUOTE`] bytes; `buf` must hold at least the header and 28 bytes
/// of quote (RFC 792's IP header and 64 bits), or [`ParseError::Truncated`].
pub fn emit_frag_needed_v4(next_hop_mtu: u16, offending: &[u8], buf: &mut [u8]) -> Result<usize> {
    let message = quote_into(offending, V4_MAX_QUOTE, V4_MIN_QUOTE, buf)?;
    let len = message.len();
    let mut icmp = Icmpv4Packet::new_unchecked(message);
    icmp.set_msg_type(V4_DEST_UNREACHABLE);
    icmp.set_code(V4_CODE_FRAG_NEEDED);
    icmp.set_next_hop_mtu(next_hop_mtu);
    icmp.fill_checksum();
    Ok(len)
}

/// Writes an ICMPv6 Packet Too Big message announcing `mtu`, quoting the offending IPv6 packet
/// `offending` (IPv6 header onwards), into `buf`, with the checksum computed for an IPv6
/// packet from `src` to `dst` (the error's own addresses). Returns the message length (to be
/// carried with next header 58).
///
/// Quotes at most [`V6_MAX_QUOTE`] bytes; `buf` must hold at least the header and 48 bytes of
/// quote, or [`ParseError::Truncated`].
pub fn emit_packet_too_big_v6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    mtu: u32,
    offending: &[u8],
    buf: &mut [u8],
) -> Result<usize> {
    let message = quote_into(offending, V6_MAX_QUOTE, V6_MIN_QUOTE, buf)?;
    let len = message.len();
    let mut icmp = Icmpv6Packet::new_unchecked(message);
    icmp.set_msg_type(V6_PACKET_TOO_BIG);
    icmp.set_mtu(mtu);
    icmp.fill_checksum(src, dst)?;
    Ok(len)
}

#[cfg(test)]
mod tests;
