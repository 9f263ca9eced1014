//! The port security check, one test per behaviour it pins.

mod frames;
mod robustness;

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::PacketBuilder;
use weft_packet::MacAddr;

use self::frames::*;
use super::check::eui64_link_local;
use super::PortSecurity;
use crate::counters::DropReason;
use crate::flow_match::IpPrefix;

/// The usual policy: one MAC, one IPv4 and one IPv6 address.
fn policy() -> PortSecurity {
    PortSecurity {
        allowed_macs: vec![MAC],
        allowed_ips: vec![
            IpPrefix::host(IpAddr::V4(IP4)),
            IpPrefix::host(IpAddr::V6(IP6)),
        ],
        allow_dhcp_server: false,
        allow_router_advertisements: false,
    }
}

fn check(p: &PortSecurity, frame: &[u8]) -> Result<(), DropReason> {
    p.check(frame, frame.len())
}

const BROADCAST4: Ipv4Addr = Ipv4Addr::BROADCAST;
const ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
const DHCP6_SERVERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);
const MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

fn solicited_node(ip: Ipv6Addr) -> Ipv6Addr {
    let o = ip.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15],
    ])
}

fn dhcp_discover() -> Vec<u8> {
    v4_frame(
        Ipv4Addr::UNSPECIFIED,
        BROADCAST4,
        UDP,
        &udp(68, 67, &[1; 240]),
    )
}
fn dhcp_offer(src: Ipv4Addr) -> Vec<u8> {
    v4_frame(src, BROADCAST4, UDP, &udp(67, 68, &[2; 240]))
}
fn dhcpv6_solicit() -> Vec<u8> {
    v6_frame(LINK_LOCAL, DHCP6_SERVERS, UDP, &udp(546, 547, &[1; 40]))
}
fn dhcpv6_advertise() -> Vec<u8> {
    v6_frame(LINK_LOCAL, LINK_LOCAL, UDP, &udp(547, 546, &[2; 40]))
}
fn router_advertisement() -> Vec<u8> {
    v6_frame(
        LINK_LOCAL,
        ALL_NODES,
        ICMPV6,
        &icmpv6(134, &[64, 0, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0]),
    )
}
fn redirect() -> Vec<u8> {
    let mut body = vec![0; 4];
    body.extend_from_slice(&OTHER_IP6.octets());
    body.extend_from_slice(&IP6.octets());
    v6_frame(LINK_LOCAL, OTHER_IP6, ICMPV6, &icmpv6(137, &body))
}
fn dad_solicitation(target: Ipv6Addr) -> Vec<u8> {
    v6_frame(
        Ipv6Addr::UNSPECIFIED,
        solicited_node(target),
        ICMPV6,
        &nd(135, target, &[]),
    )
}
fn own_advertisement() -> Vec<u8> {
    v6_frame(IP6, ALL_NODES, ICMPV6, &nd(136, IP6, &lla_option(2, MAC)))
}
fn own_arp_request() -> Vec<u8> {
    eth(MAC, 0x0806, &arp(1, MAC, IP4, MacAddr::ZERO, OTHER_IP4))
}

