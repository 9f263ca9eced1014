//! The exact-match key of a packet: what the flow table matches on and the flow cache is
//! indexed by.

use core::net::IpAddr;

use weft_packet::MacAddr;

use crate::types::{PortId, VlanId};

/// Every field a flow rule can match, read once per packet in the collect stage.
///
/// Fields a packet does not have are zero / `None` (a non-IP frame has no addresses; a
/// non-first IPv4 fragment has no L4 ports).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FlowKey {
    /// The port the packet arrived on.
    pub in_port: PortId,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source MAC.
    pub src_mac: MacAddr,
    /// The packet's VLAN inside the switch after ingress classification (access ports
    /// assign theirs; trunks take the tag). `0` = no VLAN.
    pub vlan: VlanId,
    /// The EtherType after any VLAN tags.
    pub ethertype: u16,
    /// IPv4/IPv6 source address.
    pub ip_src: Option<IpAddr>,
    /// IPv4/IPv6 destination address.
    pub ip_dst: Option<IpAddr>,
    /// IP protocol / IPv6 next header after extension headers (0 when not IP).
    pub ip_proto: u8,
    /// L4 source port (TCP/UDP/SCTP), ICMP type for ICMP; 0 otherwise.
    pub l4_src: u16,
    /// L4 destination port (TCP/UDP/SCTP), ICMP code for ICMP; 0 otherwise.
    pub l4_dst: u16,
}
