//! Bodies of the fuzz targets for the switch (see `fuzz/`), kept in the library so that a
//! proptest runs the same code on stable.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use weft_packet::{
    FragmentKind, FrameSummary, GsoKind, L3Summary, L4Summary, MacAddr, OffloadInfo,
};

use crate::counters::DropReason;
use crate::flow_match::{FlowMatch, IpPrefix};
use crate::flow_table::{Action, ActionList, FlowRule};
use crate::memory_port::memory_port;
use crate::policy::PortSecurity;
use crate::port::PortCaps;
use crate::switch::{PortOptions, Switch, SwitchConfig};
use crate::types::{PortId, Timestamp};
use crate::vlan::PortVlanMode;

/// Feeds hostile frames with hostile offload metadata through a switch with plain, access
/// and trunk ports (and, when the first byte is odd, flow rules): nothing may panic, and
/// every injected frame must be received and counted.
///
/// Input: one mode byte, then records `[port][flags][gso_size:2][csum_start:2][csum_offset][len:2][frame]`.
pub fn pipeline(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let Ok(mut sw) = Switch::new(
        "fuzz",
        SwitchConfig {
            batch_size: 8,
            ..SwitchConfig::default()
        },
    ) else {
        return;
    };
    let caps = [
        PortCaps::plain(1500),
        PortCaps::full_offload(1500),
        PortCaps::plain(9000),
    ];
    let modes = [
        PortVlanMode::plain(),
        PortVlanMode::access(10).unwrap_or_default(),
        PortVlanMode::trunk([10, 20], Some(1)).unwrap_or_default(),
    ];
    let mut handles = Vec::new();
    for (i, (caps, vlan)) in caps.iter().zip(modes).enumerate() {
        let (rx, tx, h) = memory_port(*caps, 64);
        let options = PortOptions {
            vlan,
            flood_unknown_unicast: i != 1,
            learning: true,
            ..PortOptions::default()
        };
        if let Ok(id) = sw.add_port(&format!("p{i}"), Some(Box::new(rx)), Box::new(tx), options) {
            handles.push((id, h));
        }
    }
    if mode & 1 == 1 {
        let rules = [
            FlowRule::new(
                5,
                FlowMatch {
                    in_port: Some(PortId(0)),
                    ..FlowMatch::default()
                },
                ActionList::from_slice(&[Action::PushVlan(20), Action::Normal, Action::Controller])
                    .unwrap_or_default(),
            ),
            FlowRule::new(
                3,
                FlowMatch {
                    ethertype: Some(0x0800),
                    ..FlowMatch::default()
                },
                ActionList::from_slice(&[Action::PopVlan, Action::Flood]).unwrap_or_default(),
            ),
        ];
        for r in rules {
            let _ = sw.add_rule(r);
        }
    }
    let mut now = 0u64;
    let mut injected = 0u64;
    while rest.len() >= 10 {
        let (head, tail) = rest.split_at(10);
        let len = usize::from(u16::from_le_bytes([head[8], head[9]])).min(tail.len());
        let (frame, tail) = tail.split_at(len);
        rest = tail;
        let flags = head[1];
        let gso = match flags >> 4 & 3 {
            0 => GsoKind::None,
            1 => GsoKind::TcpV4,
            2 => GsoKind::TcpV6,
            _ => GsoKind::UdpL4,
        };
        let offload = OffloadInfo {
            needs_csum: flags & 1 != 0,
            data_valid: flags & 2 != 0,
            csum_start: u16::from_le_bytes([head[4], head[5]]),
            csum_offset: u16::from(head[6]),
            gso,
            gso_size: u16::from_le_bytes([head[2], head[3]]),
            hdr_len: u16::from(head[7]),
        };
        let Some((id, h)) = handles.get(usize::from(head[0]) % handles.len().max(1)) else {
            return;
        };
        if h.inject_with(frame, offload) {
            injected += 1;
        }
        now += u64::from(flags) * 1_000_000_000;
        sw.poll(*id, Timestamp(now));
        sw.drain_upcalls(|_| {});
    }
    // Every injected frame was received and counted, none was left behind.
    let received: u64 = handles
        .iter()
        .filter_map(|(id, _)| sw.port_counters(*id))
        .map(|c| c.rx_packets.get())
        .sum();
    assert_eq!(received, injected);
    assert!(handles.iter().all(|(_, h)| h.pending_rx() == 0));
}

