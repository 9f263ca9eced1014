//! `FlowTable::lookup` against a naive reference matcher, over random rule sets, random
//! inserts/removes/clears and random keys.

use core::cmp::Reverse;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use proptest::sample::select;
use weft_packet::MacAddr;

use super::*;
use crate::flow_match::{IpPrefix, MacMatch};
use crate::types::PortId;

const MAX_RULES: usize = 24;

// ---- The reference: each field compared the obvious way, bit by bit where masked. ----

fn bit(bytes: &[u8], i: usize) -> u8 {
    (bytes[i / 8] >> (7 - i % 8)) & 1
}

fn ref_prefix(p: &IpPrefix, addr: Option<IpAddr>) -> bool {
    let (net, addr): (Vec<u8>, Vec<u8>) = match (p.addr, addr) {
        (IpAddr::V4(n), Some(IpAddr::V4(a))) => (n.octets().to_vec(), a.octets().to_vec()),
        (IpAddr::V6(n), Some(IpAddr::V6(a))) => (n.octets().to_vec(), a.octets().to_vec()),
        _ => return false,
    };
    (0..usize::from(p.len)).all(|i| bit(&net, i) == bit(&addr, i))
}

fn ref_mac(m: &MacMatch, addr: MacAddr) -> bool {
    (0..6).all(|i| addr.0[i] & m.mask.0[i] == m.addr.0[i])
}

fn ref_matches(m: &FlowMatch, k: &FlowKey) -> bool {
    m.in_port.is_none_or(|p| p == k.in_port)
        && m.src_mac.is_none_or(|s| ref_mac(&s, k.src_mac))
        && m.dst_mac.is_none_or(|d| ref_mac(&d, k.dst_mac))
        && m.vlan.is_none_or(|v| v == k.vlan)
        && m.ethertype.is_none_or(|e| e == k.ethertype)
        && m.ip_src.is_none_or(|p| ref_prefix(&p, k.ip_src))
        && m.ip_dst.is_none_or(|p| ref_prefix(&p, k.ip_dst))
        && m.ip_proto.is_none_or(|p| p == k.ip_proto)
        && m.l4_src.is_none_or(|p| p == k.l4_src)
        && m.l4_dst.is_none_or(|p| p == k.l4_dst)
}

/// Highest priority, then earliest inserted, among `rules` (kept in insertion order).
fn ref_lookup(rules: &[(RuleId, FlowRule)], key: &FlowKey) -> Option<RuleId> {
    rules
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| ref_matches(&r.matches, key))
        .min_by_key(|(order, (_, r))| (Reverse(r.priority), *order))
        .map(|(_, (id, _))| *id)
}

// ---- Generators: small value pools, so that rules and keys meet often. ----

fn mac() -> impl Strategy<Value = MacAddr> {
    select(vec![
        MacAddr([0x52, 0x54, 0, 0, 0, 1]),
        MacAddr([0x52, 0x54, 0, 0, 0, 2]),
        MacAddr([0x52, 0x55, 0, 0, 0, 1]),
        MacAddr::BROADCAST,
    ])
}

fn mac_match() -> impl Strategy<Value = MacMatch> {
    let masks = select(vec![
        MacAddr::BROADCAST,
        MacAddr([0xff, 0xff, 0xff, 0, 0, 0]),
        MacAddr([1, 0, 0, 0, 0, 0]),
        MacAddr::ZERO,
    ]);
    (mac(), masks).prop_map(|(addr, mask)| MacMatch {
        addr: MacAddr::from_u64(addr.to_u64() & mask.to_u64()),
        mask,
    })
}

fn v4() -> impl Strategy<Value = IpAddr> {
    select(vec![
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [10, 1, 0, 1],
        [192, 168, 1, 1],
    ])
    .prop_map(|o| IpAddr::V4(Ipv4Addr::from(o)))
}

fn v6() -> impl Strategy<Value = IpAddr> {
    select(vec![
        0x2001_0db8_0000_0000_0000_0000_0000_0001u128,
        0x2001_0db8_0000_0000_0000_0000_0000_0002,
        0x2001_0db8_0001_0000_0000_0000_0000_0001,
        0x0a00_0001_0000_0000_0000_0000_0000_0000, // top bits equal 10.0.0.1
    ])
    .prop_map(|a| IpAddr::V6(Ipv6Addr::from(a)))
}

/// A valid prefix of the family: a pooled address cut to a random length.
fn prefix(is_v6: bool) -> BoxedStrategy<IpPrefix> {
    if is_v6 {
        (v6(), select(vec![0u8, 16, 32, 48, 64, 127, 128]))
            .prop_map(|(a, len)| {
                let IpAddr::V6(a) = a else { unreachable!() };
                let mask = (!0u128).checked_shl(128 - u32::from(len)).unwrap_or(0);
                let addr = IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask));
                IpPrefix { addr, len }
            })
            .boxed()
    } else {
        (v4(), select(vec![0u8, 8, 16, 24, 31, 32]))
            .prop_map(|(a, len)| {
                let IpAddr::V4(a) = a else { unreachable!() };
                let mask = (!0u32).checked_shl(32 - u32::from(len)).unwrap_or(0);
                let addr = IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask));
                IpPrefix { addr, len }
            })
            .boxed()
    }
}

