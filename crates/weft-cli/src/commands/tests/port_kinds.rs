//! `weft port add ... vhost-user` and `... vxlan` to their requests.

use weft_control::state::RemoteMac;

use super::*;
use weft_control::state::VhostMode;

#[test]
fn vhost_user_takes_the_default_socket_and_mtu_unless_given() {
    assert_eq!(
        request(&["port", "add", "br0:vm1", "vhost-user"]),
        Request::PortAdd {
            switch: "br0".into(),
            name: "vm1".into(),
            kind: PortKind::VhostUser {
                socket: None,
                mode: VhostMode::Server,
                mtu: 1500
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
            switch: "br0".into(),
            name: "vm1".into(),
            kind: PortKind::VhostUser {
                socket: Some("/run/weft/vm1.sock".into()),
                mode: VhostMode::Server,
                mtu: 9000
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
            switch: "br0".into(),
            name: "vm2".into(),
            kind: PortKind::VhostUser {
                socket: Some("/run/qemu/vm2.sock".into()),
                mode: VhostMode::Client,
                mtu: 1500
            },
            options: PortSettings::default(),
        }
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
            "--no-learning",
        ]),
        Request::PortAdd {
            switch: "br0".into(),
            name: "vx".into(),
            kind: PortKind::Vxlan {
                local: "192.0.2.1".into(),
                vni: 42,
                remotes: vec!["192.0.2.2".into(), "192.0.2.3".into()],
                netns: Some("under".into()),
                learning: true,
                port: Some(8472),
                remote_macs: vec![RemoteMac {
                    mac: "52:54:00:00:00:0a".into(),
                    remote: "192.0.2.3".into(),
                }],
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
            switch: "br0".into(),
            name: "vx".into(),
            kind: PortKind::Vxlan {
                local: "fd00::1".into(),
                vni: 7,
                remotes: Vec::new(),
                netns: None,
                learning: false,
                port: None,
                remote_macs: Vec::new(),
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
