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
            create_switch: true,
            switch: "br0".into(),
            name: "t1".into(),
            kind: PortKind::TcpLink {
                listen: Some("192.0.2.1:7000".parse().unwrap()),
                connect: None,
                netns: None,
                link_id: 0,
                mtu: 1500,
                offloads: true,
                key_file: None,
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
            "--peer",
            "[fd00::1]:7000",
            "--netns",
            "under",
            "--link-id",
            "3",
            "--mtu",
            "9000",
            "--no-offloads",
            "--key-file",
            "/etc/weft/link.key",
        ]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "t1".into(),
            kind: PortKind::TcpLink {
                listen: None,
                connect: Some("[fd00::1]:7000".parse().unwrap()),
                netns: Some("under".into()),
                link_id: 3,
                mtu: 9000,
                offloads: false,
                key_file: Some("/etc/weft/link.key".into()),
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
            "--peer",
            "10.0.0.1:1"
        ]),
        ArgumentConflict
    );
}

#[test]
fn a_tcp_link_peer_is_not_taken_for_weftds_tcp_listener() {
    // The global `--connect` names weftd's control listener; a tcp-link's peer must not set
    // it (it did when both were clap id `connect`: `weft` then asked for --token-file).
    let cli = parse(&[
        "port",
        "add",
        "br0:t1",
        "tcp-link",
        "--peer",
        "10.0.0.1:7000",
    ]);
    assert_eq!(cli.global.connect, None);
}

#[test]
fn tcp_link_key_file_is_sent_as_an_absolute_path() {
    let Request::PortAdd {
        kind: PortKind::TcpLink { key_file, .. },
        ..
    } = request(&[
        "port",
        "add",
        "b:t",
        "tcp-link",
        "--listen",
        "192.0.2.1:7000",
        "--key-file",
        "k.key",
    ])
    else {
        panic!("not a tcp link")
    };
    let expected = std::env::current_dir().unwrap().join("k.key");
    assert_eq!(key_file, Some(expected.display().to_string()));
}
