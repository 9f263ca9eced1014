use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use weft_packet::MacAddr;

use super::*;
use crate::flow_key::FlowKey;

const IPV4: u16 = 0x0800;
const IPV6: u16 = 0x86dd;
const ARP: u16 = 0x0806;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().unwrap())
}

fn mac(s: &str) -> MacAddr {
    s.parse().unwrap()
}

fn prefix(addr: IpAddr, len: u8) -> IpPrefix {
    IpPrefix { addr, len }
}

/// An IPv4 TCP packet on VLAN 10.
fn tcp4() -> FlowKey {
    FlowKey {
        in_port: PortId(3),
        dst_mac: mac("52:54:00:00:00:02"),
        src_mac: mac("52:54:00:00:00:01"),
        vlan: 10,
        ethertype: IPV4,
        ip_src: Some(v4(10, 1, 2, 3)),
        ip_dst: Some(v4(192, 168, 0, 9)),
        ip_proto: 6,
        l4_src: 40000,
        l4_dst: 443,
    }
}

/// An untagged IPv6 UDP packet.
fn udp6() -> FlowKey {
    FlowKey {
        in_port: PortId(4),
        dst_mac: mac("33:33:00:00:00:fb"),
        src_mac: mac("52:54:00:00:00:07"),
        vlan: 0,
        ethertype: IPV6,
        ip_src: Some(v6("2001:db8::1")),
        ip_dst: Some(v6("ff02::fb")),
        ip_proto: 17,
        l4_src: 5353,
        l4_dst: 5353,
    }
}

/// Validates (the match must be valid) and matches.
fn matches(m: FlowMatch, key: &FlowKey) -> bool {
    m.validate().unwrap();
    CompiledMatch::new(&m).matches(&PackedKey::new(key))
}

fn tcp4_ports() -> FlowMatch {
    FlowMatch {
        ethertype: Some(IPV4),
        ip_proto: Some(6),
        ..FlowMatch::ANY
    }
}

#[test]
fn empty_match_matches_every_packet() {
    assert!(matches(FlowMatch::ANY, &tcp4()));
    assert!(matches(FlowMatch::ANY, &udp6()));
    assert!(matches(FlowMatch::ANY, &FlowKey::default()));
}

#[test]
fn in_port_matches_only_that_port() {
    let m = FlowMatch {
        in_port: Some(PortId(3)),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            in_port: PortId(2),
            ..tcp4()
        }
    ));
}

#[test]
fn exact_src_mac_matches_only_that_address() {
    let m = FlowMatch {
        src_mac: Some(MacMatch::exact(mac("52:54:00:00:00:01"))),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(m, &udp6()));
    // The destination field is not consulted.
    let swapped = FlowKey {
        src_mac: tcp4().dst_mac,
        dst_mac: tcp4().src_mac,
        ..tcp4()
    };
    assert!(!matches(m, &swapped));
}

#[test]
fn exact_dst_mac_matches_only_that_address() {
    let m = FlowMatch {
        dst_mac: Some(MacMatch::exact(mac("52:54:00:00:00:02"))),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(m, &udp6()));
}

#[test]
fn masked_mac_matches_on_the_masked_bits_only() {
    let oui = MacMatch {
        addr: mac("52:54:00:00:00:00"),
        mask: mac("ff:ff:ff:00:00:00"),
    };
    let m = FlowMatch {
        src_mac: Some(oui),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(matches(m, &udp6()));
    let other_vendor = FlowKey {
        src_mac: mac("52:55:00:00:00:01"),
        ..tcp4()
    };
    assert!(!matches(m, &other_vendor));
}

#[test]
fn multicast_mask_matches_group_addresses_only() {
    let m = FlowMatch {
        dst_mac: Some(MacMatch::MULTICAST),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &udp6()));
    assert!(matches(
        m,
        &FlowKey {
            dst_mac: MacAddr::BROADCAST,
            ..tcp4()
        }
    ));
    assert!(!matches(m, &tcp4()));
}

