//! vhost-user and VXLAN ports through the control plane: created, listed with their kind,
//! recreated from the state file, gone with `port_del`; bad settings refused as `invalid`.

use std::os::unix::fs::FileTypeExt;

use super::*;
use weft_control::state::VhostMode;

pub(super) fn vhost(socket: Option<String>) -> PortKind {
    PortKind::VhostUser {
        socket,
        mode: VhostMode::Server,
        mtu: 1500,
        dispatch: None,
        notify: None,
        queues: 1,
    }
}

fn vxlan(local: &str, vni: u32, port: u16) -> PortKind {
    PortKind::Vxlan {
        local: local.parse().unwrap(),
        vni: weft_control::Vni::new(vni).unwrap(),
        remotes: vec!["127.0.0.2".parse().unwrap()],
        netns: None,
        learning: false,
        port: Some(port),
        remote_macs: Vec::new(),
        remote_ageing: 300,
        directory: false,
    }
}

pub(super) fn add(f: &mut Fixture, name: &str, kind: PortKind) -> Result<Response, ControlError> {
    f.req(Request::PortAdd {
        create_switch: true,
        switch: "br0".into(),
        name: name.into(),
        kind,
        options: PortSettings::default(),
    })
}

fn is_socket(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[test]
fn a_vhost_user_port_listens_on_its_default_socket_until_deleted() {
    let mut f = fixture(vec![switch("br0", &[])]);
    add(&mut f, "vm1", vhost(None)).unwrap();
    let path = f.dir.path().join("vhost/br0-vm1.sock");
    assert!(is_socket(&path), "no socket at {}", path.display());

    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!("not a port list")
    };
    assert_eq!(ports.len(), 1);
    assert!(matches!(ports[0].kind, PortKind::VhostUser { .. }));
    assert!(
        ports[0].offloads.iter().any(|o| o == "disconnected"),
        "{:?}",
        ports[0].offloads
    );
    let Response::Port { counters, .. } = f.ok(Request::PortShow {
        switch: "br0".into(),
        name: "vm1".into(),
    }) else {
        panic!("not a port")
    };
    assert!(counters.drops.is_empty(), "{:?}", counters.drops);

    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "vm1".into(),
    });
    assert!(!path.exists(), "the socket outlived its port");
}

#[test]
fn a_client_mode_vhost_user_port_waits_for_the_frontends_socket_and_never_removes_it() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let path = f.dir.path().join("qemu-vm1.sock");
    let kind = PortKind::VhostUser {
        socket: Some(path.to_string_lossy().into_owned()),
        mode: VhostMode::Client,
        mtu: 1500,
        dispatch: None,
        notify: None,
        queues: 1,
    };
    // No frontend yet: the port is created all the same, disconnected, creating nothing.
    add(&mut f, "vm1", kind.clone()).unwrap();
    assert!(!path.exists(), "a client port created a socket");
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!("not a port list")
    };
    assert_eq!(ports[0].kind, kind);
    // The frontend comes up: the port connects within its backoff.
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let _conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("the client port never connected: {e}"),
        }
    };
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "vm1".into(),
    });
    assert!(is_socket(&path), "weft removed the frontend's socket");
}

#[test]
fn a_vhost_user_socket_of_another_port_is_refused() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let socket = f.dir.path().join("vm.sock").to_string_lossy().into_owned();
    add(&mut f, "vm1", vhost(Some(socket.clone()))).unwrap();
    let e = add(&mut f, "vm2", vhost(Some(socket))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists, "{}", e.message);
    assert!(e.message.contains("br0:vm1"), "{}", e.message);
    let default_of_vm3 = f.dir.path().join("vhost/br0-vm3.sock");
    add(
        &mut f,
        "vm4",
        vhost(Some(default_of_vm3.to_string_lossy().into())),
    )
    .unwrap();
    let e = add(&mut f, "vm3", vhost(None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadyExists, "{}", e.message);
}

#[test]
fn a_vhost_user_port_is_recreated_from_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("vm1.sock");
    let mut s = switch("br0", &[]);
    s.ports.push(PortState {
        name: "vm1".into(),
        kind: vhost(Some(socket.to_string_lossy().into_owned())),
        options: PortSettings::default(),
    });
    let (f, failures) = fixture_in(
        dir,
        State {
            version: 1,
            switches: vec![s],
        },
        1,
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert!(is_socket(&socket));
    drop(f);
    assert!(!socket.exists(), "the socket outlived the daemon");
}

#[test]
fn a_restored_port_whose_socket_is_now_refused_is_kept_failed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = switch("br0", &[]);
    for (name, socket) in [
        ("out", "/etc/weft-test-never.sock".to_string()),
        ("ctl", dir.path().join("weftd.sock").display().to_string()),
    ] {
        s.ports.push(PortState {
            name: name.into(),
            kind: vhost(Some(socket)),
            options: PortSettings::default(),
        });
    }
    let (mut f, failures) = fixture_in(
        dir,
        State {
            version: 1,
            switches: vec![s],
        },
        1,
    );
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].reason.contains("vhost_socket_dirs"),
        "{failures:?}"
    );
    assert!(failures[1].reason.contains("weftd's own"), "{failures:?}");
    assert!(!std::path::Path::new("/etc/weft-test-never.sock").exists());
    assert!(!f.dir.path().join("weftd.sock").exists());
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!("not a port list")
    };
    assert!(ports.iter().all(|p| p.failed.is_some()), "{ports:?}");
}