/// Frames the usual policy lets through.
fn own_frames() -> Vec<Vec<u8>> {
    let mut udp4 = Vec::new();
    PacketBuilder::ethernet2(MAC.0, OTHER_MAC.0)
        .ipv4(IP4.octets(), OTHER_IP4.octets(), 64)
        .udp(40000, 53)
        .write(&mut udp4, &[0; 30])
        .unwrap();
    let mut tcp4 = Vec::new();
    PacketBuilder::ethernet2(MAC.0, OTHER_MAC.0)
        .ipv4(IP4.octets(), OTHER_IP4.octets(), 64)
        .tcp(40000, 443, 1, 1024)
        .write(&mut tcp4, &[0; 1000])
        .unwrap();
    let mut tcp6 = Vec::new();
    PacketBuilder::ethernet2(MAC.0, OTHER_MAC.0)
        .ipv6(IP6.octets(), OTHER_IP6.octets(), 64)
        .tcp(40000, 443, 1, 1024)
        .write(&mut tcp6, &[0; 1000])
        .unwrap();
    let mut udp6 = Vec::new();
    PacketBuilder::ethernet2(MAC.0, OTHER_MAC.0)
        .ipv6(IP6.octets(), OTHER_IP6.octets(), 64)
        .udp(40000, 53)
        .write(&mut udp6, &[0; 30])
        .unwrap();
    vec![
        udp4,
        tcp4,
        tcp6,
        udp6,
        v6_frame(LINK_LOCAL, ALL_NODES, ICMPV6, &icmpv6(128, &[0, 1, 0, 1])),
        own_arp_request(),
        eth(MAC, 0x0806, &arp(2, MAC, IP4, OTHER_MAC, OTHER_IP4)),
        dhcp_discover(),
        dhcpv6_solicit(),
        dad_solicitation(IP6),
        v6_frame(
            IP6,
            solicited_node(OTHER_IP6),
            ICMPV6,
            &nd(135, OTHER_IP6, &lla_option(1, MAC)),
        ),
        own_advertisement(),
        v6_frame(LINK_LOCAL, ROUTERS, ICMPV6, &icmpv6(133, &[0; 4])),
    ]
}

#[test]
fn own_traffic_passes() {
    let p = policy();
    for (i, f) in own_frames().iter().enumerate() {
        assert_eq!(check(&p, f), Ok(()), "frame {i}");
    }
}

#[test]
fn link_local_address_is_modified_eui64_of_the_mac() {
    assert_eq!(eui64_link_local(MAC), LINK_LOCAL);
}

#[test]
fn arp_probe_from_unspecified_sender_passes() {
    let probe = eth(
        MAC,
        0x0806,
        &arp(1, MAC, Ipv4Addr::UNSPECIFIED, MacAddr::ZERO, IP4),
    );
    assert_eq!(check(&policy(), &probe), Ok(()));
}

#[test]
fn mld_report_from_unspecified_source_passes() {
    // MLDv2 report behind the hop-by-hop header carrying the router alert.
    let mut payload = options_header(ICMPV6, 0);
    payload.extend_from_slice(&icmpv6(143, &[0, 0, 0, 0]));
    let report = v6_frame(Ipv6Addr::UNSPECIFIED, MLDV2_ROUTERS, HOP_BY_HOP, &payload);
    assert_eq!(check(&policy(), &report), Ok(()));
    let v1 = v6_frame(
        Ipv6Addr::UNSPECIFIED,
        MLDV2_ROUTERS,
        ICMPV6,
        &icmpv6(131, &[0; 20]),
    );
    assert_eq!(check(&policy(), &v1), Ok(()));
}

#[test]
fn other_ethertypes_get_only_the_mac_check() {
    let lldp = eth(MAC, 0x88cc, &[0; 46]);
    assert_eq!(check(&policy(), &lldp), Ok(()));
    let rarp = eth(MAC, 0x8035, &arp(3, OTHER_MAC, OTHER_IP4, MAC, OTHER_IP4));
    assert_eq!(check(&policy(), &rarp), Ok(()));
    let foreign = eth(OTHER_MAC, 0x88cc, &[0; 46]);
    assert_eq!(check(&policy(), &foreign), Err(DropReason::SpoofedSrcMac));
}

#[test]
fn spoofed_source_mac_is_dropped() {
    let mut f = own_arp_request();
    f[6..12].copy_from_slice(&OTHER_MAC.0);
    assert_eq!(check(&policy(), &f), Err(DropReason::SpoofedSrcMac));
    let v4 = eth(OTHER_MAC, 0x0800, &ipv4(IP4, OTHER_IP4, TCP, &tcp(1, 2)));
    assert_eq!(check(&policy(), &v4), Err(DropReason::SpoofedSrcMac));
}

