//! `weft port add ... vhost-user` and `... vxlan` to their requests.

use weft_control::state::RemoteMac;

use super::*;
use weft_control::state::VhostMode;

#[test]
fn vhost_user_takes_the_default_socket_and_mtu_unless_given() {
    assert_eq!(
        request(&["port", "add", "br0:vm1", "vhost-user"]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vm1".into(),
            kind: PortKind::VhostUser {
                socket: None,
                mode: VhostMode::Server,
                mtu: 1500,
                dispatch: None,
                notify: None,
                queues: 1,
            },
            options: PortSettings::default(),
        }
    );
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:vm1",
            "vhost-user",
            "--vhost-socket",
            "/run/weft/vm1.sock",
            "--mtu",
            "9000",
            "--access",
            "10",
        ]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vm1".into(),
            kind: PortKind::VhostUser {
                socket: Some("/run/weft/vm1.sock".into()),
                mode: VhostMode::Server,
                mtu: 9000,
                dispatch: None,
                notify: None,
                queues: 1,
            },
            options: PortSettings {
                vlan: VlanMode::Access { vlan: 10 },
                ..PortSettings::default()
            },
        }
    );
}

#[test]
fn vhost_user_client_mode_is_asked_for_with_vhost_mode() {
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:vm2",
            "vhost-user",
            "--vhost-mode",
            "client",
            "--vhost-socket",
            "/run/qemu/vm2.sock",
        ]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vm2".into(),
            kind: PortKind::VhostUser {
                socket: Some("/run/qemu/vm2.sock".into()),
                mode: VhostMode::Client,
                mtu: 1500,
                dispatch: None,
                notify: None,
                queues: 1,
            },
            options: PortSettings::default(),
        }
    );
}

#[test]
fn vhost_user_queue_pairs_are_asked_for_with_queues() {
    let Request::PortAdd { kind, .. } =
        request(&["port", "add", "br0:vm3", "vhost-user", "--queues", "4"])
    else {
        panic!("not a port add")
    };
    assert!(
        matches!(kind, PortKind::VhostUser { queues: 4, .. }),
        "{kind:?}"
    );
}

#[test]
fn vxlan_takes_every_remote_and_its_endpoint_options() {
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:vx",
            "vxlan",
            "--local",
            "192.0.2.1",
            "--vni",
            "42",
            "--remote",
            "192.0.2.2",
            "--remote",
            "192.0.2.3",
            "--netns",
            "under",
            "--remote-learning",
            "--udp-port",
            "8472",
            "--remote-mac",
            "52:54:00:00:00:0A=192.0.2.3",
            "--remote-ageing",
            "30",
            "--no-learning",
        ]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vx".into(),
            kind: PortKind::Vxlan {
                local: "192.0.2.1".parse().unwrap(),
                vni: weft_control::Vni::new(42).unwrap(),
                remotes: vec!["192.0.2.2".parse().unwrap(), "192.0.2.3".parse().unwrap()],
                netns: Some("under".into()),
                learning: true,
                port: Some(8472),
                remote_macs: vec![RemoteMac {
                    mac: "52:54:00:00:00:0a".parse().unwrap(),
                    remote: "192.0.2.3".parse().unwrap(),
                }],
                remote_ageing: 30,
                directory: false,
            },
            options: PortSettings {
                learning: false,
                ..PortSettings::default()
            },
        }
    );
    assert_eq!(
        request(&["port", "add", "br0:vx", "vxlan", "--local", "fd00::1", "--vni", "7"]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vx".into(),
            kind: PortKind::Vxlan {
                local: "fd00::1".parse().unwrap(),
                vni: weft_control::Vni::new(7).unwrap(),
                remotes: Vec::new(),
                netns: None,
                learning: false,
                port: None,
                remote_macs: Vec::new(),
                remote_ageing: 300,
                directory: false,
            },
            options: PortSettings::default(),
        }
    );
}

#[test]
fn vxlan_needs_its_local_endpoint_and_vni() {
    use clap::error::ErrorKind::{MissingRequiredArgument, ValueValidation};
    assert_eq!(
        usage_error(&["port", "add", "b:p", "vxlan", "--vni", "1"]),
        MissingRequiredArgument
    );
    assert_eq!(
        usage_error(&["port", "add", "b:p", "vxlan", "--local", "10.0.0.1"]),
        MissingRequiredArgument
    );
    assert_eq!(
        usage_error(&["port", "add", "b:p", "vxlan", "--local", "10.0.0.1", "--vni", "x"]),
        ValueValidation
    );
    assert_eq!(
        usage_error(&["port", "add", "b:p", "vhost-user", "--mtu", "big"]),
        ValueValidation
    );
}

