//! `weft port add ... tcp-link` to its request.

use super::*;

#[test]
fn tcp_link_listens_or_connects_with_its_options() {
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:t1",
            "tcp-link",
            "--listen",
            "192.0.2.1:7000"
        ]),
        Request::PortAdd {
            switch: "br0".into(),
            name: "t1".into(),
            kind: PortKind::TcpLink {
                listen: Some("192.0.2.1:7000".into()),
                connect: None,
                netns: None,
                link_id: 0,
                mtu: 1500,
                offloads: true,
            },
            options: PortSettings::default(),
        }
    );
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:t1",
            "tcp-link",
            "--connect",
            "[fd00::1]:7000",
            "--netns",
            "under",
            "--link-id",
            "3",
            "--mtu",
            "9000",
            "--no-offloads",
        ]),
        Request::PortAdd {
            switch: "br0".into(),
            name: "t1".into(),
            kind: PortKind::TcpLink {
                listen: None,
                connect: Some("[fd00::1]:7000".into()),
                netns: Some("under".into()),
                link_id: 3,
                mtu: 9000,
                offloads: false,
            },
            options: PortSettings::default(),
        }
    );
}

#[test]
fn tcp_link_needs_exactly_one_of_listen_and_connect() {
    use clap::error::ErrorKind::{ArgumentConflict, MissingRequiredArgument};
    assert_eq!(
        usage_error(&["port", "add", "b:p", "tcp-link"]),
        MissingRequiredArgument
    );
    assert_eq!(
        usage_error(&[
            "port",
            "add",
            "b:p",
            "tcp-link",
            "--listen",
            "0.0.0.0:1",
            "--connect",
            "10.0.0.1:1"
        ]),
        ArgumentConflict
    );
}
