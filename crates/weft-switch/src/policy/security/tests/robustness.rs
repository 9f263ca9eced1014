//! The port security check on cut-off heads, short frames and arbitrary bytes: never a
//! panic, and never a verdict a longer head would not give.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use weft_packet::MacAddr;

use super::frames::*;
use super::{check, own_advertisement, policy, verdicts};
use crate::counters::DropReason;
use crate::flow_match::IpPrefix;
use crate::policy::PortSecurity;

#[test]
fn headers_past_the_head_are_malformed_only_when_needed() {
    let p = policy();
    let long_tcp = v4_frame(IP4, OTHER_IP4, TCP, &[0; 1400]);
    assert_eq!(p.check(&long_tcp[..64], long_tcp.len()), Ok(()));
    // Ten options after the target: 22 + 40 + 24 + 80 bytes, past a 128-byte head.
    let mut opts = Vec::new();
    for _ in 0..10 {
        opts.extend_from_slice(&lla_option(2, MAC));
    }
    let na = tagged(&v6_frame(IP6, ALL_NODES, ICMPV6, &nd(136, IP6, &opts)), 2);
    assert_eq!(check(&p, &na), Ok(()));
    assert_eq!(p.check(&na[..128], na.len()), Err(DropReason::Malformed));
    // An ICMPv6 type behind a long hop-by-hop header.
    let mut payload = options_header(ICMPV6, 12);
    payload.extend_from_slice(&icmpv6(128, &[0; 4]));
    let echo = v6_frame(IP6, ALL_NODES, HOP_BY_HOP, &payload);
    assert_eq!(check(&p, &echo), Ok(()));
    assert_eq!(
        p.check(&echo[..128], echo.len()),
        Err(DropReason::Malformed)
    );
}

#[test]
fn bytes_past_frame_len_are_ignored() {
    let p = policy();
    let f = own_advertisement();
    let mut longer = f.clone();
    longer.extend_from_slice(&lla_option(2, OTHER_MAC));
    assert_eq!(p.check(&longer, f.len()), Ok(()));
    // A frame cut short by its length is cut short.
    assert_eq!(p.check(&f, 30), Err(DropReason::Malformed));
}

#[test]
fn truncated_frames_never_panic() {
    let policies = [
        policy(),
        PortSecurity {
            allowed_macs: Vec::new(),
            ..policy()
        },
        PortSecurity {
            allowed_ips: Vec::new(),
            ..policy()
        },
    ];
    let mut frames: Vec<Vec<u8>> = verdicts().into_iter().map(|(f, _)| f).collect();
    let tagged_frames: Vec<_> = frames.iter().map(|f| tagged(f, 2)).collect();
    frames.extend(tagged_frames);
    for p in &policies {
        for f in &frames {
            let whole = check(p, f);
            for len in 0..=f.len() {
                // A short frame: anything but a panic.
                let _ = check(p, &f[..len]);
                // A short head of the whole frame: the whole frame's verdict, or too short.
                let cut = p.check(&f[..len], f.len());
                assert!(
                    cut == whole || cut == Err(DropReason::Malformed),
                    "{len}: {cut:?}"
                );
            }
        }
    }
}

fn arb_policy() -> impl Strategy<Value = PortSecurity> {
    let mac = prop_oneof![
        Just(MAC),
        Just(OTHER_MAC),
        any::<[u8; 6]>().prop_map(MacAddr)
    ];
    let prefix = prop_oneof![
        (any::<[u8; 4]>(), 0u8..=40).prop_map(|(a, len)| IpPrefix {
            addr: IpAddr::V4(Ipv4Addr::from(a)),
            len,
        }),
        (any::<[u8; 16]>(), 0u8..=140).prop_map(|(a, len)| IpPrefix {
            addr: IpAddr::V6(Ipv6Addr::from(a)),
            len,
        }),
        Just(IpPrefix::host(IpAddr::V4(IP4))),
        Just(IpPrefix::host(IpAddr::V6(IP6))),
    ];
    (
        proptest::collection::vec(mac, 0..3),
        proptest::collection::vec(prefix, 0..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(allowed_macs, allowed_ips, dhcp, ra)| PortSecurity {
            allowed_macs,
            allowed_ips,
            allow_dhcp_server: dhcp,
            allow_router_advertisements: ra,
        })
}

proptest! {
    #[test]
    fn check_never_panics_on_arbitrary_bytes_and_policies(
        p in arb_policy(),
        frame in proptest::collection::vec(any::<u8>(), 0..200),
        frame_len in 0usize..300,
    ) {
        let _ = p.check(&frame, frame_len);
    }

    #[test]
    fn check_never_panics_on_mutated_frames(
        p in arb_policy(),
        which in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let all = verdicts();
        let mut f = all[which.index(all.len())].0.clone();
        for (at, byte) in flips {
            let i = at.index(f.len());
            f[i] = byte;
        }
        let whole = p.check(&f, f.len());
        let head = cut.index(f.len() + 1);
        let cut = p.check(&f[..head], f.len());
        prop_assert!(cut == whole || cut == Err(DropReason::Malformed));
    }
}
