//! The port policy options of `weft port add` / `weft port set` (port security, storm
//! control, MAC limit) and `weft switch add`'s MAC flap dampening, to settings.

use weft_control::state::{
    MacLimitAction, MacLimitSettings, PortSecuritySettings, RateSettings, StormSettings,
};

use super::*;

/// The options `weft port add br0:vm1 tap ARGS...` asks for.
fn added(args: &[&str]) -> PortSettings {
    let mut argv = vec!["port", "add", "br0:vm1", "tap"];
    argv.extend_from_slice(args);
    match request(&argv) {
        Request::PortAdd { options, .. } => options,
        other => panic!("{other:?}"),
    }
}

/// `current` as `weft port set br0:vm1 ARGS...` leaves it.
fn set(current: PortSettings, args: &[&str]) -> Result<PortSettings, CliError> {
    let mut argv = vec!["port", "set", "br0:vm1"];
    argv.extend_from_slice(args);
    let Plan::PortSet { changes, .. } = plan(&parse(&argv).command).unwrap() else {
        panic!("not a port set")
    };
    updated_settings(current, &changes)
}

fn rate(pps: Option<u64>, bps: Option<u64>) -> Option<RateSettings> {
    Some(RateSettings { pps, bps })
}

fn mac(s: &str) -> weft_control::MacAddr {
    s.parse().unwrap()
}

fn everything() -> PortSettings {
    PortSettings {
        security: PortSecuritySettings {
            allowed_macs: vec![mac("52:54:00:00:00:01"), mac("52:54:00:00:00:02")],
            allowed_ips: vec![
                "10.0.0.5".parse().unwrap(),
                "2001:db8::/64".parse().unwrap(),
            ],
            allow_dhcp_server: true,
            allow_router_advertisements: true,
        },
        storm: StormSettings {
            broadcast: rate(Some(1000), None),
            multicast: rate(None, Some(10_000_000)),
            unknown_unicast: rate(Some(500), Some(2_000_000_000)),
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
fn port_add_takes_every_policy_option() {
    assert_eq!(
        added(&[
            "--allowed-mac",
            "52:54:00:00:00:01",
            "--allowed-mac",
            "52:54:00:00:00:02",
            "--allowed-ip",
            "10.0.0.5,2001:db8::/64",
            "--allow-dhcp-server",
            "--allow-ra",
            "--storm-broadcast",
            "1000pps",
            "--storm-multicast",
            "10mbit",
            "--storm-unknown-unicast",
            "500pps,2gbit",
            "--storm-burst-ms",
            "250",
            "--mac-limit",
            "4",
            "--mac-limit-action",
            "drop",
        ]),
        everything()
    );
}

#[test]
fn port_add_without_policy_options_asks_for_none() {
    assert_eq!(added(&[]), PortSettings::default());
}

#[test]
fn a_mac_limit_alone_forwards_without_learning_beyond_it() {
    assert_eq!(
        added(&["--mac-limit", "8"]).mac_limit,
        Some(MacLimitSettings {
            max: 8,
            action: MacLimitAction::NoLearn
        })
    );
}

#[test]
fn port_set_changes_only_the_policy_options_it_names() {
    let s = set(everything(), &["--storm-multicast", "off"]).unwrap();
    assert_eq!(
        s,
        PortSettings {
            storm: StormSettings {
                multicast: None,
                ..everything().storm
            },
            ..everything()
        }
    );
    let s = set(everything(), &["--allowed-ip", "192.0.2.0/24"]).unwrap();
    assert_eq!(
        s.security.allowed_ips,
        vec!["192.0.2.0/24".parse().unwrap()]
    );
    assert_eq!(s.security.allowed_macs, everything().security.allowed_macs);
    let s = set(everything(), &["--no-allow-ra", "--mac-limit", "9"]).unwrap();
    assert!(!s.security.allow_router_advertisements);
    assert!(s.security.allow_dhcp_server);
    assert_eq!(
        s.mac_limit,
        Some(MacLimitSettings {
            max: 9,
            action: MacLimitAction::Drop
        }),
        "the action stays"
    );
    let s = set(everything(), &["--mac-limit-action", "no-learn"]).unwrap();
    assert_eq!(s.mac_limit.unwrap().max, 4, "the count stays");
    assert_eq!(s.mac_limit.unwrap().action, MacLimitAction::NoLearn);
    let s = set(everything(), &["--access", "10"]).unwrap();
    assert_eq!(
        s,
        PortSettings {
            vlan: VlanMode::Access { vlan: 10 },
            ..everything()
        }
    );
}

#[test]
fn the_no_options_turn_each_policy_off() {
    let s = set(
        everything(),
        &["--no-port-security", "--no-storm-control", "--no-mac-limit"],
    )
    .unwrap();
    assert_eq!(s, PortSettings::default());
    let s = set(everything(), &["--no-storm-control"]).unwrap();
    assert_eq!(s.storm, StormSettings::default());
    assert_eq!(s.security, everything().security);
}

#[test]
fn a_mac_limit_action_without_a_limit_is_a_usage_error() {
    let e = set(PortSettings::default(), &["--mac-limit-action", "drop"]).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::USAGE);
    let mut argv = vec!["weft", "port", "add", "br0:vm1", "tap"];
    argv.extend(["--mac-limit-action", "drop"]);
    let e = plan(&Cli::try_parse_from(argv).unwrap().command).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::USAGE);
}

#[test]
fn bad_policy_values_are_usage_errors_that_say_the_accepted_forms() {
    for (args, expected) in [
        (&["--storm-broadcast", "10mb"][..], "1000pps,10mbit"),
        (&["--storm-multicast", "0pps"][..], "off removes the limit"),
        (&["--storm-unknown-unicast", "fast"][..], "2gbit"),
        (&["--allowed-ip", "10.0.0.0/33"][..], "10.0.0.0/24"),
        (&["--allowed-mac", "52:54:00:00:00"][..], "six hex pairs"),
        (&["--mac-limit", "many"][..], "--mac-limit <N>"),
        (&["--mac-limit-action", "shutdown"][..], "no-learn"),
    ] {
        let mut argv = vec!["weft", "port", "set", "br0:vm1"];
        argv.extend_from_slice(args);
        let e = Cli::try_parse_from(argv).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                clap::error::ErrorKind::ValueValidation | clap::error::ErrorKind::InvalidValue
            ),
            "{args:?}: {:?}",
            e.kind()
        );
        let text = e.to_string();
        assert!(text.contains(expected), "{args:?}: {text}");
    }
}

