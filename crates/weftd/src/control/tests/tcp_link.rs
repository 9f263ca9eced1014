//! TCP link ports through the control plane: a listening and a connecting port find each
//! other and say so in `port show`; bad settings are refused as `invalid`, naming the field.

use super::port_kinds::add;
use super::*;

fn tcp_link(listen: Option<&str>, connect: Option<&str>) -> PortKind {
    PortKind::TcpLink {
        listen: listen.map(String::from),
        connect: connect.map(String::from),
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

#[test]
fn tcp_links_connect_and_port_show_counts_a_peer_wired_to_another_link() {
    let mut f = fixture(vec![switch("br0", &[])]);
    // A free port on loopback, released just before the link binds it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
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
    for (kind, field) in [
        (tcp_link(None, None), "listen"),
        (tcp_link(Some("127.0.0.1:1"), Some("127.0.0.1:2")), "listen"),
        (tcp_link(Some("127.0.0.1"), None), "listen"),
        (tcp_link(None, Some("nowhere:80")), "connect"),
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