#[test]
fn zero_mac_mask_matches_any_address() {
    let m = FlowMatch {
        dst_mac: Some(MacMatch {
            addr: MacAddr::ZERO,
            mask: MacAddr::ZERO,
        }),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(matches(m, &udp6()));
}

#[test]
fn vlan_matches_only_that_vlan() {
    let m = FlowMatch {
        vlan: Some(10),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(m, &FlowKey { vlan: 11, ..tcp4() }));
    assert!(!matches(m, &udp6()));
}

#[test]
fn vlan_zero_matches_only_untagged_packets() {
    let m = FlowMatch {
        vlan: Some(0),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &udp6()));
    assert!(!matches(m, &tcp4()));
}

#[test]
fn ethertype_matches_only_that_ethertype() {
    let m = FlowMatch {
        ethertype: Some(IPV6),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &udp6()));
    assert!(!matches(m, &tcp4()));
}

#[test]
fn ip_src_host_prefix_matches_only_that_source() {
    let m = FlowMatch {
        ethertype: Some(IPV4),
        ip_src: Some(IpPrefix::host(v4(10, 1, 2, 3))),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(10, 1, 2, 4)),
            ..tcp4()
        }
    ));
    // The destination address is not consulted.
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(192, 168, 0, 9)),
            ..tcp4()
        }
    ));
}

#[test]
fn ip_dst_host_prefix_matches_only_that_destination() {
    let m = FlowMatch {
        ethertype: Some(IPV6),
        ip_dst: Some(IpPrefix::host(v6("ff02::fb"))),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &udp6()));
    assert!(!matches(
        m,
        &FlowKey {
            ip_dst: Some(v6("ff02::fc")),
            ..udp6()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            ip_dst: Some(v6("2001:db8::1")),
            ..udp6()
        }
    ));
}

#[test]
fn ip_proto_matches_only_that_protocol() {
    let m = FlowMatch {
        ethertype: Some(IPV4),
        ip_proto: Some(6),
        ..FlowMatch::ANY
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            ip_proto: 17,
            ..tcp4()
        }
    ));
}

#[test]
fn l4_src_matches_only_that_port() {
    let m = FlowMatch {
        l4_src: Some(40000),
        ..tcp4_ports()
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            l4_src: 40001,
            ..tcp4()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            l4_dst: 40000,
            l4_src: 443,
            ..tcp4()
        }
    ));
}

#[test]
fn l4_dst_matches_only_that_port() {
    let m = FlowMatch {
        l4_dst: Some(443),
        ..tcp4_ports()
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            l4_dst: 80,
            ..tcp4()
        }
    ));
}

#[test]
fn l4_port_zero_matches_packets_without_ports() {
    let m = FlowMatch {
        l4_dst: Some(0),
        ..tcp4_ports()
    };
    let fragment = FlowKey {
        l4_src: 0,
        l4_dst: 0,
        ..tcp4()
    };
    assert!(matches(m, &fragment));
    assert!(!matches(m, &tcp4()));
}

/// A match on `ip_src` with the ethertype of the prefix's family.
fn src_prefix(addr: IpAddr, len: u8) -> FlowMatch {
    let p = prefix(addr, len);
    FlowMatch {
        ethertype: Some(p.ethertype()),
        ip_src: Some(p),
        ..FlowMatch::ANY
    }
}

#[test]
fn v4_prefix_zero_matches_every_v4_address_and_nothing_else() {
    let m = src_prefix(v4(0, 0, 0, 0), 0);
    assert!(matches(m, &tcp4()));
    assert!(matches(
        m,
        &FlowKey {
            ip_src: Some(v4(255, 255, 255, 255)),
            ..tcp4()
        }
    ));
    // Same ethertype in the key, so only the family can refuse these.
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v6("::")),
            ..tcp4()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: None,
            ..tcp4()
        }
    ));
}

#[test]
fn v4_prefix_eight_matches_its_network_only() {
    let m = src_prefix(v4(10, 0, 0, 0), 8);
    assert!(matches(m, &tcp4()));
    assert!(matches(
        m,
        &FlowKey {
            ip_src: Some(v4(10, 255, 0, 1)),
            ..tcp4()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(11, 1, 2, 3)),
            ..tcp4()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(138, 1, 2, 3)),
            ..tcp4()
        }
    ));
}