#[test]
fn spoofed_ipv4_source_is_dropped() {
    let p = policy();
    let spoofed = v4_frame(OTHER_IP4, IP4, TCP, &tcp(1, 2));
    assert_eq!(check(&p, &spoofed), Err(DropReason::SpoofedSrcIp));
    // 0.0.0.0 only for a DHCP client's 68 -> 67.
    let zero_dns = v4_frame(Ipv4Addr::UNSPECIFIED, OTHER_IP4, UDP, &udp(68, 53, &[0; 8]));
    assert_eq!(check(&p, &zero_dns), Err(DropReason::SpoofedSrcIp));
    let zero_tcp = v4_frame(Ipv4Addr::UNSPECIFIED, OTHER_IP4, TCP, &tcp(68, 67));
    assert_eq!(check(&p, &zero_tcp), Err(DropReason::SpoofedSrcIp));
    // A later fragment has no UDP header to make it a DHCP client.
    let frag = ipv4_with(
        Ipv4Addr::UNSPECIFIED,
        BROADCAST4,
        UDP,
        0x0010,
        &[],
        &udp(68, 67, &[]),
    );
    assert_eq!(
        check(&p, &eth(MAC, 0x0800, &frag)),
        Err(DropReason::SpoofedSrcIp)
    );
    let frag = ipv4_with(OTHER_IP4, BROADCAST4, UDP, 0x0010, &[], &[0; 16]);
    assert_eq!(
        check(&p, &eth(MAC, 0x0800, &frag)),
        Err(DropReason::SpoofedSrcIp)
    );
}

#[test]
fn allowed_ipv4_prefix_covers_its_addresses() {
    let p = PortSecurity {
        allowed_ips: vec![IpPrefix {
            addr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)),
            len: 24,
        }],
        ..policy()
    };
    assert_eq!(
        check(&p, &v4_frame(OTHER_IP4, IP4, TCP, &tcp(1, 2))),
        Ok(())
    );
    let outside = v4_frame(Ipv4Addr::new(10, 0, 1, 1), IP4, TCP, &tcp(1, 2));
    assert_eq!(check(&p, &outside), Err(DropReason::SpoofedSrcIp));
}

#[test]
fn spoofed_ipv6_source_is_dropped() {
    let p = policy();
    let spoofed = v6_frame(OTHER_IP6, IP6, TCP, &tcp(1, 2));
    assert_eq!(check(&p, &spoofed), Err(DropReason::SpoofedSrcIp));
    let other_ll = v6_frame(eui64_link_local(OTHER_MAC), ALL_NODES, UDP, &udp(1, 2, &[]));
    assert_eq!(check(&p, &other_ll), Err(DropReason::SpoofedSrcIp));
    // :: only for DAD and MLD reports.
    let echo = v6_frame(
        Ipv6Addr::UNSPECIFIED,
        ALL_NODES,
        ICMPV6,
        &icmpv6(128, &[0; 4]),
    );
    assert_eq!(check(&p, &echo), Err(DropReason::SpoofedSrcIp));
    let unspecified_udp = v6_frame(Ipv6Addr::UNSPECIFIED, ALL_NODES, UDP, &udp(546, 547, &[]));
    assert_eq!(check(&p, &unspecified_udp), Err(DropReason::SpoofedSrcIp));
    let mut later = fragment_header(ICMPV6, 8, false);
    later.extend_from_slice(&[0; 8]);
    let later = v6_frame(Ipv6Addr::UNSPECIFIED, ALL_NODES, FRAGMENT, &later);
    assert_eq!(check(&p, &later), Err(DropReason::SpoofedSrcIp));
}

#[test]
fn arp_with_another_sender_mac_is_spoofed_arp() {
    let f = eth(MAC, 0x0806, &arp(2, OTHER_MAC, IP4, OTHER_MAC, OTHER_IP4));
    assert_eq!(check(&policy(), &f), Err(DropReason::SpoofedArp));
}