#[test]
fn vhost_user_sockets_that_cannot_be_bound_are_invalid() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let missing = f.dir.path().join("absent/vm1.sock");
    let e = add(&mut f, "vm1", vhost(Some(missing.to_string_lossy().into()))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
    let long = format!("{}/{}.sock", f.dir.path().display(), "x".repeat(100));
    let e = add(&mut f, "vm1", vhost(Some(long))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
    assert!(e.message.contains("socket"), "{}", e.message);
    let e = add(
        &mut f,
        "vm1",
        PortKind::VhostUser {
            socket: None,
            mode: VhostMode::Server,
            mtu: 10,
            dispatch: None,
            notify: None,
            queues: 1,
        },
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("mtu"), "{}", e.message);
}

#[test]
fn bad_vxlan_settings_are_invalid_and_name_the_field() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let too_many = PortKind::Vxlan {
        local: "10.0.0.1".parse().unwrap(),
        vni: weft_control::Vni::new(1).unwrap(),
        remotes: (0..=weft_overlay::MAX_REMOTES)
            .map(|i| format!("10.1.{}.{}", i / 250, i % 250 + 1).parse().unwrap())
            .collect(),
        netns: None,
        learning: false,
        port: None,
        remote_macs: Vec::new(),
        remote_ageing: 300,
        directory: false,
    };
    let mixed = PortKind::Vxlan {
        local: "10.0.0.1".parse().unwrap(),
        vni: weft_control::Vni::new(1).unwrap(),
        remotes: vec!["fd00::1".parse().unwrap()],
        netns: None,
        learning: false,
        port: None,
        remote_macs: Vec::new(),
        remote_ageing: 300,
        directory: false,
    };
    let ageing = |secs: u32| {
        let mut kind = vxlan("127.0.0.1", 1, 4789);
        if let PortKind::Vxlan { remote_ageing, .. } = &mut kind {
            *remote_ageing = secs;
        }
        kind
    };
    // A local that is not an address and a VNI beyond 24 bits cannot be built: the request
    // that carries them does not decode (weft-control's text_form tests).
    for (kind, field) in [
        (
            ageing(0),
            "remote ageing 0 s is out of range: use 1 to 86400",
        ),
        (ageing(86_401), "remote ageing 86401 s"),
        (vxlan("127.0.0.1", 1, 0), "udp port"),
        (too_many, "remotes"),
        (mixed, "remote"),
    ] {
        let e = add(&mut f, "vx", kind).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
        assert!(e.message.contains(field), "{field}: {}", e.message);
    }
    assert!(f.saved().switches[0].ports.is_empty());
}

#[test]
fn a_vxlan_port_opens_and_is_listed_with_its_kind() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut f = fixture(vec![switch("br0", &[])]);
    // A port of our own, away from 4789 and from other tests.
    let udp = 40_000 + u16::try_from(std::process::id() % 20_000).unwrap();
    add(&mut f, "vx", vxlan("127.0.0.1", 42, udp)).unwrap();
    let Response::Port { port, .. } = f.ok(Request::PortShow {
        switch: "br0".into(),
        name: "vx".into(),
    }) else {
        panic!("not a port")
    };
    assert!(port.failed.is_none(), "{:?}", port.failed);
    assert!(
        matches!(port.kind, PortKind::Vxlan { vni, .. } if vni.get() == 42),
        "{:?}",
        port.kind
    );
    // As root it sends through its raw socket, and says so beside its offloads.
    assert!(
        port.offloads.iter().any(|o| o == "raw_socket"),
        "{:?}",
        port.offloads
    );
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "vx".into(),
    });
}

#[test]
fn config_apply_refuses_two_vhost_user_ports_on_one_socket() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let socket = f.dir.path().join("vm.sock").to_string_lossy().into_owned();
    let mut s = switch("br0", &[]);
    for name in ["vm1", "vm2"] {
        s.ports.push(PortState {
            name: name.into(),
            kind: vhost(Some(socket.clone())),
            options: PortSettings::default(),
        });
    }
    let e = f.err(Request::ConfigApply {
        state: State {
            version: 1,
            switches: vec![s],
        },
        dry_run: false,
    });
    assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
    assert!(e.message.contains("br0:vm2"), "{}", e.message);
    assert!(f.saved().switches[0].ports.is_empty());
}