#[test]
fn v4_prefix_thirty_two_matches_one_address() {
    let m = src_prefix(v4(10, 1, 2, 3), 32);
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(10, 1, 2, 2)),
            ..tcp4()
        }
    ));
}

#[test]
fn v6_prefix_zero_matches_every_v6_address_and_nothing_else() {
    let m = src_prefix(v6("::"), 0);
    assert!(matches(m, &udp6()));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(0, 0, 0, 0)),
            ..udp6()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: None,
            ..udp6()
        }
    ));
}

#[test]
fn v6_prefix_sixty_four_matches_its_network_only() {
    let m = src_prefix(v6("2001:db8::"), 64);
    assert!(matches(m, &udp6()));
    assert!(matches(
        m,
        &FlowKey {
            ip_src: Some(v6("2001:db8::ffff:1")),
            ..udp6()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v6("2001:db8:0:1::1")),
            ..udp6()
        }
    ));
}

#[test]
fn v6_prefix_one_twenty_eight_matches_one_address() {
    let m = src_prefix(v6("2001:db8::1"), 128);
    assert!(matches(m, &udp6()));
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v6("2001:db8::2")),
            ..udp6()
        }
    ));
}

#[test]
fn v4_prefix_never_matches_a_v4_mapped_v6_address() {
    let m = src_prefix(v4(10, 1, 2, 3), 32);
    let mapped = FlowKey {
        ip_src: Some(v6("::ffff:10.1.2.3")),
        ..tcp4()
    };
    assert!(!matches(m, &mapped));
    // And a v6 prefix whose top bits equal a v4 address never matches that v4 address.
    let m = src_prefix(v6("a01:203::"), 32);
    assert!(!matches(
        m,
        &FlowKey {
            ip_src: Some(v4(10, 1, 2, 3)),
            ..udp6()
        }
    ));
}

#[test]
fn all_present_fields_must_match() {
    let m = FlowMatch {
        in_port: Some(PortId(3)),
        src_mac: Some(MacMatch::exact(mac("52:54:00:00:00:01"))),
        dst_mac: Some(MacMatch::exact(mac("52:54:00:00:00:02"))),
        vlan: Some(10),
        ethertype: Some(IPV4),
        ip_src: Some(prefix(v4(10, 0, 0, 0), 8)),
        ip_dst: Some(prefix(v4(192, 168, 0, 0), 16)),
        ip_proto: Some(6),
        l4_src: Some(40000),
        l4_dst: Some(443),
    };
    assert!(matches(m, &tcp4()));
    assert!(!matches(
        m,
        &FlowKey {
            l4_dst: 80,
            ..tcp4()
        }
    ));
    assert!(!matches(
        m,
        &FlowKey {
            in_port: PortId(0),
            ..tcp4()
        }
    ));
}

#[test]
fn mac_address_bits_outside_the_mask_are_rejected() {
    let m = FlowMatch {
        dst_mac: Some(MacMatch {
            addr: mac("52:54:00:00:00:01"),
            mask: mac("ff:ff:ff:00:00:00"),
        }),
        ..FlowMatch::ANY
    };
    let err = m.validate().unwrap_err();
    assert!(matches!(
        err,
        FlowError::MacBitsOutsideMask {
            field: MatchField::DstMac,
            ..
        }
    ));
    assert!(err.to_string().contains("dst_mac"));
}

#[test]
fn vlan_match_above_4094_is_rejected() {
    let m = FlowMatch {
        vlan: Some(4095),
        ..FlowMatch::ANY
    };
    assert_eq!(
        m.validate(),
        Err(FlowError::InvalidVlanMatch { vlan: 4095 })
    );
}

#[test]
fn in_port_beyond_max_ports_is_rejected() {
    let port = PortId(u16::try_from(MAX_PORTS).unwrap());
    let m = FlowMatch {
        in_port: Some(port),
        ..FlowMatch::ANY
    };
    assert_eq!(m.validate(), Err(FlowError::InPortOutOfRange { port }));
}

