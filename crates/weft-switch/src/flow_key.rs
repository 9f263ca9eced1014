//! The exact-match key of a packet: what the flow table matches on and the flow cache is
//! indexed by.

use core::hash::{Hash, Hasher};
use core::net::IpAddr;

use weft_packet::MacAddr;

use crate::flow_match::PackedKey;
use crate::types::{PortId, VlanId};

/// Every field a flow rule can match, read once per packet in the collect stage.
///
/// Fields a packet does not have are zero / `None` (a non-IP frame has no addresses; a
/// non-first IPv4 fragment has no L4 ports).
#[derive(Clone, Copy, Debug, Default)]
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

/// Compares packed words: the derived impl compares the byte arrays of the addresses with
/// calls to `memcmp`, and the flow loop compares a key per packet.
impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        PackedKey::new(self).same_as(&PackedKey::new(other))
    }
}

impl Eq for FlowKey {}

/// Hashes the packed words: the derived impl writes each field, and each address's length
/// and bytes, separately, which cost the flow cache more than its lookup.
impl Hash for FlowKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        for word in PackedKey::new(self).words() {
            state.write_u64(word);
        }
    }
}

#[cfg(test)]
mod tests {
    use core::hash::BuildHasher;

    use proptest::prelude::*;

    use super::*;
    use crate::flow_table::proptests::flow_key;

    /// Field by field, as `#[derive(PartialEq)]` compares.
    fn fields_equal(a: &FlowKey, b: &FlowKey) -> bool {
        (a.in_port, a.dst_mac, a.src_mac, a.vlan, a.ethertype)
            == (b.in_port, b.dst_mac, b.src_mac, b.vlan, b.ethertype)
            && (a.ip_src, a.ip_dst, a.ip_proto, a.l4_src, a.l4_dst)
                == (b.ip_src, b.ip_dst, b.ip_proto, b.l4_src, b.l4_dst)
    }

    /// `a` with at most one field (`which`, 0 to 9; 10: none) taken from `other`.
    fn with_field_of(a: FlowKey, other: FlowKey, which: u8) -> FlowKey {
        let mut b = a;
        match which {
            0 => b.in_port = other.in_port,
            1 => b.dst_mac = other.dst_mac,
            2 => b.src_mac = other.src_mac,
            3 => b.vlan = other.vlan,
            4 => b.ethertype = other.ethertype,
            5 => b.ip_src = other.ip_src,
            6 => b.ip_dst = other.ip_dst,
            7 => b.ip_proto = other.ip_proto,
            8 => b.l4_src = other.l4_src,
            9 => b.l4_dst = other.l4_dst,
            _ => {}
        }
        b
    }

    proptest! {
        #[test]
        fn keys_are_equal_exactly_when_every_field_is_and_equal_keys_hash_alike(
            a in flow_key(),
            other in flow_key(),
            which in 0u8..=10,
        ) {
            let b = with_field_of(a, other, which);
            prop_assert_eq!(a == b, fields_equal(&a, &b));
            let hasher = foldhash::fast::RandomState::default();
            if a == b {
                prop_assert_eq!(hasher.hash_one(a), hasher.hash_one(b));
            }
        }
    }
}
