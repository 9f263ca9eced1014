use std::collections::BTreeMap;

use weft_control::response::{LaneStats, PortStats, SwitchInfo};
use weft_control::rule::{ActionSpec, MatchSpec, RuleSpec};
use weft_control::state::{PortSettings, State, SwitchSettings};

use super::*;

fn tap_port() -> PortInfo {
    PortInfo {
        switch: "br0".into(),
        name: "vm1".into(),
        kind: PortKind::Tap {
            ifname: None,
            netns: Some("blue".into()),
            queues: 2,
            mtu: 9000,
            offloads: true,
        },
        options: PortSettings {
            vlan: VlanMode::Access { vlan: 10 },
            flood_unknown_unicast: true,
            learning: false,
            ..PortSettings::default()
        },
        mtu: 9000,
        offloads: vec!["csum".into(), "tso4".into()],
        failed: None,
        attached: None,
        guest_mtu: None,
        warnings: Vec::new(),
    }
}

#[test]
fn switches_render_as_an_aligned_table() {
    let r = Response::Switches {
        switches: vec![SwitchInfo {
            name: "br0".into(),
            settings: SwitchSettings::default(),
            ports: 2,
            fdb_entries: 17,
            rules: 1,
            worker: 0,
            workers: vec![0],
        }],
    };
    assert_eq!(
        human(&Request::SwitchList {}, &r),
        "NAME  PORTS  FDB  RULES  WORKER  BATCH  FDB-MAX  PER-PORT  AGEING  MAX-RULES  CACHE\n\
         br0       2   17      1       0    128     8192      1024    300s       4096   4096\n"
    );
}

#[test]
fn empty_lists_say_so() {
    let req = Request::SwitchList {};
    assert_eq!(
        human(&req, &Response::Switches { switches: vec![] }),
        "no switches\n"
    );
    assert_eq!(
        human(&req, &Response::Ports { ports: vec![] }),
        "no ports\n"
    );
    assert_eq!(
        human(&req, &Response::Fdb { entries: vec![] }),
        "no FDB entries\n"
    );
    assert_eq!(
        human(&req, &Response::Rules { rules: vec![] }),
        "no rules\n"
    );
}

#[test]
fn done_prints_nothing_and_rule_added_prints_the_id() {
    assert_eq!(human(&Request::SwitchList {}, &Response::Done), "");
    assert_eq!(
        human(&Request::SwitchList {}, &Response::RuleAdded { id: 42 }),
        "42\n"
    );
}

#[test]
fn ports_show_kind_state_ifname_and_vlan_mode() {
    let trunk = PortInfo {
        name: "up".into(),
        kind: PortKind::AfPacket {
            ifname: "eth1".into(),
        },
        options: PortSettings {
            vlan: VlanMode::Trunk {
                vlans: vec![10, 20],
                native: Some(1),
            },
            ..PortSettings::default()
        },
        mtu: 1500,
        offloads: vec![],
        failed: Some("no such device".into()),
        ..tap_port()
    };
    let text = human(
        &Request::PortList { switch: None },
        &Response::Ports {
            ports: vec![tap_port(), trunk],
        },
    );
    assert_eq!(
        text,
        "SWITCH  PORT  TYPE       STATE   IFNAME  VLAN                   MTU  LEARN  FLOOD  OFFLOADS\n\
         br0     vm1   tap        up      vm1     access 10             9000  no     yes    csum,tso4\n\
         br0     up    af-packet  failed  eth1    trunk 10,20 native 1  1500  yes    yes    -\n"
    );
}

#[test]
fn port_show_lists_a_vhost_ports_device_counters_after_its_drops() {
    let counters = PortCounters {
        device: BTreeMap::from([
            ("vhost_to_guest_notifications".into(), 7),
            ("vhost_from_guest_kicks".into(), 3),
        ]),
        ..PortCounters::default()
    };
    let text = human(
        &Request::SwitchList {},
        &Response::Port {
            port: tap_port(),
            counters,
        },
    );
    assert!(
        text.ends_with(
            "drops: none\n\
             device\n\
             \x20 vhost_from_guest_kicks        3\n\
             \x20 vhost_to_guest_notifications  7\n"
        ),
        "{text}"
    );
}