#[test]
fn clearing_and_setting_one_policy_at_once_conflict() {
    for args in [
        &["--no-port-security", "--allowed-mac", "52:54:00:00:00:01"][..],
        &["--no-storm-control", "--storm-broadcast", "1000pps"][..],
        &["--no-mac-limit", "--mac-limit", "2"][..],
        &["--allow-ra", "--no-allow-ra"][..],
    ] {
        let mut argv = vec!["port", "set", "br0:vm1"];
        argv.extend_from_slice(args);
        assert_eq!(
            usage_error(&argv),
            clap::error::ErrorKind::ArgumentConflict,
            "{args:?}"
        );
    }
}

#[test]
fn nothing_to_change_lists_the_policy_options() {
    let e = plan(&parse(&["port", "set", "br0:vm1"]).command).unwrap_err();
    let CliError::Usage { hint, .. } = e else {
        panic!("{e:?}")
    };
    let hint = hint.unwrap();
    for flag in [
        "--allowed-mac",
        "--allowed-ip",
        "--[no-]allow-dhcp-server",
        "--[no-]allow-ra",
        "--no-port-security",
        "--storm-broadcast",
        "--storm-burst-ms",
        "--no-storm-control",
        "--mac-limit N",
        "--mac-limit-action",
        "--no-mac-limit",
    ] {
        assert!(hint.contains(flag), "{flag} missing from {hint}");
    }
}

#[test]
fn switch_add_takes_mac_flap_dampening() {
    assert_eq!(
        request(&[
            "switch",
            "add",
            "br1",
            "--mac-move-limit",
            "5",
            "--mac-move-hold",
            "30"
        ]),
        Request::SwitchAdd {
            name: "br1".into(),
            settings: SwitchSettings {
                mac_move_limit: 5,
                mac_move_hold_secs: 30,
                ..SwitchSettings::default()
            },
        }
    );
    let Request::SwitchAdd { settings, .. } = request(&["switch", "add", "br1"]) else {
        panic!()
    };
    assert_eq!(
        (settings.mac_move_limit, settings.mac_move_hold_secs),
        (0, 10)
    );
}

#[test]
fn port_help_documents_the_policy_options() {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    for path in [&["port", "set"][..], &["port", "add", "tap"][..]] {
        let mut sub = &mut cmd;
        for name in path {
            sub = sub.find_subcommand_mut(name).unwrap();
        }
        let help = sub.render_long_help().to_string();
        for flag in [
            "--allowed-mac <MAC[,MAC...]>",
            "--allowed-ip <PREFIX[,PREFIX...]>",
            "--allow-dhcp-server",
            "--no-allow-ra",
            "--no-port-security",
            "--storm-broadcast <RATE>",
            "--storm-unknown-unicast <RATE>",
            "--storm-burst-ms <MS>",
            "--no-storm-control",
            "--mac-limit <N>",
            "--mac-limit-action <ACTION>",
            "--no-mac-limit",
        ] {
            assert!(help.contains(flag), "{path:?}: {flag} missing");
        }
    }
}
