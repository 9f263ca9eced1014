//! Why a flow rule was refused.

use core::net::IpAddr;

use weft_packet::MacAddr;

use crate::flow_match::MatchField;
use crate::types::{PortId, VlanId, MAX_PORTS};

use super::action::MAX_ACTIONS;

/// A rule the flow table refuses; each message says what is wrong and how to fix it.
/// A refused insert changes nothing in the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// A match on a port that cannot exist.
    #[error("in_port {port} does not exist: port ids are below {MAX_PORTS}")]
    InPortOutOfRange {
        /// The port in the match.
        port: PortId,
    },
    /// A MAC match whose address has bits set outside its mask.
    #[error(
        "{field} address {addr} has bits outside mask {mask}: clear them in the address \
         (address & !mask must be zero) or widen the mask"
    )]
    MacBitsOutsideMask {
        /// `src_mac` or `dst_mac`.
        field: MatchField,
        /// The address in the match.
        addr: MacAddr,
        /// The mask in the match.
        mask: MacAddr,
    },
    /// A VLAN match outside 0..=4094.
    #[error("vlan {vlan} cannot match: use 0 for untagged traffic or a VLAN id in 1..=4094")]
    InvalidVlanMatch {
        /// The VLAN in the match.
        vlan: VlanId,
    },
    /// An IP prefix longer than its address.
    #[error("{field} prefix length /{len} is longer than the address: use at most /{max}")]
    PrefixTooLong {
        /// `ip_src` or `ip_dst`.
        field: MatchField,
        /// The length given.
        len: u8,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
    /// An IP prefix with bits set after its length.
    #[error("{field} prefix {addr}/{len} has host bits set: write it as {network}/{len}")]
    PrefixHostBitsSet {
        /// `ip_src` or `ip_dst`.
        field: MatchField,
        /// The address given.
        addr: IpAddr,
        /// The prefix length.
        len: u8,
        /// The address with the host bits cleared.
        network: IpAddr,
    },
    /// An IP field matched without an IP EtherType in the same match.
    #[error(
        "{field} needs its prerequisite: add ethertype 0x0800 (IPv4) or 0x86dd (IPv6) \
         to the match"
    )]
    MissingIpEthertype {
        /// The IP field.
        field: MatchField,
    },
    /// `ip_proto` with an EtherType that is not IP.
    #[error(
        "{field} only exists in IP packets but the match has ethertype {ethertype:#06x}: \
         use 0x0800 (IPv4) or 0x86dd (IPv6)"
    )]
    NonIpEthertype {
        /// The IP field.
        field: MatchField,
        /// The EtherType in the match.
        ethertype: u16,
    },
    /// An IP prefix whose family contradicts the EtherType in the match.
    #[error(
        "{field} prefix needs ethertype {expected:#06x} but the match has \
         {ethertype:#06x}: change the ethertype or use a prefix of the other family"
    )]
    IpFamilyMismatch {
        /// `ip_src` or `ip_dst`.
        field: MatchField,
        /// The EtherType in the match.
        ethertype: u16,
        /// The EtherType of the prefix's family.
        expected: u16,
    },
    /// An L4 field matched without `ip_proto`.
    #[error(
        "{field} needs its prerequisite: add ip_proto to the match (TCP 6, UDP 17, \
         SCTP 132, ICMP 1 or ICMPv6 58)"
    )]
    MissingIpProto {
        /// `l4_src` or `l4_dst`.
        field: MatchField,
    },
    /// An L4 field matched with a protocol that has no such field.
    #[error(
        "{field} cannot match ip_proto {proto}: only TCP (6), UDP (17), SCTP (132), \
         ICMP (1) and ICMPv6 (58) have ports or type/code"
    )]
    NoPortsForProto {
        /// `l4_src` or `l4_dst`.
        field: MatchField,
        /// The protocol in the match.
        proto: u8,
    },
    /// An empty action list.
    #[error("the rule has no actions: say what to do, e.g. Drop to drop explicitly")]
    EmptyActions,
    /// More actions than an [`ActionList`](super::ActionList) holds.
    #[error("too many actions: a rule holds at most {MAX_ACTIONS}; remove redundant ones")]
    TooManyActions,
    /// `Drop` together with other actions.
    #[error("Drop cannot be combined with other actions: use Drop alone, or remove it")]
    DropWithOtherActions,
    /// Two `PushVlan` actions in one list.
    #[error("more than one PushVlan in the action list: keep one")]
    DuplicatePushVlan,
    /// Two `PopVlan` actions in one list.
    #[error("more than one PopVlan in the action list: keep one")]
    DuplicatePopVlan,
    /// `PushVlan` with an id outside 1..=4094.
    #[error("PushVlan({vlan}) is not a VLAN id: use 1..=4094 (0 and 4095 are reserved)")]
    InvalidPushVlan {
        /// The id given.
        vlan: VlanId,
    },
    /// `Output` to a port that cannot exist.
    #[error("Output({port}) names a port that cannot exist: port ids are below {MAX_PORTS}")]
    OutputPortOutOfRange {
        /// The port given.
        port: PortId,
    },
    /// The table holds its maximum number of rules.
    #[error(
        "the flow table is full ({max_rules} rules): remove rules first or create the \
         table with a larger max_rules"
    )]
    TableFull {
        /// The table's limit.
        max_rules: usize,
    },
}