#[test]
fn arp_with_another_sender_ip_is_spoofed_arp() {
    let request = eth(MAC, 0x0806, &arp(1, MAC, OTHER_IP4, MacAddr::ZERO, IP4));
    assert_eq!(check(&policy(), &request), Err(DropReason::SpoofedArp));
    let gratuitous = eth(MAC, 0x0806, &arp(2, MAC, OTHER_IP4, MAC, OTHER_IP4));
    assert_eq!(check(&policy(), &gratuitous), Err(DropReason::SpoofedArp));
}

#[test]
fn arp_other_than_ethernet_ipv4_is_spoofed_arp() {
    for (at, value) in [(1, 6), (3, 0xdd), (4, 8), (5, 16)] {
        let mut a = arp(1, MAC, IP4, MacAddr::ZERO, OTHER_IP4);
        a[at] = value;
        assert_eq!(
            check(&policy(), &eth(MAC, 0x0806, &a)),
            Err(DropReason::SpoofedArp)
        );
    }
}

#[test]
fn neighbour_advertisement_for_someone_elses_address_is_spoofed_nd() {
    let p = policy();
    let f = v6_frame(
        IP6,
        ALL_NODES,
        ICMPV6,
        &nd(136, OTHER_IP6, &lla_option(2, MAC)),
    );
    assert_eq!(check(&p, &f), Err(DropReason::SpoofedNd));
    let bare = v6_frame(LINK_LOCAL, ALL_NODES, ICMPV6, &nd(136, OTHER_IP6, &[]));
    assert_eq!(check(&p, &bare), Err(DropReason::SpoofedNd));
    let own_ll = v6_frame(LINK_LOCAL, ALL_NODES, ICMPV6, &nd(136, LINK_LOCAL, &[]));
    assert_eq!(check(&p, &own_ll), Ok(()));
}

#[test]
fn dad_solicitation_for_someone_elses_address_is_spoofed_nd() {
    assert_eq!(
        check(&policy(), &dad_solicitation(OTHER_IP6)),
        Err(DropReason::SpoofedNd)
    );
    assert_eq!(check(&policy(), &dad_solicitation(LINK_LOCAL)), Ok(()));
}

#[test]
fn nd_with_another_link_layer_address_is_spoofed_nd() {
    let p = policy();
    let na = v6_frame(
        IP6,
        ALL_NODES,
        ICMPV6,
        &nd(136, IP6, &lla_option(2, OTHER_MAC)),
    );
    assert_eq!(check(&p, &na), Err(DropReason::SpoofedNd));
    let ns_target = solicited_node(OTHER_IP6);
    let ns = v6_frame(
        IP6,
        ns_target,
        ICMPV6,
        &nd(135, OTHER_IP6, &lla_option(1, OTHER_MAC)),
    );
    assert_eq!(check(&p, &ns), Err(DropReason::SpoofedNd));
    // A second, foreign option after a good one.
    let mut opts = lla_option(2, MAC);
    opts.extend_from_slice(&lla_option(2, OTHER_MAC));
    let na = v6_frame(IP6, ALL_NODES, ICMPV6, &nd(136, IP6, &opts));
    assert_eq!(check(&p, &na), Err(DropReason::SpoofedNd));
    // Options of other kinds are skipped.
    let mut opts = vec![14, 1, 1, 2, 3, 4, 5, 6];
    opts.extend_from_slice(&lla_option(1, MAC));
    let ns = v6_frame(IP6, ns_target, ICMPV6, &nd(135, OTHER_IP6, &opts));
    assert_eq!(check(&p, &ns), Ok(()));
}