/// Checks hostile frames against a hostile port security policy: nothing may panic; a head
/// shorter than the frame gives the whole frame's verdict or `Malformed`; bytes past the
/// frame's length are ignored; and a frame let through really keeps to the policy, as the
/// switch's own parser (`FrameSummary`) reads it.
///
/// Input: `[flags]` (bit 0: may serve DHCP, bit 1: may send RAs, bits 2-3: how many MACs,
/// bits 4-6: how many prefixes), the MACs (6 bytes each), the prefixes (`[v6 flag and
/// length][4 or 16 address bytes]` each), `[head length:2]`, then the frame.
pub fn port_security(data: &[u8]) {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let mut policy = PortSecurity {
        allow_dhcp_server: flags & 1 != 0,
        allow_router_advertisements: flags & 2 != 0,
        ..PortSecurity::default()
    };
    for _ in 0..(flags >> 2) & 3 {
        let Some((mac, tail)) = rest.split_first_chunk::<6>() else {
            return;
        };
        policy.allowed_macs.push(MacAddr(*mac));
        rest = tail;
    }
    for _ in 0..(flags >> 4) & 7 {
        let Some((&kind, tail)) = rest.split_first() else {
            return;
        };
        let len = kind & 0x7f;
        let (addr, tail) = if kind & 0x80 == 0 {
            let Some((a, tail)) = tail.split_first_chunk::<4>() else {
                return;
            };
            (IpAddr::V4(Ipv4Addr::from(*a)), tail)
        } else {
            let Some((a, tail)) = tail.split_first_chunk::<16>() else {
                return;
            };
            (IpAddr::V6(Ipv6Addr::from(*a)), tail)
        };
        policy.allowed_ips.push(IpPrefix { addr, len });
        rest = tail;
    }
    let Some((head_len, frame)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let head_len = usize::from(u16::from_le_bytes(*head_len)).min(frame.len());
    let head = &frame[..head_len];

    let whole = policy.check(frame, frame.len());
    let cut = policy.check(head, frame.len());
    assert!(
        cut == whole || cut == Err(DropReason::Malformed),
        "{cut:?} vs {whole:?}"
    );
    assert_eq!(policy.check(frame, head_len), policy.check(head, head_len));
    if whole.is_ok() {
        assert_keeps_to(&policy, frame);
    }
}

/// `frame`, which `policy.check` let through, keeps to `policy` as `FrameSummary` reads it.
fn assert_keeps_to(policy: &PortSecurity, frame: &[u8]) {
    let Ok(summary) = FrameSummary::parse(frame) else {
        panic!("a frame the switch cannot parse passed");
    };
    let macs = &policy.allowed_macs;
    assert!(macs.is_empty() || macs.contains(&summary.src));
    let restricted = !policy.allowed_ips.is_empty();
    let allowed = |ip: IpAddr| !restricted || policy.allowed_ips.iter().any(|p| p.contains(ip));
    let ports = match summary.l4 {
        L4Summary::Ports { src, dst } => Some((src, dst)),
        _ => None,
    };
    let icmp_type = match summary.l4 {
        L4Summary::Icmp { ty, .. } => Some(ty),
        _ => None,
    };
    match summary.l3 {
        L3Summary::None => {}
        L3Summary::Malformed(err) => panic!("a malformed L3 header passed: {err:?}"),
        L3Summary::Arp { sender_ip, .. } => {
            assert!(sender_ip.is_unspecified() || allowed(IpAddr::V4(sender_ip)));
        }
        L3Summary::Ipv4 {
            src,
            protocol,
            fragment,
            ..
        } => {
            let udp = protocol == 17 && fragment != FragmentKind::Later;
            let dhcp_client = src.is_unspecified() && udp && ports == Some((68, 67));
            assert!(allowed(IpAddr::V4(src)) || dhcp_client, "{src}");
            if udp && !policy.allow_dhcp_server {
                assert!(ports.is_none_or(|(src, _)| src != 67));
            }
        }
        L3Summary::Ipv6 {
            src,
            next_header,
            fragment,
            ..
        } => {
            let first = fragment != FragmentKind::Later;
            let icmp_type = icmp_type.filter(|_| first && next_header == 58);
            // fe80::/64 with the MAC's modified EUI-64 interface identifier, written out again.
            let m = summary.src.0;
            let eui64 = [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
            let link_local = src.segments()[..4] == [0xfe80, 0, 0, 0] && src.octets()[8..] == eui64;
            let dad_or_mld = src.is_unspecified() && matches!(icmp_type, Some(131 | 135 | 143));
            assert!(
                allowed(IpAddr::V6(src)) || link_local || dad_or_mld,
                "{src}"
            );
            if !policy.allow_router_advertisements {
                assert!(!matches!(icmp_type, Some(134 | 137)));
            }
            if first && next_header == 17 && !policy.allow_dhcp_server {
                assert!(ports.is_none_or(|(src, _)| src != 547));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pipeline_survives_arbitrary_input(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            super::pipeline(&data);
        }

        #[test]
        fn port_security_survives_arbitrary_input(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            super::port_security(&data);
        }

        /// Real frames, so that the check lets some through and the oracle runs: a policy
        /// of the frame's own MAC and source address (or none), a UDP or ICMPv6 frame, and a
        /// few bytes changed.
        #[test]
        fn port_security_agrees_with_the_parser_on_real_frames(
            flags in any::<u8>(),
            v6 in any::<bool>(),
            ports in (
                prop::sample::select(vec![53u16, 67, 68, 546, 547, 40000]),
                prop::sample::select(vec![53u16, 67, 68, 546, 547, 40000]),
            ),
            icmp_type in prop::sample::select(vec![128u8, 131, 133, 134, 135, 136, 137, 143]),
            head_len in any::<u16>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        ) {
            const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
            let builder = etherparse::PacketBuilder::ethernet2(MAC, [0xff; 6]);
            let mut frame = Vec::new();
            let src6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5];
            let written = match (v6, flags & 0x80 != 0) {
                (false, _) => builder
                    .ipv4([10, 0, 0, 5], [255; 4], 64)
                    .udp(ports.0, ports.1)
                    .write(&mut frame, &[0; 20]),
                (true, false) => builder
                    .ipv6(src6, [0xff; 16], 255)
                    .udp(ports.0, ports.1)
                    .write(&mut frame, &[0; 20]),
                (true, true) => builder
                    .ipv6(src6, [0xff; 16], 255)
                    .icmpv6_raw(icmp_type, 0, [0; 4])
                    .write(&mut frame, &[0; 40]),
            };
            prop_assert!(written.is_ok());
            for (at, byte) in flips {
                let i = at.index(frame.len());
                frame[i] = byte;
            }
            // One MAC, one prefix (the frame's source) when the flags ask for them.
            let mut data = vec![flags & 0x1f];
            if flags & 0x0c != 0 {
                data[0] = (data[0] & 0x03) | 0x04;
                data.extend_from_slice(&MAC);
            }
            if flags & 0x10 != 0 {
                if v6 {
                    data.push(0x80 | 64);
                    data.extend_from_slice(&src6);
                } else {
                    data.extend_from_slice(&[32, 10, 0, 0, 5]);
                }
            }
            data.extend_from_slice(&head_len.to_le_bytes());
            data.extend_from_slice(&frame);
            super::port_security(&data);
        }
    }
}
