//! The per-frame port security check: is the sending port allowed to send this frame?
//!
//! Runs on every frame from a port with port security enabled, so it reads only what it needs
//! (for a plain TCP or UDP frame from an allowed source: the source MAC, the EtherType, the IP
//! source and, for UDP, the ports), never allocates, and never panics, whatever a guest sends.
//! Every read is bounds-checked against the bytes the switch may read (`head`); a header the
//! check needs that lies past them, or past the frame, drops the frame as
//! [`DropReason::Malformed`]. Headers the check does not need are not read.

use core::net::{IpAddr, Ipv6Addr};

use weft_packet::ethernet::ethertype;
use weft_packet::ipv4::protocol;
use weft_packet::{ArpPacket, Ipv4Packet, Ipv6Packet, MacAddr, VlanStack};

use super::PortSecurity;
use crate::counters::DropReason;

/// DHCP server (and relay) port.
const DHCP_SERVER_PORT: u16 = 67;
/// DHCP client port.
const DHCP_CLIENT_PORT: u16 = 68;
/// DHCPv6 server (and relay) port.
const DHCPV6_SERVER_PORT: u16 = 547;

/// The ICMPv6 message types the check looks at.
mod icmpv6 {
    /// MLDv1 report.
    pub(super) const MLD_REPORT: u8 = 131;
    /// Router advertisement.
    pub(super) const ROUTER_ADVERTISEMENT: u8 = 134;
    /// Neighbour solicitation.
    pub(super) const NEIGHBOR_SOLICITATION: u8 = 135;
    /// Neighbour advertisement.
    pub(super) const NEIGHBOR_ADVERTISEMENT: u8 = 136;
    /// Redirect.
    pub(super) const REDIRECT: u8 = 137;
    /// MLDv2 report.
    pub(super) const MLDV2_REPORT: u8 = 143;
}

/// ND option: source link-layer address.
const ND_OPT_SOURCE_LL: u8 = 1;
/// ND option: target link-layer address.
const ND_OPT_TARGET_LL: u8 = 2;
/// Offset of the target address in a neighbour solicitation or advertisement (after type,
/// code, checksum and four bytes of flags / reserved).
const ND_TARGET_OFFSET: usize = 8;
/// Length of a neighbour solicitation or advertisement before its options.
const ND_FIXED_LEN: usize = ND_TARGET_OFFSET + 16;
/// Length of the fixed IPv6 header.
const IPV6_HEADER_LEN: usize = weft_packet::ipv6::HEADER_LEN;

/// The first bytes of a frame the check may read (never past the frame's end).
#[derive(Clone, Copy)]
struct Head<'a>(&'a [u8]);

impl<'a> Head<'a> {
    /// `N` bytes at `at`, or `Malformed` when they are not all readable.
    #[inline]
    fn array<const N: usize>(self, at: usize) -> Result<[u8; N], DropReason> {
        at.checked_add(N)
            .and_then(|end| self.0.get(at..end))
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or(DropReason::Malformed)
    }

    /// Everything from `at` on (empty past the end).
    #[inline]
    fn after(self, at: usize) -> &'a [u8] {
        self.0.get(at..).unwrap_or(&[])
    }
}

/// The modified EUI-64 link-local address (RFC 4291 appendix A) of `mac`: fe80::/64 with the
/// universal/local bit of the first byte flipped and ff:fe in the middle.
pub(crate) fn eui64_link_local(mac: MacAddr) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        a ^ 0x02,
        b,
        c,
        0xff,
        0xfe,
        d,
        e,
        f,
    ])
}