#[test]
fn malformed_nd_is_spoofed_nd() {
    let p = policy();
    let zero_len = v6_frame(
        IP6,
        ALL_NODES,
        ICMPV6,
        &nd(136, IP6, &[2, 0, 0, 0, 0, 0, 0, 0]),
    );
    assert_eq!(check(&p, &zero_len), Err(DropReason::SpoofedNd));
    let too_long = v6_frame(
        IP6,
        ALL_NODES,
        ICMPV6,
        &nd(136, IP6, &[2, 2, 1, 2, 3, 4, 5, 6]),
    );
    assert_eq!(check(&p, &too_long), Err(DropReason::SpoofedNd));
    let odd_tail = v6_frame(IP6, ALL_NODES, ICMPV6, &nd(136, IP6, &[2]));
    assert_eq!(check(&p, &odd_tail), Err(DropReason::SpoofedNd));
    let short = v6_frame(IP6, ALL_NODES, ICMPV6, &icmpv6(136, &[0; 12]));
    assert_eq!(check(&p, &short), Err(DropReason::SpoofedNd));
}

#[test]
fn dhcp_offer_from_server_port_is_rogue_dhcp() {
    assert_eq!(
        check(&policy(), &dhcp_offer(IP4)),
        Err(DropReason::RogueDhcp)
    );
    let relay = v4_frame(IP4, OTHER_IP4, UDP, &udp(67, 67, &[0; 240]));
    assert_eq!(check(&policy(), &relay), Err(DropReason::RogueDhcp));
    // Also on a port whose IPs are not restricted.
    let mac_only = PortSecurity {
        allowed_ips: Vec::new(),
        ..policy()
    };
    assert_eq!(
        check(&mac_only, &dhcp_offer(OTHER_IP4)),
        Err(DropReason::RogueDhcp)
    );
}

#[test]
fn dhcpv6_advertise_from_server_port_is_rogue_dhcp() {
    assert_eq!(
        check(&policy(), &dhcpv6_advertise()),
        Err(DropReason::RogueDhcp)
    );
}

#[test]
fn router_advertisement_and_redirect_are_rogue_ra() {
    assert_eq!(
        check(&policy(), &router_advertisement()),
        Err(DropReason::RogueRa)
    );
    assert_eq!(check(&policy(), &redirect()), Err(DropReason::RogueRa));
}

