//! What a flow rule matches: [`FlowMatch`] and its parts, their validation, and the
//! compiled form (masked 64-bit words) that the flow table scans.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use weft_packet::ethernet::ethertype;
use weft_packet::MacAddr;

use crate::flow_table::FlowError;
use crate::types::{PortId, VlanId, MAX_PORTS};

/// Names a [`FlowMatch`] field, for error messages.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MatchField {
    /// [`FlowMatch::in_port`].
    InPort,
    /// [`FlowMatch::src_mac`].
    SrcMac,
    /// [`FlowMatch::dst_mac`].
    DstMac,
    /// [`FlowMatch::vlan`].
    Vlan,
    /// [`FlowMatch::ethertype`].
    Ethertype,
    /// [`FlowMatch::ip_src`].
    IpSrc,
    /// [`FlowMatch::ip_dst`].
    IpDst,
    /// [`FlowMatch::ip_proto`].
    IpProto,
    /// [`FlowMatch::l4_src`].
    L4Src,
    /// [`FlowMatch::l4_dst`].
    L4Dst,
}

impl fmt::Display for MatchField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatchField::InPort => "in_port",
            MatchField::SrcMac => "src_mac",
            MatchField::DstMac => "dst_mac",
            MatchField::Vlan => "vlan",
            MatchField::Ethertype => "ethertype",
            MatchField::IpSrc => "ip_src",
            MatchField::IpDst => "ip_dst",
            MatchField::IpProto => "ip_proto",
            MatchField::L4Src => "l4_src",
            MatchField::L4Dst => "l4_dst",
        })
    }
}

/// A masked MAC address match: a packet's address `a` matches when `a & mask == addr`.
///
/// An all-ones mask is an exact match, an all-zero mask matches anything. Bits of `addr`
/// outside `mask` must be zero (validated on insert), so that a rule means what it says.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MacMatch {
    /// The address bits to compare.
    pub addr: MacAddr,
    /// Which bits to compare (1 = compare).
    pub mask: MacAddr,
}

impl MacMatch {
    /// Any group address (multicast or broadcast): the I/G bit set.
    pub const MULTICAST: MacMatch = MacMatch {
        addr: MacAddr([1, 0, 0, 0, 0, 0]),
        mask: MacAddr([1, 0, 0, 0, 0, 0]),
    };

    /// Exactly this address.
    pub const fn exact(addr: MacAddr) -> Self {
        MacMatch {
            addr,
            mask: MacAddr::BROADCAST,
        }
    }

    fn validate(&self, field: MatchField) -> Result<(), FlowError> {
        if self.addr.to_u64() & !self.mask.to_u64() != 0 {
            return Err(FlowError::MacBitsOutsideMask {
                field,
                addr: self.addr,
                mask: self.mask,
            });
        }
        Ok(())
    }
}

/// An IP prefix: the first `len` bits of a packet's address must equal those of `addr`.
///
/// `len` is at most 32 for IPv4 and 128 for IPv6, and the bits after `len` must be zero
/// (both validated on insert). An IPv4 prefix never matches an IPv6 address, and vice
/// versa, whatever the length: `0.0.0.0/0` means "any IPv4 address".
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct IpPrefix {
    /// The network address.
    pub addr: IpAddr,
    /// The prefix length in bits.
    pub len: u8,
}

impl IpPrefix {
    /// Exactly this address (/32 or /128).
    pub const fn host(addr: IpAddr) -> Self {
        let len = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        IpPrefix { addr, len }
    }

    /// The address width of the prefix's family: 32 or 128.
    pub const fn max_len(&self) -> u8 {
        match self.addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        }
    }

    /// The EtherType of the prefix's family (IPv4 or IPv6).
    pub const fn ethertype(&self) -> u16 {
        match self.addr {
            IpAddr::V4(_) => ethertype::IPV4,
            IpAddr::V6(_) => ethertype::IPV6,
        }
    }

    /// Whether the length fits the family and no bit after it is set.
    pub fn is_canonical(&self) -> bool {
        self.len <= self.max_len() && self.network() == self.addr
    }

    /// Whether `ip` is inside the prefix (never across families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let same_family = matches!(
            (self.addr, ip),
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_))
        );
        same_family
            && IpPrefix {
                addr: ip,
                len: self.len,
            }
            .network()
                == self.network()
    }

    /// `addr` with the bits after `len` cleared (`len` clamped to the family's width).
    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let mask = (!0u32).checked_shl(32 - u32::from(self.len.min(32)));
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask.unwrap_or(0)))
            }
            IpAddr::V6(a) => {
                let mask = (!0u128).checked_shl(128 - u32::from(self.len.min(128)));
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask.unwrap_or(0)))
            }
        }
    }

    fn validate(&self, field: MatchField) -> Result<(), FlowError> {
        let max = self.max_len();
        if self.len > max {
            return Err(FlowError::PrefixTooLong {
                field,
                len: self.len,
                max,
            });
        }
        let network = self.network();
        if network != self.addr {
            return Err(FlowError::PrefixHostBitsSet {
                field,
                addr: self.addr,
                len: self.len,
                network,
            });
        }
        Ok(())
    }
}