impl PortSecurity {
    /// Whether the port may send this frame: `Ok`, or the reason to drop it (the caller counts
    /// it).
    ///
    /// `head` holds the frame's first bytes the switch may read (the whole frame, or at least
    /// its first 128 bytes); bytes of it past `frame_len` are ignored. `frame_len` is the whole
    /// frame's length. The frame may carry up to two VLAN tags.
    ///
    /// What is checked, with the reason for a frame that fails:
    /// - the Ethernet source is one of `allowed_macs` when that is set (`SpoofedSrcMac`);
    /// - ARP: Ethernet/IPv4 only, the sender MAC is the Ethernet source, the sender IP is
    ///   allowed or 0.0.0.0 (a probe) (`SpoofedArp`);
    /// - IPv4: the source is allowed, or 0.0.0.0 in a DHCP client's UDP 68 → 67 datagram
    ///   (`SpoofedSrcIp`); no UDP from port 67 unless the port may serve DHCP (`RogueDhcp`);
    /// - IPv6: the source is allowed, or the Ethernet source's EUI-64 link-local address, or
    ///   :: in a neighbour solicitation (DAD) or MLD report (`SpoofedSrcIp`); no router
    ///   advertisement or redirect unless allowed (`RogueRa`); no UDP from port 547 unless the
    ///   port may serve DHCPv6 (`RogueDhcp`); a neighbour advertisement (or a DAD
    ///   solicitation) only for an allowed target, and link-layer address options only with
    ///   the Ethernet source (`SpoofedNd`);
    /// - a header needed for a check that is cut off, or an IPv6 extension-header chain that
    ///   does not fit the first fragment and the bytes readable (`Malformed`).
    ///
    /// Later fragments (non-zero offset) get only the source-address check: they carry no
    /// upper-layer header, and a receiver cannot reassemble them without the first fragment,
    /// which was checked whole.
    pub fn check(&self, head: &[u8], frame_len: usize) -> Result<(), DropReason> {
        let head = Head(head.get(..frame_len).unwrap_or(head));
        let src_mac = MacAddr(head.array::<6>(6)?);
        if !self.allowed_macs.is_empty() && !self.allowed_macs.contains(&src_mac) {
            return Err(DropReason::SpoofedSrcMac);
        }
        let tags = VlanStack::parse(head.0).map_err(|_| DropReason::Malformed)?;
        let l3 = tags.payload_offset();
        match tags.ethertype {
            ethertype::ARP => self.check_arp(head, l3, src_mac),
            ethertype::IPV4 => self.check_ipv4(head, l3, frame_len),
            ethertype::IPV6 => self.check_ipv6(head, l3, frame_len, src_mac),
            // Other protocols (RARP, LLDP, MPLS, ...) carry no address this check could hold
            // against the port's IP list: only the source MAC above applies to them.
            _ => Ok(()),
        }
    }

    /// Whether `ip` lies in one of the allowed prefixes.
    #[inline]
    fn ip_allowed(&self, ip: IpAddr) -> bool {
        self.allowed_ips.iter().any(|p| p.contains(ip))
    }

    /// Whether the port may use the IPv6 address `ip`: one of its prefixes, or the link-local
    /// address of the frame's source MAC.
    #[inline]
    fn ipv6_allowed(&self, ip: Ipv6Addr, src_mac: MacAddr) -> bool {
        self.ip_allowed(IpAddr::V6(ip)) || ip == eui64_link_local(src_mac)
    }

    /// ARP at `l3`.
    fn check_arp(&self, head: Head<'_>, l3: usize, src_mac: MacAddr) -> Result<(), DropReason> {
        let bytes = head.array::<{ weft_packet::arp::PACKET_LEN }>(l3)?;
        let arp = ArpPacket::new_unchecked(&bytes[..]);
        // The Ethernet source is already one of `allowed_macs` (when set), so a sender MAC
        // equal to it is too.
        if arp.check_format().is_err() || arp.sender_hardware_addr() != src_mac {
            return Err(DropReason::SpoofedArp);
        }
        let sender = arp.sender_protocol_addr();
        if !self.allowed_ips.is_empty()
            && !sender.is_unspecified()
            && !self.ip_allowed(IpAddr::V4(sender))
        {
            return Err(DropReason::SpoofedArp);
        }
        Ok(())
    }

    /// IPv4 at `l3`.
    fn check_ipv4(&self, head: Head<'_>, l3: usize, frame_len: usize) -> Result<(), DropReason> {
        let packet = Ipv4Packet::new_unchecked(head.after(l3));
        // IHL below 5, a header or total length past the frame, not version 4.
        packet
            .check_len_of(frame_len.saturating_sub(l3))
            .map_err(|_| DropReason::Malformed)?;
        let src = packet.src_addr();
        let src_allowed = self.allowed_ips.is_empty() || self.ip_allowed(IpAddr::V4(src));
        let has_udp_header = packet.protocol() == protocol::UDP && packet.frag_offset() == 0;
        if !has_udp_header {
            return if src_allowed {
                Ok(())
            } else {
                Err(DropReason::SpoofedSrcIp)
            };
        }
        if !src_allowed && !src.is_unspecified() {
            return Err(DropReason::SpoofedSrcIp);
        }
        // The ports, within the IP payload of this (first) fragment.
        let udp = l3 + packet.header_len();
        if udp + 4 > l3 + usize::from(packet.total_len()) {
            return Err(DropReason::Malformed);
        }
        let [s0, s1, d0, d1] = head.array::<4>(udp)?;
        let (src_port, dst_port) = (u16::from_be_bytes([s0, s1]), u16::from_be_bytes([d0, d1]));
        // A DHCP client has no address yet: it sends from 0.0.0.0:68 to port 67.
        if !src_allowed && (src_port, dst_port) != (DHCP_CLIENT_PORT, DHCP_SERVER_PORT) {
            return Err(DropReason::SpoofedSrcIp);
        }
        if src_port == DHCP_SERVER_PORT && !self.allow_dhcp_server {
            return Err(DropReason::RogueDhcp);
        }
        Ok(())
    }