#[test]
fn prefix_longer_than_its_address_is_rejected() {
    let m = src_prefix(v4(10, 0, 0, 0), 33);
    assert_eq!(
        m.validate(),
        Err(FlowError::PrefixTooLong {
            field: MatchField::IpSrc,
            len: 33,
            max: 32
        })
    );
    let m = src_prefix(v6("2001:db8::"), 129);
    assert!(matches!(
        m.validate(),
        Err(FlowError::PrefixTooLong { max: 128, .. })
    ));
}

#[test]
fn prefix_with_host_bits_is_rejected_naming_the_network() {
    let m = src_prefix(v4(10, 1, 2, 3), 8);
    let err = m.validate().unwrap_err();
    assert_eq!(
        err,
        FlowError::PrefixHostBitsSet {
            field: MatchField::IpSrc,
            addr: v4(10, 1, 2, 3),
            len: 8,
            network: v4(10, 0, 0, 0),
        }
    );
    assert!(err.to_string().contains("10.0.0.0/8"));
    assert!(src_prefix(v6("2001:db8::1"), 64).validate().is_err());
    assert!(src_prefix(v4(0, 0, 0, 1), 0).validate().is_err());
}

#[test]
fn ip_prefix_without_ethertype_is_rejected() {
    let m = FlowMatch {
        ip_dst: Some(IpPrefix::host(v4(10, 0, 0, 1))),
        ..FlowMatch::ANY
    };
    let err = m.validate().unwrap_err();
    assert_eq!(
        err,
        FlowError::MissingIpEthertype {
            field: MatchField::IpDst
        }
    );
    assert!(err.to_string().contains("0x0800"));
}

#[test]
fn ip_prefix_of_the_other_family_than_the_ethertype_is_rejected() {
    let m = FlowMatch {
        ethertype: Some(IPV4),
        ip_src: Some(IpPrefix::host(v6("2001:db8::1"))),
        ..FlowMatch::ANY
    };
    assert_eq!(
        m.validate(),
        Err(FlowError::IpFamilyMismatch {
            field: MatchField::IpSrc,
            ethertype: IPV4,
            expected: IPV6
        })
    );
    let m = FlowMatch {
        ethertype: Some(ARP),
        ip_dst: Some(IpPrefix::host(v4(10, 0, 0, 1))),
        ..FlowMatch::ANY
    };
    assert!(matches!(
        m.validate(),
        Err(FlowError::IpFamilyMismatch { expected: IPV4, .. })
    ));
}

#[test]
fn ip_proto_needs_an_ip_ethertype() {
    let m = FlowMatch {
        ip_proto: Some(6),
        ..FlowMatch::ANY
    };
    assert_eq!(
        m.validate(),
        Err(FlowError::MissingIpEthertype {
            field: MatchField::IpProto
        })
    );
    let m = FlowMatch {
        ethertype: Some(ARP),
        ..m
    };
    assert_eq!(
        m.validate(),
        Err(FlowError::NonIpEthertype {
            field: MatchField::IpProto,
            ethertype: ARP
        })
    );
}

#[test]
fn l4_port_without_ip_proto_is_rejected() {
    let m = FlowMatch {
        ethertype: Some(IPV4),
        l4_dst: Some(80),
        ..FlowMatch::ANY
    };
    assert_eq!(
        m.validate(),
        Err(FlowError::MissingIpProto {
            field: MatchField::L4Dst
        })
    );
}

#[test]
fn l4_port_with_a_protocol_without_ports_is_rejected() {
    let m = FlowMatch {
        ethertype: Some(IPV4),
        ip_proto: Some(47), // GRE
        l4_src: Some(1),
        ..FlowMatch::ANY
    };
    assert_eq!(
        m.validate(),
        Err(FlowError::NoPortsForProto {
            field: MatchField::L4Src,
            proto: 47
        })
    );
    for proto in [1, 6, 17, 58, 132] {
        let ok = FlowMatch {
            ip_proto: Some(proto),
            ..m
        };
        assert_eq!(ok.validate(), Ok(()), "proto {proto}");
    }
}
