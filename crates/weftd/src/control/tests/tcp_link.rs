//! TCP link ports through the control plane: a listening and a connecting port find each
//! other and say so in `port show`; bad settings are refused as `invalid`, naming the field.

use super::port_kinds::add;
use super::*;

fn tcp_link(listen: Option<&str>, connect: Option<&str>) -> PortKind {
    PortKind::TcpLink {
        listen: listen.map(|a| a.parse().unwrap()),
        connect: connect.map(|a| a.parse().unwrap()),
        netns: None,
        link_id: 9,
        mtu: 1500,
        offloads: true,
        key_file: None,
    }
}

fn show(f: &mut Fixture, name: &str) -> weft_control::response::PortInfo {
    let Response::Port { port, .. } = f.ok(Request::PortShow {
        switch: "br0".into(),
        name: name.into(),
    }) else {
        panic!("not a port")
    };
    port
}

/// A free TCP port on loopback, released just before a link binds it.
fn free_loopback_address() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

#[test]
fn tcp_links_connect_and_port_show_counts_a_peer_wired_to_another_link() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let addr = free_loopback_address();
    add(&mut f, "l", tcp_link(Some(&addr), None)).unwrap();
    add(&mut f, "c", tcp_link(None, Some(&addr))).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for name in ["l", "c"] {
        loop {
            let port = show(&mut f, name);
            assert!(port.failed.is_none(), "{:?}", port.failed);
            assert!(matches!(port.kind, PortKind::TcpLink { link_id: 9, .. }));
            assert!(
                port.offloads.iter().any(|o| o == "tso4"),
                "{:?}",
                port.offloads
            );
            if port.offloads.iter().any(|o| o == "connected") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: {:?}",
                port.offloads
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    // A peer wired to another link (once the right one is gone, so that it does not
    // reconnect first): the newest connection, then cut off and counted.
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "c".into(),
    });
    let mut header = [0u8; weft_overlay::tcp_link::framing::HEADER_LEN];
    weft_overlay::tcp_link::framing::write_header(&mut header, 8, 60, &Default::default());
    let mut rogue = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut rogue, &header).unwrap();
    std::io::Write::write_all(&mut rogue, &[0u8; 60]).unwrap();
    loop {
        let Response::Port { counters, .. } = f.ok(Request::PortShow {
            switch: "br0".into(),
            name: "l".into(),
        }) else {
            panic!("not a port")
        };
        let wrong = counters.drops.get("port_tcp_wrong_link_id").copied();
        if wrong == Some(1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", counters.drops);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "l".into(),
    });
}

#[test]
fn bad_tcp_link_settings_are_invalid_and_name_the_field() {
    let mut f = fixture(vec![switch("br0", &[])]);
    // An address that is not IP:PORT cannot be built: the request that carries it does
    // not decode (weft-control's text_form tests).
    for (kind, field) in [
        (tcp_link(None, None), "listen"),
        (tcp_link(Some("127.0.0.1:1"), Some("127.0.0.1:2")), "listen"),
        (tcp_link(None, Some("127.0.0.1:0")), "connect"),
    ] {
        let e = add(&mut f, "t", kind).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
        assert!(e.message.contains(field), "{}", e.message);
    }
    assert!(f.saved().switches[0].ports.is_empty());
}