#[test]
fn router_advertisement_behind_extension_headers_is_rogue_ra() {
    let ra = icmpv6(134, &[64, 0, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
    for chain in [
        vec![(HOP_BY_HOP, 0)],
        vec![(DEST_OPTS, 2)],
        vec![(HOP_BY_HOP, 0), (DEST_OPTS, 1), (DEST_OPTS, 0)],
    ] {
        let mut payload = Vec::new();
        for (i, (_, units)) in chain.iter().enumerate() {
            let next = chain.get(i + 1).map_or(ICMPV6, |(kind, _)| *kind);
            payload.extend_from_slice(&options_header(next, *units));
        }
        payload.extend_from_slice(&ra);
        let f = v6_frame(LINK_LOCAL, ALL_NODES, chain[0].0, &payload);
        assert_eq!(check(&policy(), &f), Err(DropReason::RogueRa), "{chain:?}");
    }
    // In a first fragment that holds it whole.
    let mut payload = fragment_header(DEST_OPTS, 0, true);
    payload.extend_from_slice(&options_header(ICMPV6, 0));
    payload.extend_from_slice(&ra);
    let f = v6_frame(LINK_LOCAL, ALL_NODES, FRAGMENT, &payload);
    assert_eq!(check(&policy(), &f), Err(DropReason::RogueRa));
}

#[test]
fn router_advertisement_in_fragment_with_incomplete_chain_is_malformed() {
    // The first fragment ends inside the destination options header.
    let mut payload = fragment_header(DEST_OPTS, 0, true);
    payload.extend_from_slice(&options_header(ICMPV6, 3)[..16]);
    let f = v6_frame(LINK_LOCAL, ALL_NODES, FRAGMENT, &payload);
    assert_eq!(check(&policy(), &f), Err(DropReason::Malformed));
    // The first fragment ends right after the chain, before the ICMPv6 header.
    let mut payload = fragment_header(DEST_OPTS, 0, true);
    payload.extend_from_slice(&options_header(ICMPV6, 0));
    let f = v6_frame(LINK_LOCAL, ALL_NODES, FRAGMENT, &payload);
    assert_eq!(check(&policy(), &f), Err(DropReason::Malformed));
    // Even a port allowed to send advertisements sends no such fragment.
    let router = PortSecurity {
        allow_router_advertisements: true,
        ..policy()
    };
    assert_eq!(check(&router, &f), Err(DropReason::Malformed));
}

#[test]
fn later_fragments_get_only_the_source_check() {
    let p = policy();
    let frag = ipv4_with(IP4, BROADCAST4, UDP, 0x0010, &[], &udp(67, 68, &[]));
    assert_eq!(check(&p, &eth(MAC, 0x0800, &frag)), Ok(()));
    let mut later = fragment_header(ICMPV6, 16, true);
    later.extend_from_slice(&icmpv6(134, &[0; 12]));
    assert_eq!(
        check(&p, &v6_frame(LINK_LOCAL, ALL_NODES, FRAGMENT, &later)),
        Ok(())
    );
    assert_eq!(
        check(&p, &v6_frame(OTHER_IP6, ALL_NODES, FRAGMENT, &later)),
        Err(DropReason::SpoofedSrcIp)
    );
}

#[test]
fn allow_flags_let_dhcp_servers_and_routers_through() {
    let server = PortSecurity {
        allow_dhcp_server: true,
        allow_router_advertisements: true,
        ..policy()
    };
    for f in [
        dhcp_offer(IP4),
        dhcpv6_advertise(),
        router_advertisement(),
        redirect(),
    ] {
        assert_eq!(check(&server, &f), Ok(()));
    }
    // The flags do not lift the address checks.
    assert_eq!(
        check(&server, &dhcp_offer(OTHER_IP4)),
        Err(DropReason::SpoofedSrcIp)
    );
}

#[test]
fn mac_only_policy_does_not_check_ips() {
    let p = PortSecurity {
        allowed_macs: vec![MAC],
        ..PortSecurity::default()
    };
    let frames = [
        v4_frame(OTHER_IP4, IP4, TCP, &tcp(1, 2)),
        v6_frame(OTHER_IP6, IP6, TCP, &tcp(1, 2)),
        eth(MAC, 0x0806, &arp(1, MAC, OTHER_IP4, MacAddr::ZERO, IP4)),
        v6_frame(
            OTHER_IP6,
            ALL_NODES,
            ICMPV6,
            &nd(136, OTHER_IP6, &lla_option(2, MAC)),
        ),
        dad_solicitation(OTHER_IP6),
    ];
    for f in frames {
        assert_eq!(check(&p, &f), Ok(()));
    }
    // Link-layer addresses are still held to the Ethernet source.
    let arp_other = eth(MAC, 0x0806, &arp(2, OTHER_MAC, OTHER_IP4, MAC, IP4));
    assert_eq!(check(&p, &arp_other), Err(DropReason::SpoofedArp));
    let na = v6_frame(
        OTHER_IP6,
        ALL_NODES,
        ICMPV6,
        &nd(136, OTHER_IP6, &lla_option(2, OTHER_MAC)),
    );
    assert_eq!(check(&p, &na), Err(DropReason::SpoofedNd));
}

#[test]
fn ip_only_policy_does_not_check_the_source_mac_but_derives_link_local_from_it() {
    let p = PortSecurity {
        allowed_macs: Vec::new(),
        ..policy()
    };
    let from_other = eth(OTHER_MAC, 0x0800, &ipv4(IP4, OTHER_IP4, TCP, &tcp(1, 2)));
    assert_eq!(check(&p, &from_other), Ok(()));
    let other_ll = eui64_link_local(OTHER_MAC);
    let ll_of_sender = eth(
        OTHER_MAC,
        0x86dd,
        &ipv6(other_ll, ALL_NODES, UDP, &udp(1, 2, &[])),
    );
    assert_eq!(check(&p, &ll_of_sender), Ok(()));
    // The port's usual link-local address is not the other MAC's.
    let wrong_ll = eth(
        OTHER_MAC,
        0x86dd,
        &ipv6(LINK_LOCAL, ALL_NODES, UDP, &udp(1, 2, &[])),
    );
    assert_eq!(check(&p, &wrong_ll), Err(DropReason::SpoofedSrcIp));
    let arp_other = eth(
        OTHER_MAC,
        0x0806,
        &arp(1, OTHER_MAC, IP4, MacAddr::ZERO, OTHER_IP4),
    );
    assert_eq!(check(&p, &arp_other), Ok(()));
}

/// Each frame and the verdict of the usual policy.
fn verdicts() -> Vec<(Vec<u8>, Result<(), DropReason>)> {
    let mut v: Vec<_> = own_frames().into_iter().map(|f| (f, Ok(()))).collect();
    v.extend([
        (
            v4_frame(OTHER_IP4, IP4, TCP, &tcp(1, 2)),
            Err(DropReason::SpoofedSrcIp),
        ),
        (
            v6_frame(OTHER_IP6, IP6, TCP, &tcp(1, 2)),
            Err(DropReason::SpoofedSrcIp),
        ),
        (
            eth(OTHER_MAC, 0x88cc, &[0; 46]),
            Err(DropReason::SpoofedSrcMac),
        ),
        (
            eth(MAC, 0x0806, &arp(2, OTHER_MAC, IP4, MAC, IP4)),
            Err(DropReason::SpoofedArp),
        ),
        (dad_solicitation(OTHER_IP6), Err(DropReason::SpoofedNd)),
        (dhcp_offer(IP4), Err(DropReason::RogueDhcp)),
        (dhcpv6_advertise(), Err(DropReason::RogueDhcp)),
        (router_advertisement(), Err(DropReason::RogueRa)),
    ]);
    v
}

#[test]
fn vlan_tagged_frames_are_checked_the_same() {
    let p = policy();
    for (f, verdict) in verdicts() {
        for tags in 1..=2 {
            assert_eq!(
                check(&p, &tagged(&f, tags)),
                verdict,
                "{tags} tags: {f:02x?}"
            );
        }
    }
    // A third tag is not a frame the switch takes.
    let three = tagged(&tagged(&own_arp_request(), 1), 2);
    assert_eq!(check(&p, &three), Err(DropReason::Malformed));
}

#[test]
fn bad_ipv4_headers_are_malformed() {
    let p = policy();
    let good = ipv4(IP4, OTHER_IP4, TCP, &tcp(1, 2));
    for ihl in [0, 4] {
        let mut bad = good.clone();
        bad[0] = 0x40 | ihl;
        assert_eq!(
            check(&p, &eth(MAC, 0x0800, &bad)),
            Err(DropReason::Malformed)
        );
    }
    // A header (IHL 15: 60 bytes) longer than the frame.
    let mut long = good[..40].to_vec();
    long[0] = 0x4f;
    long[2..4].copy_from_slice(&40u16.to_be_bytes());
    assert_eq!(
        check(&p, &eth(MAC, 0x0800, &long)),
        Err(DropReason::Malformed)
    );
    // Options are skipped to find the UDP ports.
    let with_options = ipv4_with(IP4, BROADCAST4, UDP, 0, &[1; 8], &udp(67, 68, &[]));
    assert_eq!(
        check(&p, &eth(MAC, 0x0800, &with_options)),
        Err(DropReason::RogueDhcp)
    );
    // A UDP datagram whose ports lie past the IP total length.
    let mut short = ipv4(IP4, BROADCAST4, UDP, &udp(67, 68, &[]));
    short[2..4].copy_from_slice(&22u16.to_be_bytes());
    assert_eq!(
        check(&p, &eth(MAC, 0x0800, &short)),
        Err(DropReason::Malformed)
    );
}
