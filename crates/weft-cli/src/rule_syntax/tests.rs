use proptest::prelude::*;
use weft_control::rule::{ActionSpec, MatchSpec, RuleSpec};

use super::*;

fn err(text: &str) -> RuleSyntaxError {
    parse_rule(text).unwrap_err()
}

#[test]
fn the_documented_example_parses() {
    let r = parse_rule(
        "priority=10,in_port=vm1,dl_dst=52:54:00:00:00:02,ip_dst=10.0.0.0/8,nw_proto=6,tp_dst=80 \
         actions=push_vlan:10,output:vm2",
    )
    .unwrap();
    assert_eq!(
        r,
        RuleSpec {
            priority: 10,
            matches: MatchSpec {
                in_port: Some("vm1".into()),
                dst_mac: Some("52:54:00:00:00:02".parse().unwrap()),
                ip_dst: Some("10.0.0.0/8".parse().unwrap()),
                ip_proto: Some(6),
                l4_dst: Some(80),
                ..MatchSpec::default()
            },
            actions: vec![ActionSpec::PushVlan(10), ActionSpec::Output("vm2".into())],
            cookie: 0,
        }
    );
}

#[test]
fn actions_alone_match_everything() {
    let r = parse_rule("actions=drop").unwrap();
    assert_eq!(r.matches, MatchSpec::default());
    assert_eq!(r.priority, 0);
    assert_eq!(r.actions, vec![ActionSpec::Drop]);
}

#[test]
fn actions_may_follow_a_comma_and_fields_may_be_spaced() {
    let a = parse_rule("in_port=a, tcp ,actions=flood").unwrap();
    let b = parse_rule("in_port=a tcp actions=flood").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.matches.ip_proto, Some(6));
}

#[test]
fn shorthands_set_ethertype_and_protocol() {
    let cases = [
        ("ip", 0x0800, None),
        ("ipv6", 0x86dd, None),
        ("arp", 0x0806, None),
        ("tcp", 0x0800, Some(6)),
        ("udp", 0x0800, Some(17)),
        ("icmp", 0x0800, Some(1)),
        ("tcp6", 0x86dd, Some(6)),
        ("udp6", 0x86dd, Some(17)),
        ("icmp6", 0x86dd, Some(58)),
    ];
    for (word, ethertype, proto) in cases {
        let r = parse_rule(&format!("{word} actions=normal")).unwrap();
        assert_eq!(r.matches.ethertype, Some(ethertype), "{word}");
        assert_eq!(r.matches.ip_proto, proto, "{word}");
    }
}

#[test]
fn numbers_may_be_hex() {
    let r = parse_rule("dl_type=0x86DD,cookie=0xff,priority=0x10 actions=drop").unwrap();
    assert_eq!(r.matches.ethertype, Some(0x86dd));
    assert_eq!(r.cookie, 255);
    assert_eq!(r.priority, 16);
}

#[test]
fn every_action_parses() {
    let r = parse_rule(
        "actions=output:p1,flood,normal,drop,push_vlan:4095,pop_vlan,strip_vlan,controller",
    )
    .unwrap();
    assert_eq!(
        r.actions,
        vec![
            ActionSpec::Output("p1".into()),
            ActionSpec::Flood,
            ActionSpec::Normal,
            ActionSpec::Drop,
            ActionSpec::PushVlan(4095),
            ActionSpec::PopVlan,
            ActionSpec::PopVlan,
            ActionSpec::Controller,
        ]
    );
}

#[test]
fn ip_aliases_set_the_same_fields() {
    let a = parse_rule("ipv6_src=2001:db8::/32,ip_dst=::1,ip_proto=17 actions=drop").unwrap();
    assert_eq!(a.matches.ip_src.unwrap().to_string(), "2001:db8::/32");
    assert_eq!(a.matches.ip_dst.unwrap().to_string(), "::1");
    assert_eq!(a.matches.ip_proto, Some(17));
}

#[test]
fn misspelt_key_gets_column_and_suggestion() {
    let e = err("in_port=vm1,dl_dts=52:54:00:00:00:02 actions=drop");
    assert_eq!(
        e.message,
        "unknown key 'dl_dts' at column 13: did you mean 'dl_dst'?"
    );
    assert_eq!(e.column, 13);
}

#[test]
fn unknown_key_far_from_any_gets_no_suggestion() {
    let e = err("frobnicate=1 actions=drop");
    assert!(e
        .message
        .starts_with("unknown key 'frobnicate' at column 1"));
    assert!(!e.message.contains("did you mean"), "{}", e.message);
}