    /// IPv6 at `l3`.
    fn check_ipv6(
        &self,
        head: Head<'_>,
        l3: usize,
        frame_len: usize,
        src_mac: MacAddr,
    ) -> Result<(), DropReason> {
        let packet = Ipv6Packet::new_unchecked(head.after(l3));
        // Cut off, a payload length past the frame, not version 6.
        packet
            .check_len_of(frame_len.saturating_sub(l3))
            .map_err(|_| DropReason::Malformed)?;
        let src = packet.src_addr();
        let restricted = !self.allowed_ips.is_empty();
        let src_allowed = !restricted || self.ipv6_allowed(src, src_mac);
        if !src_allowed && !src.is_unspecified() {
            return Err(DropReason::SpoofedSrcIp);
        }
        // From here `!src_allowed` means the source is :: on a restricted port, allowed only
        // in DAD and MLD reports. The whole extension-header chain must be readable and lie in
        // this fragment (RFC 7112): a chain that continues past it could hide a router
        // advertisement from the check (RFC 7113).
        let upper = match packet.upper_layer_prefix() {
            Some(Ok(upper)) => upper,
            None | Some(Err(_)) => return Err(DropReason::Malformed),
        };
        if upper.fragment.is_some_and(|f| f.offset != 0) {
            // A later fragment: no upper-layer header to check.
            return if src_allowed {
                Ok(())
            } else {
                Err(DropReason::SpoofedSrcIp)
            };
        }
        let at = l3 + upper.offset;
        let end = l3 + IPV6_HEADER_LEN + usize::from(packet.payload_len());
        match upper.protocol {
            protocol::UDP => {
                if !src_allowed {
                    return Err(DropReason::SpoofedSrcIp);
                }
                if at + 2 > end {
                    return Err(DropReason::Malformed);
                }
                let src_port = u16::from_be_bytes(head.array::<2>(at)?);
                if src_port == DHCPV6_SERVER_PORT && !self.allow_dhcp_server {
                    return Err(DropReason::RogueDhcp);
                }
                Ok(())
            }
            protocol::ICMPV6 => {
                if at >= end {
                    return Err(DropReason::Malformed);
                }
                let [ty] = head.array::<1>(at)?;
                let unspecified_ok = matches!(
                    ty,
                    icmpv6::NEIGHBOR_SOLICITATION | icmpv6::MLD_REPORT | icmpv6::MLDV2_REPORT
                );
                if !src_allowed && !unspecified_ok {
                    return Err(DropReason::SpoofedSrcIp);
                }
                match ty {
                    // Only routers send redirects.
                    icmpv6::ROUTER_ADVERTISEMENT | icmpv6::REDIRECT
                        if !self.allow_router_advertisements =>
                    {
                        Err(DropReason::RogueRa)
                    }
                    icmpv6::NEIGHBOR_SOLICITATION => {
                        // An ordinary solicitation's target is the neighbour being resolved,
                        // anyone's; a DAD one's is the address the port is about to use.
                        let check_target = restricted && src.is_unspecified();
                        self.check_nd(head, at, end, src_mac, check_target, ND_OPT_SOURCE_LL)
                    }
                    icmpv6::NEIGHBOR_ADVERTISEMENT => {
                        self.check_nd(head, at, end, src_mac, restricted, ND_OPT_TARGET_LL)
                    }
                    _ => Ok(()),
                }
            }
            _ if !src_allowed => Err(DropReason::SpoofedSrcIp),
            _ => Ok(()),
        }
    }

    /// A neighbour solicitation or advertisement at `at`, its IPv6 payload ending at `end`:
    /// the target (when `check_target`) must be the port's, and any `ll_option` (the source
    /// or target link-layer address option) must carry the Ethernet source.
    fn check_nd(
        &self,
        head: Head<'_>,
        at: usize,
        end: usize,
        src_mac: MacAddr,
        check_target: bool,
        ll_option: u8,
    ) -> Result<(), DropReason> {
        let options = at + ND_FIXED_LEN;
        if options > end {
            return Err(DropReason::SpoofedNd);
        }
        if check_target {
            let target = Ipv6Addr::from(head.array::<16>(at + ND_TARGET_OFFSET)?);
            if !self.ipv6_allowed(target, src_mac) {
                return Err(DropReason::SpoofedNd);
            }
        }
        // Options in 8-byte units to the end of the packet (RFC 4861 section 4.6). Each round
        // moves at least 8 bytes forward.
        let mut at = options;
        while at < end {
            if end - at < 2 {
                return Err(DropReason::SpoofedNd);
            }
            let [kind, units] = head.array::<2>(at)?;
            let len = usize::from(units) * 8;
            if len == 0 || len > end - at {
                return Err(DropReason::SpoofedNd);
            }
            // The address fills bytes 2..8 of the option (length 1 at least, so in the packet).
            if kind == ll_option && MacAddr(head.array::<6>(at + 2)?) != src_mac {
                return Err(DropReason::SpoofedNd);
            }
            at += len;
        }
        Ok(())
    }
}