#[test]
fn a_tcp_link_in_a_state_file_takes_defaults_for_what_it_leaves_out() {
    let kind: PortKind =
        serde_json::from_str(r#"{"type":"tcp_link","connect":"192.0.2.1:7000"}"#).unwrap();
    let mut expected = tcp_link(None, Some("192.0.2.1:7000"));
    if let PortKind::TcpLink { link_id, .. } = &mut expected {
        *link_id = 0;
    }
    assert_eq!(kind, expected);
    let text = serde_json::to_string(&kind).unwrap();
    assert!(
        !text.contains("listen") && !text.contains("netns"),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<PortKind>(&text).unwrap(), kind);
}

fn keyed(kind: PortKind, path: &std::path::Path) -> PortKind {
    let mut kind = kind;
    if let PortKind::TcpLink { key_file, .. } = &mut kind {
        *key_file = Some(path.display().to_string());
    }
    kind
}

fn key_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weftd-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn tcp_links_with_one_key_file_connect_and_port_show_counts_a_client_without_it() {
    let dir = key_dir("tcp-key");
    let key = dir.join("link.key");
    std::fs::write(&key, [0x42u8; 32]).unwrap();
    let mut f = fixture(vec![switch("br0", &[])]);
    let addr = free_loopback_address();
    add(&mut f, "l", keyed(tcp_link(Some(&addr), None), &key)).unwrap();
    add(&mut f, "c", keyed(tcp_link(None, Some(&addr)), &key)).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for name in ["l", "c"] {
        while !show(&mut f, name).offloads.iter().any(|o| o == "connected") {
            assert!(std::time::Instant::now() < deadline, "{name} not connected");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let saved = f.saved();
    assert!(
        matches!(&saved.switches[0].ports[0].kind, PortKind::TcpLink { key_file: Some(p), .. } if *p == key.display().to_string())
    );
    // Someone without the key: refused, counted, and the link stays up.
    let mut rogue = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut rogue, b"not a hello").unwrap();
    loop {
        let Response::Port { counters, .. } = f.ok(Request::PortShow {
            switch: "br0".into(),
            name: "l".into(),
        }) else {
            panic!("not a port")
        };
        if counters.drops.get("port_tcp_bad_handshake").copied() == Some(1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", counters.drops);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(show(&mut f, "l").offloads.iter().any(|o| o == "connected"));
    for name in ["c", "l"] {
        f.ok(Request::PortDel {
            switch: "br0".into(),
            name: name.into(),
        });
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_short_or_missing_key_file_is_refused_naming_the_file_and_how_to_make_one() {
    let dir = key_dir("tcp-bad-key");
    let short = dir.join("short.key");
    std::fs::write(&short, b"too short").unwrap();
    let missing = dir.join("missing.key");
    let mut f = fixture(vec![switch("br0", &[])]);
    for path in [&short, &missing] {
        let e = add(
            &mut f,
            "t",
            keyed(tcp_link(Some("127.0.0.1:0"), None), path),
        )
        .unwrap_err();
        assert!(
            e.message.contains(&path.display().to_string()),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("head -c 32 /dev/urandom"),
            "{}",
            e.message
        );
    }
    let e = add(
        &mut f,
        "t",
        keyed(
            tcp_link(Some("127.0.0.1:0"), None),
            std::path::Path::new("rel.key"),
        ),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
    assert!(e.message.contains("absolute"), "{}", e.message);
    assert!(f.saved().switches[0].ports.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A port whose MTU is larger than an overlay port of its switch carries is warned about,
/// in `port show` and in `port list`; the overlay port itself and a port that fits are not.
#[test]
fn a_port_larger_than_the_switchs_overlay_link_is_warned_about() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let addr = free_loopback_address();
    let mut small = tcp_link(Some(&addr), None);
    if let PortKind::TcpLink { mtu, .. } = &mut small {
        *mtu = 1400;
    }
    add(&mut f, "link", small).unwrap();
    add(&mut f, "vm", super::port_kinds::vhost(None)).unwrap();
    let vm = show(&mut f, "vm");
    assert_eq!(vm.warnings.len(), 1, "{:?}", vm.warnings);
    assert!(
        vm.warnings[0].contains("MTU 1500") && vm.warnings[0].contains("port link carries (1400)"),
        "{}",
        vm.warnings[0]
    );
    assert!(show(&mut f, "link").warnings.is_empty());
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!("not a port list")
    };
    let warned: Vec<&str> = ports
        .iter()
        .filter(|p| !p.warnings.is_empty())
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(warned, ["vm"]);
    // Without the overlay port, nothing to warn of.
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "link".into(),
    });
    assert!(show(&mut f, "vm").warnings.is_empty());
}