fn l4() -> impl Strategy<Value = u16> {
    select(vec![0u16, 80, 443])
}

/// The L3/L4 part of a match, with its prerequisites.
fn l3_match() -> impl Strategy<Value = FlowMatch> {
    prop_oneof![
        Just(FlowMatch::ANY),
        Just(FlowMatch {
            ethertype: Some(0x0806),
            ..FlowMatch::ANY
        }),
        any::<bool>().prop_flat_map(|is_v6| {
            let ethertype = if is_v6 { 0x86dd } else { 0x0800 };
            let proto = prop::option::of((
                select(vec![6u8, 17, 1]),
                prop::option::of(l4()),
                prop::option::of(l4()),
            ));
            (
                prop::option::of(prefix(is_v6)),
                prop::option::of(prefix(is_v6)),
                proto,
            )
                .prop_map(move |(ip_src, ip_dst, proto)| FlowMatch {
                    ethertype: Some(ethertype),
                    ip_src,
                    ip_dst,
                    ip_proto: proto.map(|p| p.0),
                    l4_src: proto.and_then(|p| p.1),
                    l4_dst: proto.and_then(|p| p.2),
                    ..FlowMatch::ANY
                })
        }),
    ]
}

fn flow_rule() -> impl Strategy<Value = FlowRule> {
    (
        0u16..4,
        prop::option::of((0u16..3).prop_map(PortId)),
        prop::option::of(mac_match()),
        prop::option::of(mac_match()),
        prop::option::of(0u16..3),
        l3_match(),
        0u16..8,
    )
        .prop_map(|(priority, in_port, src_mac, dst_mac, vlan, l3, out)| {
            let matches = FlowMatch {
                in_port,
                src_mac,
                dst_mac,
                vlan,
                ..l3
            };
            FlowRule::new(
                priority,
                matches,
                ActionList::single(Action::Output(PortId(out))),
            )
        })
}

/// Keys from a few values per field (so that random pairs often match), families mixed.
pub(crate) fn flow_key() -> impl Strategy<Value = FlowKey> {
    let addrs = prop_oneof![
        Just((0x0806u16, None, None)),
        (v4(), v4()).prop_map(|(s, d)| (0x0800, Some(s), Some(d))),
        (v6(), v6()).prop_map(|(s, d)| (0x86dd, Some(s), Some(d))),
        // Inconsistent on purpose: only the address family can tell these apart.
        (v6(), v4()).prop_map(|(s, d)| (0x0800, Some(s), Some(d))),
        (v4(), v6()).prop_map(|(s, d)| (0x86dd, Some(s), Some(d))),
    ];
    (
        (0u16..3).prop_map(PortId),
        mac(),
        mac(),
        0u16..3,
        addrs,
        select(vec![0u8, 6, 17, 1]),
        l4(),
        l4(),
    )
        .prop_map(
            |(
                in_port,
                src_mac,
                dst_mac,
                vlan,
                (ethertype, ip_src, ip_dst),
                ip_proto,
                l4_src,
                l4_dst,
            )| {
                FlowKey {
                    in_port,
                    dst_mac,
                    src_mac,
                    vlan,
                    ethertype,
                    ip_src,
                    ip_dst,
                    ip_proto,
                    l4_src,
                    l4_dst,
                }
            },
        )
}

#[derive(Clone, Debug)]
enum Op {
    Insert(FlowRule),
    /// Removes the model's rule at this index (modulo its length), or an unknown id.
    Remove(usize),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => flow_rule().prop_map(Op::Insert),
        4 => any::<usize>().prop_map(Op::Remove),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lookup_equals_the_reference_matcher(
        ops in prop::collection::vec(op(), 0..48),
        keys in prop::collection::vec(flow_key(), 1..24),
    ) {
        let mut table = FlowTable::new(MAX_RULES);
        let mut model: Vec<(RuleId, FlowRule)> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(rule) => {
                    prop_assert_eq!(rule.validate(), Ok(()));
                    match table.insert(rule) {
                        Ok(id) => model.push((id, rule)),
                        Err(e) => {
                            prop_assert_eq!(e, FlowError::TableFull { max_rules: MAX_RULES });
                            prop_assert_eq!(model.len(), MAX_RULES);
                        }
                    }
                }
                Op::Remove(i) if model.is_empty() => {
                    prop_assert_eq!(table.remove(RuleId(i as u64)), None);
                }
                Op::Remove(i) => {
                    let (id, rule) = model.remove(i % model.len());
                    prop_assert_eq!(table.remove(id), Some(rule));
                }
                Op::Clear => {
                    table.clear();
                    model.clear();
                }
            }
            prop_assert_eq!(table.len(), model.len());
            for key in &keys {
                let got = table.lookup(key);
                prop_assert_eq!(got.map(|(id, _)| id), ref_lookup(&model, key), "key {:?}", key);
                if let Some((id, rule)) = got {
                    let expected = model.iter().find(|(m, _)| *m == id).map(|(_, r)| r);
                    prop_assert_eq!(Some(rule), expected);
                }
            }
        }
    }
}
