//! ARP (RFC 826) for Ethernet and IPv4, the only combination a virtual switch meets.

use core::net::Ipv4Addr;

use crate::error::{ParseError, Result};
use crate::ethernet::{ethertype, MacAddr};

/// ARP hardware type for Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// An ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1: who has `target_ip`?
    Request,
    /// 2: `sender_ip` is at `sender_mac`.
    Reply,
    /// Anything else (RARP, InARP, ...), kept as is.
    Other(u16),
}

impl From<u16> for ArpOperation {
    fn from(value: u16) -> Self {
        match value {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Other(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Other(other) => other,
        }
    }
}

mod field {
    use core::ops::Range;
    pub(super) const HTYPE: Range<usize> = 0..2;
    pub(super) const PTYPE: Range<usize> = 2..4;
    pub(super) const HLEN: usize = 4;
    pub(super) const PLEN: usize = 5;
    pub(super) const OPER: Range<usize> = 6..8;
    pub(super) const SHA: Range<usize> = 8..14;
    pub(super) const SPA: Range<usize> = 14..18;
    pub(super) const THA: Range<usize> = 18..24;
    pub(super) const TPA: Range<usize> = 24..28;
    pub(super) const END: usize = 28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::END;

/// A view over an ARP packet for Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4).
///
/// The buffer may be longer (Ethernet padding); bytes past [`PACKET_LEN`] are ignored.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking it: accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps a buffer, checks its length ([`ParseError::Truncated`]) and that it is
    /// Ethernet/IPv4 ARP ([`ParseError::Unsupported`] otherwise).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        packet.check_format()?;
        Ok(packet)
    }

    /// Ensures every accessor is in bounds.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        self.check_len_of(self.buffer.as_ref().len())
    }

    /// [`check_len`](Self::check_len) for a packet of `available` bytes of which the buffer
    /// holds only the first ones (a snapshot of a frame's head): [`ParseError::Truncated`]
    /// when `available` is below 28 or, so that no accessor panics, when the buffer holds
    /// fewer than 28 bytes (checked second, with the held length).
    #[inline]
    pub fn check_len_of(&self, available: usize) -> Result<()> {
        if available < PACKET_LEN {
            return Err(ParseError::truncated(PACKET_LEN, available));
        }
        let held = self.buffer.as_ref().len();
        if held < PACKET_LEN {
            return Err(ParseError::truncated(PACKET_LEN, held));
        }
        Ok(())
    }

    /// Ensures the packet is Ethernet/IPv4 ARP. Call after [`check_len`](Self::check_len).
    pub fn check_format(&self) -> Result<()> {
        if self.hardware_type() != HTYPE_ETHERNET
            || self.protocol_type() != ethertype::IPV4
            || self.hardware_len() != 6
            || self.protocol_len() != 4
        {
            return Err(ParseError::Unsupported);
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
    fn mac(&self, range: core::ops::Range<usize>) -> MacAddr {
        let d = &self.buffer.as_ref()[range];
        MacAddr([d[0], d[1], d[2], d[3], d[4], d[5]])
    }
    fn ipv4(&self, range: core::ops::Range<usize>) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[range];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// Hardware type (1 for Ethernet).
    pub fn hardware_type(&self) -> u16 {
        self.be16(field::HTYPE)
    }
    /// Protocol type (0x0800 for IPv4).
    pub fn protocol_type(&self) -> u16 {
        self.be16(field::PTYPE)
    }
    /// Hardware address length (6).
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    /// Protocol address length (4).
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    /// The operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(self.be16(field::OPER))
    }
    /// Sender hardware address.
    pub fn sender_hardware_addr(&self) -> MacAddr {
        self.mac(field::SHA)
    }
    /// Sender protocol address.
    pub fn sender_protocol_addr(&self) -> Ipv4Addr {
        self.ipv4(field::SPA)
    }
    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> MacAddr {
        self.mac(field::THA)
    }
    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        self.ipv4(field::TPA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes the fixed Ethernet/IPv4 fields: htype 1, ptype 0x0800, hlen 6, plen 4.
    pub fn set_ethernet_ipv4_format(&mut self) {
        let d = self.buffer.as_mut();
        d[field::HTYPE].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        d[field::PTYPE].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        d[field::HLEN] = 6;
        d[field::PLEN] = 4;
    }
    /// Sets the operation.
    pub fn set_operation(&mut self, op: ArpOperation) {
        self.buffer.as_mut()[field::OPER].copy_from_slice(&u16::from(op).to_be_bytes());
    }
    /// Sets the sender hardware address.
    pub fn set_sender_hardware_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&addr.0);
    }
    /// Sets the sender protocol address.
    pub fn set_sender_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&addr.octets());
    }
    /// Sets the target hardware address.
    pub fn set_target_hardware_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&addr.0);
    }
    /// Sets the target protocol address.
    pub fn set_target_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&addr.octets());
    }
}