/// IP protocols whose L4 fields a [`FlowKey`](crate::FlowKey) fills: TCP, UDP and SCTP
/// ports, ICMP and ICMPv6 type (as `l4_src`) and code (as `l4_dst`).
const PROTOS_WITH_PORTS: [u8; 5] = [6, 17, 132, 1, 58];

/// What a flow rule matches: every field is optional, `None` is a wildcard, and a packet
/// matches when **all** present fields match its [`FlowKey`](crate::FlowKey).
///
/// * MACs match under a mask ([`MacMatch`]); `vlan: Some(0)` matches untagged traffic.
/// * IP prefixes match only addresses of their own family: an IPv4 prefix never matches an
///   IPv6 address nor a packet without addresses.
/// * `l4_src`/`l4_dst` compare the key's L4 fields, which are zero for packets without
///   them (non-first fragments, protocols without ports).
///
/// Prerequisites are explicit, as in OpenFlow: [`validate`](Self::validate) rejects an
/// `ip_src`/`ip_dst` without `ethertype` 0x0800/0x86dd of the prefix's family, an
/// `ip_proto` without an IP `ethertype`, and `l4_*` without an `ip_proto` that has ports
/// (TCP 6, UDP 17, SCTP 132, ICMP 1, ICMPv6 58).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct FlowMatch {
    /// The port the packet arrived on.
    pub in_port: Option<PortId>,
    /// Source MAC, masked.
    pub src_mac: Option<MacMatch>,
    /// Destination MAC, masked.
    pub dst_mac: Option<MacMatch>,
    /// The packet's VLAN inside the switch; `0` = untagged.
    pub vlan: Option<VlanId>,
    /// The EtherType after any VLAN tags.
    pub ethertype: Option<u16>,
    /// IP source prefix.
    pub ip_src: Option<IpPrefix>,
    /// IP destination prefix.
    pub ip_dst: Option<IpPrefix>,
    /// IP protocol / IPv6 next header.
    pub ip_proto: Option<u8>,
    /// L4 source port (ICMP type).
    pub l4_src: Option<u16>,
    /// L4 destination port (ICMP code).
    pub l4_dst: Option<u16>,
}

impl FlowMatch {
    /// Matches every packet.
    pub const ANY: FlowMatch = FlowMatch {
        in_port: None,
        src_mac: None,
        dst_mac: None,
        vlan: None,
        ethertype: None,
        ip_src: None,
        ip_dst: None,
        ip_proto: None,
        l4_src: None,
        l4_dst: None,
    };

    /// Checks field values and prerequisites (see the type's docs); the first problem
    /// found is returned.
    pub fn validate(&self) -> Result<(), FlowError> {
        if let Some(port) = self.in_port {
            if port.index() >= MAX_PORTS {
                return Err(FlowError::InPortOutOfRange { port });
            }
        }
        if let Some(m) = &self.src_mac {
            m.validate(MatchField::SrcMac)?;
        }
        if let Some(m) = &self.dst_mac {
            m.validate(MatchField::DstMac)?;
        }
        if let Some(vlan) = self.vlan {
            if vlan > 4094 {
                return Err(FlowError::InvalidVlanMatch { vlan });
            }
        }
        for (field, prefix) in [
            (MatchField::IpSrc, &self.ip_src),
            (MatchField::IpDst, &self.ip_dst),
        ] {
            if let Some(p) = prefix {
                p.validate(field)?;
                self.check_ip_family(field, p)?;
            }
        }
        if self.ip_proto.is_some() {
            match self.ethertype {
                None => {
                    return Err(FlowError::MissingIpEthertype {
                        field: MatchField::IpProto,
                    })
                }
                Some(ethertype::IPV4 | ethertype::IPV6) => {}
                Some(other) => {
                    return Err(FlowError::NonIpEthertype {
                        field: MatchField::IpProto,
                        ethertype: other,
                    })
                }
            }
        }
        for (field, port) in [
            (MatchField::L4Src, self.l4_src),
            (MatchField::L4Dst, self.l4_dst),
        ] {
            if port.is_some() {
                match self.ip_proto {
                    None => return Err(FlowError::MissingIpProto { field }),
                    Some(proto) if !PROTOS_WITH_PORTS.contains(&proto) => {
                        return Err(FlowError::NoPortsForProto { field, proto })
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    fn check_ip_family(&self, field: MatchField, prefix: &IpPrefix) -> Result<(), FlowError> {
        let expected = prefix.ethertype();
        match self.ethertype {
            None => Err(FlowError::MissingIpEthertype { field }),
            Some(et) if et != expected => Err(FlowError::IpFamilyMismatch {
                field,
                ethertype: et,
                expected,
            }),
            Some(_) => Ok(()),
        }
    }
}

mod compiled;

pub(crate) use compiled::{CompiledMatch, PackedKey};

#[cfg(test)]
mod tests;