#[test]
fn a_vhost_user_port_keeps_its_dispatch_mode_and_notification_policy() {
    use weft_control::state::{VhostDispatch, VhostNotify};
    let mut f = fixture(vec![switch("br0", &[])]);
    let kind = PortKind::VhostUser {
        socket: None,
        mode: VhostMode::Server,
        mtu: 1500,
        dispatch: Some(VhostDispatch::SwitchDriven),
        notify: Some(VhostNotify::Coalesced {
            frames: 16,
            max_delay_us: 100,
        }),
        queues: 1,
    };
    add(&mut f, "vm1", kind.clone()).unwrap();
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!("not a port list")
    };
    assert_eq!(ports[0].kind, kind);
    // Settings built around the parser's checks are still refused.
    let bad = PortKind::VhostUser {
        socket: None,
        mode: VhostMode::Server,
        mtu: 1500,
        dispatch: Some(VhostDispatch::Adaptive {
            low_pps: 10,
            high_pps: 10,
            window_us: 5_000,
        }),
        notify: None,
        queues: 1,
    };
    let e = add(&mut f, "vm2", bad).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("LOW_PPS < HIGH_PPS"), "{}", e.message);
    let bad = PortKind::VhostUser {
        socket: None,
        mode: VhostMode::Server,
        mtu: 1500,
        dispatch: None,
        notify: Some(VhostNotify::Coalesced {
            frames: 0,
            max_delay_us: 100,
        }),
        queues: 1,
    };
    let e = add(&mut f, "vm2", bad).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
}

#[test]
fn old_state_without_dispatch_or_notify_still_loads() {
    let kind: PortKind =
        serde_json::from_str(r#"{"type":"vhost_user","socket":"/run/weft/vm1.sock","mtu":9000}"#)
            .unwrap();
    assert_eq!(
        kind,
        PortKind::VhostUser {
            socket: Some("/run/weft/vm1.sock".into()),
            mode: VhostMode::Server,
            mtu: 9000,
            dispatch: None,
            notify: None,
            queues: 1,
        }
    );
    let json = serde_json::to_string(&kind).unwrap();
    assert!(
        !json.contains("dispatch") && !json.contains("notify") && !json.contains("queues"),
        "{json}"
    );
}

#[test]
fn a_vhost_user_port_takes_1_to_16_queue_pairs() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let kind = |queues| PortKind::VhostUser {
        socket: None,
        mode: VhostMode::Server,
        mtu: 1500,
        dispatch: None,
        notify: None,
        queues,
    };
    for bad in [0, 17] {
        let e = add(&mut f, "vm1", kind(bad)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert!(e.message.contains("give 1 to 16"), "{}", e.message);
    }
    add(&mut f, "vm1", kind(4)).unwrap();
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!("not a port list")
    };
    assert_eq!(ports[0].kind, kind(4));
    let json = serde_json::to_string(&kind(4)).unwrap();
    assert!(json.contains(r#""queues":4"#), "{json}");
}

#[test]
fn a_vxlan_port_in_an_old_state_file_ages_remote_macs_after_300_s_and_says_it_only_if_changed() {
    let kind: PortKind =
        serde_json::from_str(r#"{"type":"vxlan","local":"192.0.2.1","vni":5}"#).unwrap();
    assert!(matches!(
        kind,
        PortKind::Vxlan {
            remote_ageing: 300,
            directory: false,
            ..
        }
    ));
    assert!(!serde_json::to_string(&kind)
        .unwrap()
        .contains("remote_ageing"));
    let kind: PortKind =
        serde_json::from_str(r#"{"type":"vxlan","local":"192.0.2.1","vni":5,"remote_ageing":60}"#)
            .unwrap();
    assert!(matches!(
        kind,
        PortKind::Vxlan {
            remote_ageing: 60,
            directory: false,
            ..
        }
    ));
    assert!(serde_json::to_string(&kind)
        .unwrap()
        .contains(r#""remote_ageing":60"#));
}

#[test]
fn a_memif_port_refuses_bad_queue_counts_and_secrets_and_keeps_its_settings() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let kind = |queues, secret: Option<&str>| PortKind::Memif {
        socket: None,
        id: 3,
        role: VhostMode::Client,
        secret: secret.map(str::to_string),
        queues,
        mtu: 1500,
    };
    for (bad, why) in [
        (kind(0, None), "give 1 to 16"),
        (kind(17, None), "give 1 to 16"),
        (kind(1, Some("")), "1 to 23 bytes"),
        (kind(1, Some(&"s".repeat(24))), "1 to 23 bytes"),
        (kind(1, Some("a\0b")), "1 to 23 bytes"),
    ] {
        let e = add(&mut f, "m1", bad).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert!(e.message.contains(why), "{}", e.message);
    }
    let json = serde_json::to_string(&kind(2, Some("s3cret"))).unwrap();
    assert_eq!(
        json,
        r#"{"type":"memif","id":3,"role":"client","secret":"s3cret","queues":2,"mtu":1500}"#
    );
    let back: PortKind = serde_json::from_str(&json).unwrap();
    assert_eq!(back, kind(2, Some("s3cret")));
    // A server with one queue pair and no secret writes only what differs.
    let plain: PortKind = serde_json::from_str(r#"{"type":"memif"}"#).unwrap();
    assert!(
        matches!(
            plain,
            PortKind::Memif {
                id: 0,
                role: VhostMode::Server,
                queues: 1,
                mtu: 1500,
                ..
            }
        ),
        "{plain:?}"
    );
}