/// The meaning of an Ethernet/IPv4 ARP packet, to build one with [`ArpRepr::emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// The operation.
    pub operation: ArpOperation,
    /// Sender hardware address.
    pub sender_mac: MacAddr,
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address (zero in a request).
    pub target_mac: MacAddr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// A request: who has `target_ip`? Tell `sender_ip` at `sender_mac`.
    pub const fn request(sender_mac: MacAddr, sender_ip: Ipv4Addr, target_ip: Ipv4Addr) -> Self {
        ArpRepr {
            operation: ArpOperation::Request,
            sender_mac,
            sender_ip,
            target_mac: MacAddr::ZERO,
            target_ip,
        }
    }

    /// The reply to `request` from the owner of its target address, at `owner_mac`.
    pub const fn reply_to(request: &ArpRepr, owner_mac: MacAddr) -> Self {
        ArpRepr {
            operation: ArpOperation::Reply,
            sender_mac: owner_mac,
            sender_ip: request.target_ip,
            target_mac: request.sender_mac,
            target_ip: request.sender_ip,
        }
    }

    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Self {
        ArpRepr {
            operation: packet.operation(),
            sender_mac: packet.sender_hardware_addr(),
            sender_ip: packet.sender_protocol_addr(),
            target_mac: packet.target_hardware_addr(),
            target_ip: packet.target_protocol_addr(),
        }
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet at the start of `buf` and returns its length ([`PACKET_LEN`]).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let mut packet = ArpPacket::new_unchecked(buf);
        packet.check_len()?;
        packet.set_ethernet_ipv4_format();
        packet.set_operation(self.operation);
        packet.set_sender_hardware_addr(self.sender_mac);
        packet.set_sender_protocol_addr(self.sender_ip);
        packet.set_target_hardware_addr(self.target_mac);
        packet.set_target_protocol_addr(self.target_ip);
        Ok(PACKET_LEN)
    }
}

/// Length of an announcement frame: the Ethernet minimum without its FCS.
pub const ANNOUNCEMENT_LEN: usize = 60;

/// The frame a hypervisor broadcasts for a guest that moved, so that every switch on the
/// way learns `mac` behind its new port: a RARP "request reverse" (operation 3) from and
/// about `mac`, no addresses, padded to 60 bytes — byte for byte what QEMU sends
/// (`qemu_announce_self`) and DPDK's vhost library injects for `SEND_RARP`.
pub fn rarp_announcement(mac: MacAddr) -> [u8; ANNOUNCEMENT_LEN] {
    let mut frame = [0u8; ANNOUNCEMENT_LEN];
    let mut eth = crate::ethernet::EthernetFrame::new_unchecked(&mut frame[..]);
    eth.set_dst_addr(MacAddr::BROADCAST);
    eth.set_src_addr(mac);
    eth.set_ethertype(ethertype::RARP);
    let mut packet = ArpPacket::new_unchecked(&mut frame[crate::ethernet::HEADER_LEN..]);
    packet.set_ethernet_ipv4_format();
    packet.set_operation(ArpOperation::Other(3));
    packet.set_sender_hardware_addr(mac);
    packet.set_target_hardware_addr(mac);
    frame
}

#[cfg(test)]
mod tests;