#[test]
fn vhost_user_takes_a_dispatch_mode_and_a_notification_policy() {
    use weft_control::state::{VhostDispatch, VhostNotify};
    let Request::PortAdd { kind, .. } = request(&[
        "port",
        "add",
        "br0:vm1",
        "vhost-user",
        "--dispatch",
        "adaptive",
        "--notify",
        "optimistic",
    ]) else {
        panic!("not a port_add")
    };
    let PortKind::VhostUser {
        dispatch, notify, ..
    } = kind
    else {
        panic!("not vhost-user")
    };
    assert_eq!(
        dispatch,
        Some(VhostDispatch::Adaptive {
            low_pps: 1_000,
            high_pps: 10_000,
            window_us: 5_000
        })
    );
    assert_eq!(notify, Some(VhostNotify::Optimistic));
    let Request::PortAdd { kind, .. } = request(&[
        "port",
        "add",
        "br0:vm1",
        "vhost-user",
        "--dispatch",
        "switch-driven",
        "--notify",
        "coalesced:16,100",
    ]) else {
        panic!("not a port_add")
    };
    assert!(matches!(
        kind,
        PortKind::VhostUser {
            dispatch: Some(VhostDispatch::SwitchDriven),
            notify: Some(VhostNotify::Coalesced {
                frames: 16,
                max_delay_us: 100
            }),
            ..
        }
    ));
}

#[test]
fn vxlan_remote_ageing_outside_one_second_to_a_day_is_a_usage_error() {
    for secs in ["0", "86401", "soon"] {
        let args = [
            "port",
            "add",
            "b:vx",
            "vxlan",
            "--local",
            "192.0.2.1",
            "--vni",
            "1",
            "--remote-ageing",
            secs,
        ];
        assert_eq!(
            usage_error(&args),
            clap::error::ErrorKind::ValueValidation,
            "{secs}"
        );
    }
}

/// The message clap prints for `args`, which must not parse.
fn refusal(args: &[&str]) -> String {
    let mut argv = vec!["weft"];
    argv.extend_from_slice(args);
    let e = Cli::try_parse_from(argv).unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{e}");
    e.to_string()
}

#[test]
fn addresses_and_vnis_that_are_not_are_refused_before_a_request_is_sent() {
    for (args, says) in [
        (
            &[
                "port", "add", "br0:vx", "vxlan", "--local", "192.0.2", "--vni", "1",
            ][..],
            "'192.0.2' is not an IP address: write an IPv4 or IPv6 address",
        ),
        (
            &[
                "port",
                "add",
                "br0:vx",
                "vxlan",
                "--local",
                "192.0.2.1",
                "--vni",
                "1",
                "--remote",
                "peer",
            ],
            "'peer' is not an IP address",
        ),
        (
            &[
                "port",
                "add",
                "br0:vx",
                "vxlan",
                "--local",
                "192.0.2.1",
                "--vni",
                "16777216",
            ],
            "'16777216' is not a VNI: write a number from 0 to 16777215",
        ),
        (
            &["port", "add", "br0:t", "tcp-link", "--listen", "192.0.2.1"],
            "'192.0.2.1' is not IP:PORT: write an address and a port, e.g. 192.0.2.1:7000",
        ),
        (
            &["port", "add", "br0:t", "tcp-link", "--peer", "peer:7000"],
            "'peer:7000' is not IP:PORT",
        ),
        (
            &[
                "remote-mac",
                "add",
                "br0:vx",
                "52:54:00:00:00:02",
                "192.0.2.300",
            ],
            "'192.0.2.300' is not an IP address",
        ),
        (
            &["fdb", "add", "br0", "52-54-00-00-00-01", "vm1"],
            "'52-54-00-00-00-01' is not a MAC address: write six hex pairs",
        ),
    ] {
        let message = refusal(args);
        assert!(message.contains(says), "{args:?}: {message}");
    }
}

#[test]
fn typed_arguments_reach_the_request_in_the_protocol_s_text_form() {
    let Request::PortAdd { kind, .. } = request(&[
        "port",
        "add",
        "br0:vx",
        "vxlan",
        "--local",
        "2001:DB8::1",
        "--vni",
        "42",
        "--remote",
        "2001:db8:0::2",
        "--remote-mac",
        "52:54:00:AB:00:02=2001:db8::2",
    ]) else {
        panic!("not a port_add")
    };
    assert_eq!(
        serde_json::to_string(&kind).unwrap(),
        r#"{"type":"vxlan","local":"2001:db8::1","vni":42,"remotes":["2001:db8::2"],"learning":false,"remote_macs":[{"mac":"52:54:00:ab:00:02","remote":"2001:db8::2"}]}"#
    );
}

#[test]
fn memif_takes_its_socket_id_role_secret_and_queues() {
    let Request::PortAdd { kind, .. } = request(&[
        "port",
        "add",
        "br0:m1",
        "memif",
        "--memif-socket",
        "/run/vpp/memif.sock",
        "--id",
        "4",
        "--role",
        "client",
        "--secret",
        "s3cret",
        "--queues",
        "2",
    ]) else {
        panic!("not a port add")
    };
    assert_eq!(
        kind,
        PortKind::Memif {
            socket: Some("/run/vpp/memif.sock".into()),
            id: 4,
            role: weft_control::state::VhostMode::Client,
            secret: Some("s3cret".into()),
            queues: 2,
            mtu: 1500,
        }
    );
}
