use weft_control::rule::{ActionSpec, MatchSpec, RuleSpec};
use weft_control::state::{PortSettings, StaticMac, SwitchSettings, VlanMode};
use weft_control::ErrorKind;

use super::*;

fn tap(name: &str) -> PortState {
    PortState {
        name: name.into(),
        kind: PortKind::Tap {
            ifname: None,
            netns: None,
            queues: 1,
            mtu: 1500,
            offloads: true,
        },
        options: PortSettings::default(),
    }
}

fn switch(ports: &[&str]) -> SwitchState {
    SwitchState {
        name: "br0".into(),
        settings: SwitchSettings::default(),
        ports: ports.iter().map(|p| tap(p)).collect(),
        static_macs: Vec::new(),
        rules: Vec::new(),
        on_demand: false,
    }
}

fn kind_of(s: &SwitchState) -> ErrorKind {
    switch_state(s).unwrap_err().kind
}

#[test]
fn a_plain_switch_with_ports_macs_and_rules_is_valid() {
    let mut s = switch(&["vm1", "vm2"]);
    s.static_macs.push(StaticMac {
        vlan: 0,
        mac: "02:00:00:00:00:01".parse().unwrap(),
        port: "vm1".into(),
    });
    s.rules.push(RuleSpec {
        matches: MatchSpec {
            in_port: Some("vm1".into()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output("vm2".into())],
        ..RuleSpec::default()
    });
    switch_state(&s).unwrap();
}

#[test]
fn duplicate_ports_and_entries_are_already_exists() {
    assert_eq!(kind_of(&switch(&["a", "a"])), ErrorKind::AlreadyExists);
    let mut s = switch(&["a"]);
    for mac in ["02:00:00:00:00:01", "02-00-00-00-00-01"] {
        s.static_macs.push(StaticMac {
            vlan: 0,
            mac: mac.parse().unwrap(),
            port: "a".into(),
        });
    }
    assert_eq!(
        kind_of(&s),
        ErrorKind::AlreadyExists,
        "same address written two ways"
    );
}

#[test]
fn bad_values_are_invalid_and_named() {
    let mut s = switch(&["a"]);
    s.static_macs.push(StaticMac {
        vlan: 4095,
        mac: "02:00:00:00:00:01".parse().unwrap(),
        port: "a".into(),
    });
    let e = switch_state(&s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("static_macs[0]"), "{}", e.message);

    let mut s = switch(&["a"]);
    s.static_macs.push(StaticMac {
        vlan: 0,
        mac: "ff:ff:ff:ff:ff:ff".parse().unwrap(),
        port: "a".into(),
    });
    assert_eq!(kind_of(&s), ErrorKind::Invalid, "broadcast is no station");

    let mut s = switch(&["a"]);
    s.ports[0].options.vlan = VlanMode::Access { vlan: 5000 };
    let e = switch_state(&s).unwrap_err();
    assert!(
        e.message.contains("port \"a\"") && e.message.contains("5000"),
        "{}",
        e.message
    );

    let mut s = switch(&["a"]);
    s.ports[0].kind = PortKind::Tap {
        ifname: None,
        netns: None,
        queues: 0,
        mtu: 1500,
        offloads: true,
    };
    assert_eq!(kind_of(&s), ErrorKind::Invalid);
}

#[test]
fn taps_of_1_to_16_queues_are_taken_and_more_refused() {
    let tap = |queues| PortState {
        name: "vm1".into(),
        kind: PortKind::Tap {
            ifname: None,
            netns: None,
            queues,
            mtu: 1500,
            offloads: true,
        },
        options: PortSettings::default(),
    };
    for queues in [1, 2, 4, 16] {
        assert!(port(&tap(queues)).is_ok(), "{queues} queues");
    }
    let e = port(&tap(17)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("1 to 16"), "{}", e.message);
}

#[test]
fn references_to_missing_ports_are_not_found() {
    let mut s = switch(&["a"]);
    s.static_macs.push(StaticMac {
        vlan: 0,
        mac: "02:00:00:00:00:01".parse().unwrap(),
        port: "b".into(),
    });
    assert_eq!(kind_of(&s), ErrorKind::NotFound);
    let mut s = switch(&["a"]);
    s.rules.push(RuleSpec {
        actions: vec![ActionSpec::Output("b".into())],
        ..RuleSpec::default()
    });
    let e = switch_state(&s).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.starts_with("rules[0]"), "{}", e.message);
}

#[test]
fn limits_are_limit_reached() {
    let mut s = switch(&[]);
    s.settings.max_rules = 1;
    s.rules = vec![
        RuleSpec {
            actions: vec![ActionSpec::Drop],
            ..RuleSpec::default()
        };
        2
    ];
    assert_eq!(kind_of(&s), ErrorKind::LimitReached);
}

#[test]
fn long_port_names_need_an_ifname_for_tap() {
    let s = switch(&["a-very-long-port-name"]);
    let e = switch_state(&s).unwrap_err();
    assert!(e.hint.unwrap_or_default().contains("ifname"));
    let mut s = switch(&["a-very-long-port-name"]);
    s.ports[0].kind = PortKind::Tap {
        ifname: Some("tap0".into()),
        netns: None,
        queues: 1,
        mtu: 1500,
        offloads: true,
    };
    switch_state(&s).unwrap();
}

#[test]
fn names_follow_the_switch_rules() {
    for bad in ["", "a b", "x:y", &"n".repeat(33)] {
        assert!(switch_name(bad).is_err(), "{bad:?}");
    }
    for bad in ["", "a b", "x:y", "tab\t", &"n".repeat(65)] {
        assert!(port_name(bad).is_err(), "{bad:?}");
    }
    assert!(
        port_name("vm\"1\\").is_ok(),
        "quotes are allowed in port names"
    );
}

#[test]
fn whole_states_need_version_1_and_unique_switches() {
    let mut st = State {
        version: 2,
        switches: vec![],
    };
    assert_eq!(state(&st).unwrap_err().kind, ErrorKind::UnsupportedVersion);
    st.version = 1;
    st.switches = vec![switch(&[]), switch(&[])];
    assert_eq!(state(&st).unwrap_err().kind, ErrorKind::AlreadyExists);
}

#[test]
fn table_sizes_are_bounded_across_switches() {
    let big = |name: &str| SwitchState {
        name: name.into(),
        settings: SwitchSettings {
            fdb_max_entries: MAX_TOTAL_FDB_ENTRIES / 2 + 1,
            fdb_max_per_port: 1024,
            ..SwitchSettings::default()
        },
        ..switch(&[])
    };
    totals(&[big("a")]).unwrap();
    let e = totals(&[big("a"), big("b")]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LimitReached);
    assert!(e.message.contains("fdb_max_entries"), "{}", e.message);
}

#[test]
fn the_recorded_state_file_is_a_valid_configuration() {
    let text = include_str!("../../../../weft-control/tests/fixtures/state.json");
    let recorded: State = serde_json::from_str(text).unwrap();
    state(&recorded).unwrap();
}