#[test]
fn port_show_lists_counters_and_drops_by_reason() {
    let counters = PortCounters {
        rx_packets: 10,
        rx_bytes: 1000,
        tx_packets: 5,
        tx_bytes: 500,
        drops: BTreeMap::from([("fdb_full".into(), 2), ("too_big".into(), 1)]),
        device: BTreeMap::new(),
    };
    let text = human(
        &Request::SwitchList {},
        &Response::Port {
            port: tap_port(),
            counters,
        },
    );
    assert_eq!(
        text,
        "port br0:vm1\n\
         \x20 type                   tap, ifname vm1, netns blue, 2 queues, device mtu 9000, kernel offloads on\n\
         \x20 state                  up\n\
         \x20 vlan                   access 10\n\
         \x20 learning               no\n\
         \x20 flood unknown unicast  yes\n\
         \x20 mtu                    9000\n\
         \x20 offloads               csum,tso4\n\
         counters\n\
         \x20     PACKETS  BYTES\n\
         \x20 rx       10   1000\n\
         \x20 tx        5    500\n\
         drops\n\
         \x20 fdb_full  2\n\
         \x20 too_big   1\n"
    );
}

#[test]
fn fdb_entries_show_type_and_age() {
    let text = human(
        &Request::SwitchList {},
        &Response::Fdb {
            entries: vec![
                FdbEntry {
                    vlan: 0,
                    mac: "52:54:00:00:00:01".into(),
                    port: "vm1".into(),
                    is_static: true,
                    age_secs: None,
                },
                FdbEntry {
                    vlan: 10,
                    mac: "52:54:00:00:00:02".into(),
                    port: "vm2".into(),
                    is_static: false,
                    age_secs: Some(12),
                },
            ],
        },
    );
    assert_eq!(
        text,
        "VLAN  MAC                PORT  TYPE     AGE\n\
         \x20  0  52:54:00:00:00:01  vm1   static     -\n\
         \x20 10  52:54:00:00:00:02  vm2   learned  12s\n"
    );
}

#[test]
fn remote_macs_show_their_source_and_age() {
    let entry = |mac: &str, is_static, source: &str, age_secs| RemoteMacEntry {
        mac: mac.into(),
        remote: "192.0.2.2".into(),
        is_static,
        source: source.into(),
        age_secs,
    };
    let text = human(
        &Request::SwitchList {},
        &Response::RemoteMacs {
            entries: vec![
                entry("02:00:00:00:00:01", true, "static", None),
                entry("02:00:00:00:00:02", false, "directory", None),
                entry("02:00:00:00:00:03", false, "learned", Some(7)),
                // From a daemon that predates the source: told by the static flag.
                entry("02:00:00:00:00:04", false, "", Some(3)),
            ],
        },
    );
    assert_eq!(
        text,
        "MAC                REMOTE     SOURCE     AGE\n\
         02:00:00:00:00:01  192.0.2.2  static       -\n\
         02:00:00:00:00:02  192.0.2.2  directory    -\n\
         02:00:00:00:00:03  192.0.2.2  learned     7s\n\
         02:00:00:00:00:04  192.0.2.2  learned     3s\n"
    );
}

