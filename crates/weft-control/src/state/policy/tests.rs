use super::*;
use crate::state::{PortSettings, SwitchSettings, VlanMode};
use crate::{decode_request, ErrorKind};

fn full_policy() -> PortSettings {
    PortSettings {
        vlan: VlanMode::Access { vlan: 10 },
        security: PortSecuritySettings {
            allowed_macs: vec!["52:54:00:00:00:01".parse().unwrap()],
            allowed_ips: vec![
                "10.0.0.5/32".parse().unwrap(),
                "2001:db8::/64".parse().unwrap(),
                "192.0.2.1".parse().unwrap(),
            ],
            allow_dhcp_server: true,
            allow_router_advertisements: true,
        },
        storm: StormSettings {
            broadcast: Some(RateSettings {
                pps: Some(1000),
                bps: None,
            }),
            multicast: Some(RateSettings {
                pps: Some(500),
                bps: Some(10_000_000),
            }),
            unknown_unicast: None,
            burst_ms: 250,
        },
        mac_limit: Some(MacLimitSettings {
            max: 4,
            action: MacLimitAction::Drop,
        }),
        ..PortSettings::default()
    }
}

#[test]
fn port_policy_is_written_as_text_and_read_back() {
    let json = serde_json::to_string(&full_policy()).unwrap();
    assert_eq!(
        json,
        r#"{"vlan":{"mode":"access","vlan":10},"flood_unknown_unicast":true,"learning":true,"security":{"allowed_macs":["52:54:00:00:00:01"],"allowed_ips":["10.0.0.5/32","2001:db8::/64","192.0.2.1"],"allow_dhcp_server":true,"allow_router_advertisements":true},"storm":{"broadcast":{"pps":1000},"multicast":{"pps":500,"bps":10000000},"burst_ms":250},"mac_limit":{"max":4,"action":"drop"}}"#
    );
    assert_eq!(
        serde_json::from_str::<PortSettings>(&json).unwrap(),
        full_policy()
    );
}

#[test]
fn port_settings_without_a_policy_are_written_as_before() {
    assert_eq!(
        serde_json::to_string(&PortSettings::default()).unwrap(),
        r#"{"vlan":{"mode":"plain"},"flood_unknown_unicast":true,"learning":true}"#
    );
    // A burst alone is not a default: it is kept, so a rate set later uses it.
    let burst_only = PortSettings {
        storm: StormSettings {
            burst_ms: 50,
            ..StormSettings::default()
        },
        ..PortSettings::default()
    };
    let json = serde_json::to_string(&burst_only).unwrap();
    assert!(json.ends_with(r#""storm":{"burst_ms":50}}"#), "{json}");
}

#[test]
fn old_port_settings_load_with_every_policy_off() {
    let old: PortSettings = serde_json::from_str(
        r#"{"vlan":{"mode":"trunk","vlans":[10,20]},"flood_unknown_unicast":false,"learning":true}"#,
    )
    .unwrap();
    assert!(!old.security.is_enabled());
    assert!(!old.storm.is_enabled());
    assert_eq!(old.storm.burst_ms, DEFAULT_STORM_BURST_MS);
    assert_eq!(old.mac_limit, None);
}

#[test]
fn partial_policies_take_defaults_for_what_they_leave_out() {
    let p: PortSettings = serde_json::from_str(
        r#"{"security":{"allowed_ips":["10.0.0.5"]},"storm":{"unknown_unicast":{"bps":500000}},
            "mac_limit":{"max":2}}"#,
    )
    .unwrap();
    assert!(p.learning && p.flood_unknown_unicast);
    assert!(p.security.allowed_macs.is_empty());
    assert!(!p.security.allow_dhcp_server);
    assert_eq!(p.storm.burst_ms, 100);
    assert_eq!(
        p.storm.unknown_unicast,
        Some(RateSettings {
            pps: None,
            bps: Some(500_000)
        })
    );
    assert_eq!(p.mac_limit.unwrap().action, MacLimitAction::NoLearn);
}

#[test]
fn old_switch_settings_load_with_flap_dampening_off_and_write_back_unchanged() {
    let old = r#"{"batch_size":128,"fdb_max_entries":8192,"fdb_max_per_port":1024,"fdb_ageing_secs":300,"max_rules":4096,"flow_cache_capacity":4096,"lanes":1}"#;
    let s: SwitchSettings = serde_json::from_str(old).unwrap();
    assert_eq!(s, SwitchSettings::default());
    assert_eq!(s.mac_move_limit, 0);
    assert_eq!(s.mac_move_hold_secs, 10);
    assert_eq!(serde_json::to_string(&s).unwrap(), old);
}

#[test]
fn switch_flap_settings_round_trip() {
    let s = SwitchSettings {
        mac_move_limit: 5,
        mac_move_hold_secs: 30,
        ..SwitchSettings::default()
    };
    let json = serde_json::to_string(&s).unwrap();
    assert!(
        json.ends_with(r#""lanes":1,"mac_move_limit":5,"mac_move_hold_secs":30}"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<SwitchSettings>(&json).unwrap(), s);
}

fn port_set(options: &str) -> Result<crate::RequestEnvelope, crate::codec::DecodeError> {
    let line = format!(
        r#"{{"version":1,"id":1,"request":{{"op":"port_set","switch":"br0","name":"p","options":{options}}}}}"#
    );
    decode_request(line.as_bytes())
}

#[test]
fn bad_allowed_addresses_are_refused_naming_the_field() {
    for (options, expected) in [
        (
            r#"{"security":{"allowed_macs":["52:54:00:00:00"]}}"#,
            "allowed_macs: ",
        ),
        (
            r#"{"security":{"allowed_ips":["10.0.0.0/33"]}}"#,
            "allowed_ips: invalid IP prefix \"10.0.0.0/33\"",
        ),
        (
            r#"{"security":{"allowed_ips":["host"]}}"#,
            "allowed_ips: invalid IP prefix \"host\"",
        ),
    ] {
        let e = port_set(options).unwrap_err();
        assert_eq!(e.error.kind, ErrorKind::Invalid, "{}", e.error.message);
        assert!(e.error.message.contains(expected), "{}", e.error.message);
    }
}

#[test]
fn unknown_policy_fields_and_actions_are_bad_requests() {
    for options in [
        r#"{"security":{"allowed_mac":["52:54:00:00:00:01"]}}"#,
        r#"{"storm":{"broadcast":{"pps":1,"kbps":2}}}"#,
        r#"{"storm":{"flood":{"pps":1}}}"#,
        r#"{"mac_limit":{"max":2,"action":"shutdown"}}"#,
        r#"{"mac_limit":{"action":"drop"}}"#,
    ] {
        let e = port_set(options).unwrap_err();
        assert_eq!(e.error.kind, ErrorKind::BadRequest, "{options}");
    }
}

#[test]
fn rates_print_in_the_form_the_cli_takes() {
    let rate = |pps, bps| RateSettings { pps, bps }.to_string();
    assert_eq!(rate(Some(1000), None), "1000pps");
    assert_eq!(rate(None, Some(10_000_000)), "10mbit");
    assert_eq!(rate(None, Some(2_000_000_000)), "2gbit");
    assert_eq!(rate(None, Some(500_000)), "500kbit");
    assert_eq!(rate(None, Some(1500)), "1500bit");
    assert_eq!(rate(Some(1000), Some(10_000_000)), "1000pps,10mbit");
    assert_eq!(rate(None, None), "off");
}