#[test]
fn missing_actions_is_an_error() {
    let e = err("priority=1,in_port=a");
    assert!(e.message.contains("missing 'actions='"), "{}", e.message);
    assert_eq!(err("").column, 1);
}

#[test]
fn empty_actions_is_an_error() {
    let e = err("in_port=a actions=");
    assert!(e.message.contains("no actions"), "{}", e.message);
    assert_eq!(e.column, 19);
}

#[test]
fn trailing_comma_in_actions_is_an_empty_action() {
    let e = err("actions=drop,");
    assert_eq!(e.message, "empty action at column 14");
}

#[test]
fn bad_values_say_what_is_expected() {
    let e = err("priority=70000 actions=drop");
    assert_eq!(
        e.message,
        "invalid value '70000' for 'priority' at column 10: expected a number from 0 to 65535 \
         (decimal or 0x hex)"
    );
    assert!(err("dl_src=52:54:00:00:00 actions=drop")
        .message
        .contains("expected a MAC address"));
    assert!(err("dl_src=52:54:00:00:00:01/ff actions=drop")
        .message
        .contains("expected a MAC address"));
    assert!(err("nw_dst=10.0.0.0/33 actions=drop")
        .message
        .contains("IPv4 or IPv6"));
    assert!(err("nw_dst=2001:db8::/129 actions=drop")
        .message
        .contains("IPv4 or IPv6"));
    assert!(err("nw_dst=10.0.0.0/ actions=drop")
        .message
        .contains("IPv4"));
    assert!(err("dl_vlan=4096 actions=drop").message.contains("VLAN id"));
    assert!(err("nw_proto=256 actions=drop")
        .message
        .contains("0 to 255"));
    assert!(err("tp_dst=-1 actions=drop").message.contains("0 to 65535"));
    assert!(err("tp_dst=+1 actions=drop").message.contains("0 to 65535"));
    assert!(err("cookie=0x actions=drop").message.contains("2^64"));
}

#[test]
fn key_without_value_is_an_error() {
    assert_eq!(
        err("in_port actions=drop").message,
        "key 'in_port' at column 1 needs a value: in_port=..."
    );
}

#[test]
fn shorthand_with_value_is_an_error() {
    assert!(err("tcp=1 actions=drop").message.contains("takes no value"));
}

#[test]
fn conflicting_fields_name_both_places() {
    assert_eq!(
        err("tcp,udp actions=drop").message,
        "'udp' at column 5 conflicts with 'tcp' at column 1: both set nw_proto"
    );
    assert!(err("ipv6,dl_type=0x0800 actions=drop")
        .message
        .contains("both set dl_type"));
    assert!(err("priority=1,priority=2 actions=drop")
        .message
        .contains("both set priority"));
}

#[test]
fn consistent_repeats_are_accepted() {
    let r = parse_rule("ip,tcp,nw_proto=6 actions=drop").unwrap();
    assert_eq!(r.matches.ethertype, Some(0x0800));
    assert_eq!(r.matches.ip_proto, Some(6));
}

#[test]
fn action_errors_are_precise() {
    assert_eq!(
        err("actions=outptu:vm2").message,
        "unknown action 'outptu' at column 9: did you mean 'output'?"
    );
    assert_eq!(
        err("actions=vm2").message,
        "unknown action 'vm2' at column 9: to send to a port, write 'output:vm2'"
    );
    assert_eq!(
        err("actions=output=vm2").message,
        "unknown action 'output=vm2' at column 9: did you mean 'output:vm2'?"
    );
    assert_eq!(
        err("actions=drop, output").message,
        "action 'output' at column 15 needs a port: output:PORT"
    );
    assert_eq!(
        err("actions=drop:1").message,
        "action 'drop' at column 9 takes no argument"
    );
    assert_eq!(
        err("actions=push_vlan:5000").message,
        "invalid VLAN '5000' for 'push_vlan' at column 19: expected a VLAN id from 0 to 4095"
    );
    assert!(err("actions=output:a:b")
        .message
        .contains("invalid port name"));
    assert!(err("actions=output:vm 2")
        .message
        .contains("invalid port name"));
}

#[test]
fn second_actions_keyword_is_an_error() {
    assert!(parse_rule("actions=drop actions=flood").is_err());
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = err("in_port=é,dl_dts=1 actions=drop");
    assert_eq!(e.column, 11);
}

#[test]
fn printer_uses_shorthands_and_canonical_keys() {
    let r = parse_rule(
        "tp_dst=80,ip_dst=10.0.0.0/8,nw_proto=6,dl_type=0x0800,cookie=16,in_port=vm1 \
         actions=push_vlan:10,output:vm2",
    )
    .unwrap();
    assert_eq!(
        format_rule(&r),
        "priority=0,cookie=0x10,in_port=vm1,tcp,nw_dst=10.0.0.0/8,tp_dst=80 \
         actions=push_vlan:10,output:vm2"
    );
}