#[test]
fn rules_print_in_the_text_syntax_with_counters() {
    let rule = RuleSpec {
        priority: 10,
        matches: MatchSpec {
            in_port: Some("vm1".into()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output("vm2".into())],
        cookie: 0,
    };
    let text = human(
        &Request::SwitchList {},
        &Response::Rules {
            rules: vec![RuleInfo {
                id: 3,
                rule,
                packets: 1234,
                bytes: 99,
            }],
        },
    );
    assert_eq!(
        text,
        "ID  PACKETS  BYTES  RULE\n\
         \x203     1234     99  priority=10,in_port=vm1 actions=output:vm2\n"
    );
}

#[test]
fn stats_show_switch_ports_drops_and_workers() {
    let r = Response::Stats {
        switches: vec![SwitchStats {
            name: "br0".into(),
            batches: 7,
            rx_packets: 100,
            fdb_entries: 2,
            fdb_moves: 0,
            mac_flap_episodes: 0,
            flow_cache_hits: 3,
            flow_cache_misses: 1,
            upcalls: 0,
            ports: vec![PortStats {
                name: "vm1".into(),
                counters: PortCounters {
                    rx_packets: 100,
                    rx_bytes: 6400,
                    tx_packets: 0,
                    tx_bytes: 0,
                    drops: BTreeMap::from([("no_destination".into(), 4)]),
                    device: BTreeMap::new(),
                },
            }],
            lanes: vec![
                LaneStats {
                    lane: 0,
                    worker: 0,
                    rx_packets: 70,
                    posted: 5,
                    lost: 0,
                    applied: 3,
                    stale: 0,
                },
                LaneStats {
                    lane: 1,
                    worker: 1,
                    rx_packets: 30,
                    posted: 3,
                    lost: 1,
                    applied: 5,
                    stale: 2,
                },
            ],
        }],
        workers: vec![WorkerStats {
            id: 0,
            cpu: Some(1),
            busy_fraction: 0.125,
            batches: 7,
            switches: vec!["br0".into()],
        }],
    };
    assert_eq!(
        human(&Request::Stats { switch: None }, &r),
        "switch br0: 7 batches, 100 rx packets, 2 FDB entries, flow cache 75.0% hits (3 hits, \
         1 misses), 0 upcalls\n\
         \x20 lane 0 (worker 0): 70 rx packets; learned entries posted 5, lost 0; taken in 3, \
         stale 0\n\
         \x20 lane 1 (worker 1): 30 rx packets; learned entries posted 3, lost 1; taken in 5, \
         stale 2\n\
         \x20 PORT  RX-PKTS  RX-BYTES  TX-PKTS  TX-BYTES  DROPS\n\
         \x20 vm1       100      6400        0         0  4 (no_destination=4)\n\
         workers\n\
         \x20 WORKER  CPU   BUSY  BATCHES  SWITCHES\n\
         \x20      0    1  12.5%        7  br0\n"
    );
}

#[test]
fn drops_summary_adds_up_reasons() {
    assert_eq!(drops_summary(&BTreeMap::new()), "0");
    let d = BTreeMap::from([
        ("a".to_string(), 1),
        ("b".to_string(), 0),
        ("c".to_string(), 2),
    ]);
    assert_eq!(drops_summary(&d), "3 (a=1,c=2)");
}

#[test]
fn config_apply_dry_run_says_nothing_was_applied() {
    let changes = Response::Applied {
        changes: vec!["add switch br1".into()],
    };
    let dry = Request::ConfigApply {
        state: State::default(),
        dry_run: true,
    };
    let real = Request::ConfigApply {
        state: State::default(),
        dry_run: false,
    };
    assert_eq!(
        human(&dry, &changes),
        "dry run: these changes would be made (nothing was applied):\n  add switch br1\n"
    );
    assert_eq!(human(&real, &changes), "add switch br1\n");
    assert_eq!(
        human(&real, &Response::Applied { changes: vec![] }),
        "no changes\n"
    );
}

#[test]
fn config_show_is_the_state_as_json() {
    let text = human(
        &Request::ConfigShow {},
        &Response::Config {
            state: State::default(),
        },
    );
    let back: State = serde_json::from_str(&text).unwrap();
    assert_eq!(back, State::default());
}

#[test]
fn json_output_is_the_response_object() {
    let text = crate::output::json(&Response::RuleAdded { id: 5 });
    assert_eq!(text, "{\n  \"kind\": \"rule_added\",\n  \"id\": 5\n}\n");
    assert_eq!(kind_name(&Response::Done), "done");
}

/// `port show` of `port`, with no counters, as a person reads it.
fn port_text(port: PortInfo) -> String {
    human(
        &Request::SwitchList {},
        &Response::Port {
            port,
            counters: PortCounters::default(),
        },
    )
}

#[test]
fn port_show_says_why_a_port_failed() {
    let port = PortInfo {
        failed: Some("cannot open /dev/net/tun: Permission denied".into()),
        ..tap_port()
    };
    let text = port_text(port);
    assert!(
        text.contains(
            "  state                  failed: cannot open /dev/net/tun: Permission denied\n"
        ),
        "{text}"
    );
}

#[test]
fn port_show_gives_the_guests_mtu_and_warns_of_an_overlay_too_small() {
    let port = PortInfo {
        guest_mtu: Some(9000),
        warnings: vec!["MTU 9000 is larger than overlay port vx carries (1450)".into()],
        ..tap_port()
    };
    let text = port_text(port);
    assert!(text.contains("  guest mtu              9000\n"), "{text}");
    assert!(
        text.contains("  warning                MTU 9000 is larger than overlay port vx"),
        "{text}"
    );
}

#[test]
fn port_show_says_when_a_port_was_taken_over() {
    let port = PortInfo {
        attached: Some("taken over from weftd 0.1.0 (pid 812) 4 s ago".into()),
        ..tap_port()
    };
    let text = port_text(port);
    assert!(
        text.contains("  attached               taken over from weftd 0.1.0 (pid 812) 4 s ago\n"),
        "{text}"
    );
    assert!(!human(
        &Request::SwitchList {},
        &Response::Port {
            port: tap_port(),
            counters: PortCounters::default(),
        },
    )
    .contains("attached"));
}

fn policed_port() -> PortInfo {
    use weft_control::state::{
        MacLimitAction, MacLimitSettings, PortSecuritySettings, RateSettings, StormSettings,
    };
    let mut port = tap_port();
    port.options.security = PortSecuritySettings {
        allowed_macs: vec!["52:54:00:00:00:01".parse().unwrap()],
        allowed_ips: vec![
            "10.0.0.5".parse().unwrap(),
            "2001:db8::/64".parse().unwrap(),
        ],
        allow_dhcp_server: false,
        allow_router_advertisements: true,
    };
    port.options.storm = StormSettings {
        broadcast: Some(RateSettings {
            pps: Some(1000),
            bps: None,
        }),
        multicast: None,
        unknown_unicast: Some(RateSettings {
            pps: Some(500),
            bps: Some(10_000_000),
        }),
        burst_ms: 100,
    };
    port.options.mac_limit = Some(MacLimitSettings {
        max: 4,
        action: MacLimitAction::Drop,
    });
    port
}

#[test]
fn port_show_lists_the_policy_that_is_on_and_its_drops() {
    let counters = PortCounters {
        rx_packets: 10,
        rx_bytes: 1000,
        tx_packets: 5,
        tx_bytes: 500,
        drops: BTreeMap::from([
            ("spoofed_src_ip".into(), 3),
            ("storm_broadcast".into(), 7),
            ("mac_limit".into(), 1),
        ]),
        device: BTreeMap::new(),
    };
    let text = human(
        &Request::SwitchList {},
        &Response::Port {
            port: policed_port(),
            counters,
        },
    );
    assert_eq!(
        text,
        "port br0:vm1\n\
         \x20 type                   tap, ifname vm1, netns blue, 2 queues, device mtu 9000, kernel offloads on\n\
         \x20 state                  up\n\
         \x20 vlan                   access 10\n\
         \x20 learning               no\n\
         \x20 flood unknown unicast  yes\n\
         \x20 mtu                    9000\n\
         \x20 offloads               csum,tso4\n\
         \x20 allowed macs           52:54:00:00:00:01\n\
         \x20 allowed ips            10.0.0.5, 2001:db8::/64\n\
         \x20 dhcp server            dropped\n\
         \x20 router advertisements  allowed\n\
         \x20 storm control          broadcast 1000pps, unknown unicast 500pps,10mbit, burst 100 ms\n\
         \x20 mac limit              4, then drop\n\
         counters\n\
         \x20     PACKETS  BYTES\n\
         \x20 rx       10   1000\n\
         \x20 tx        5    500\n\
         drops\n\
         \x20 mac_limit        1\n\
         \x20 spoofed_src_ip   3\n\
         \x20 storm_broadcast  7\n"
    );
}

#[test]
fn port_show_without_a_policy_shows_no_policy_rows() {
    let mut port = tap_port();
    // Flags alone do not turn port security on; a burst alone limits nothing.
    port.options.security.allow_dhcp_server = true;
    port.options.storm.burst_ms = 50;
    let text = port_text(port);
    for row in ["allowed", "dhcp", "storm", "mac limit"] {
        assert!(!text.contains(row), "{row} in {text}");
    }
}

#[test]
fn port_show_json_carries_the_policy_settings() {
    let text = json(&Response::Port {
        port: policed_port(),
        counters: PortCounters::default(),
    });
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let options = &v["port"]["options"];
    assert_eq!(
        options["security"]["allowed_ips"],
        serde_json::json!(["10.0.0.5", "2001:db8::/64"])
    );
    assert_eq!(options["storm"]["broadcast"]["pps"], 1000);
    assert_eq!(options["mac_limit"]["action"], "drop");
    let plain = json(&Response::Port {
        port: tap_port(),
        counters: PortCounters::default(),
    });
    for key in ["security", "storm", "mac_limit"] {
        assert!(!plain.contains(key), "{key} in {plain}");
    }
}