#[test]
fn printer_keeps_unknown_protocol_and_ethertype_explicit() {
    let r = parse_rule("ip,nw_proto=47,dl_vlan=0 actions=drop").unwrap();
    assert_eq!(
        format_rule(&r),
        "priority=0,ip,dl_vlan=0,nw_proto=47 actions=drop"
    );
    let r = parse_rule("dl_type=0x88b5,nw_proto=6 actions=drop").unwrap();
    assert_eq!(
        format_rule(&r),
        "priority=0,dl_type=0x88b5,nw_proto=6 actions=drop"
    );
}

fn port_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.-]{1,16}"
}

fn mac() -> impl Strategy<Value = String> {
    let one = || any::<[u8; 6]>().prop_map(|b| weft_mac(&b));
    (one(), proptest::option::of(one())).prop_map(|(a, m)| match m {
        Some(m) => format!("{a}/{m}"),
        None => a,
    })
}

fn weft_mac(b: &[u8; 6]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn prefix() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<[u8; 4]>(), proptest::option::of(0u8..=32)).prop_map(|(a, l)| {
            let addr = std::net::Ipv4Addr::from(a);
            l.map_or(addr.to_string(), |l| format!("{addr}/{l}"))
        }),
        (any::<[u8; 16]>(), proptest::option::of(0u8..=128)).prop_map(|(a, l)| {
            let addr = std::net::Ipv6Addr::from(a);
            l.map_or(addr.to_string(), |l| format!("{addr}/{l}"))
        }),
    ]
}

fn action() -> impl Strategy<Value = ActionSpec> {
    prop_oneof![
        port_name().prop_map(ActionSpec::Output),
        Just(ActionSpec::Flood),
        Just(ActionSpec::Normal),
        Just(ActionSpec::Drop),
        (0u16..=4095).prop_map(ActionSpec::PushVlan),
        Just(ActionSpec::PopVlan),
        Just(ActionSpec::Controller),
    ]
}

fn ethertype() -> impl Strategy<Value = u16> {
    prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806), any::<u16>()]
}

fn ip_proto() -> impl Strategy<Value = u8> {
    prop_oneof![Just(6u8), Just(17), Just(1), Just(58), any::<u8>()]
}

fn match_spec() -> impl Strategy<Value = MatchSpec> {
    use proptest::option::of;
    (
        (of(port_name()), of(mac()), of(mac()), of(0u16..=4095)),
        (of(ethertype()), of(prefix()), of(prefix()), of(ip_proto())),
        (of(any::<u16>()), of(any::<u16>())),
    )
        .prop_map(
            |(
                (in_port, src_mac, dst_mac, vlan),
                (ethertype, ip_src, ip_dst, ip_proto),
                (l4_src, l4_dst),
            )| MatchSpec {
                in_port,
                // The text forms the strategies write are the canonical ones.
                src_mac: src_mac.map(|m| m.parse().unwrap()),
                dst_mac: dst_mac.map(|m| m.parse().unwrap()),
                vlan,
                ethertype,
                ip_src: ip_src.map(|p| p.parse().unwrap()),
                ip_dst: ip_dst.map(|p| p.parse().unwrap()),
                ip_proto,
                l4_src,
                l4_dst,
            },
        )
}

fn rule_spec() -> impl Strategy<Value = RuleSpec> {
    (
        any::<u16>(),
        match_spec(),
        proptest::collection::vec(action(), 1..5),
        any::<u64>(),
    )
        .prop_map(|(priority, matches, actions, cookie)| RuleSpec {
            priority,
            matches,
            actions,
            cookie,
        })
}

proptest! {
    #[test]
    fn printing_then_parsing_gives_the_rule_back(rule in rule_spec()) {
        let text = format_rule(&rule);
        prop_assert_eq!(parse_rule(&text), Ok(rule), "text: {}", text);
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(text in "\\PC{0,80}") {
        let _ = parse_rule(&text);
    }

    #[test]
    fn parser_never_panics_on_rule_like_text(
        text in "[a-z_]{0,9}(=[0-9a-fx:./]{0,12})?([, ][a-z_]{0,9}(=[0-9a-z:./]{0,8})?){0,4}( actions=[a-z_:0-9,]{0,20})?"
    ) {
        if let Err(e) = parse_rule(&text) {
            prop_assert!(e.column >= 1 && e.column <= text.chars().count() + 1, "{:?}", e);
        }
    }
}
