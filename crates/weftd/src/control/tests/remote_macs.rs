//! A VXLAN port's static remote MACs through the control plane: validated, persisted, and
//! changed in the running port's remote FDB without reopening it.

use weft_control::state::RemoteMac;

use super::*;

fn vxlan(udp: u16, remote_macs: Vec<RemoteMac>) -> PortKind {
    PortKind::Vxlan {
        local: "127.0.0.1".into(),
        vni: 7,
        remotes: vec!["127.0.0.2".into(), "127.0.0.3".into()],
        netns: None,
        learning: false,
        port: Some(udp),
        remote_macs,
        remote_ageing: 300,
    }
}

fn remote_mac(mac: &str, remote: &str) -> RemoteMac {
    RemoteMac {
        mac: mac.into(),
        remote: remote.into(),
    }
}

fn add_port(f: &mut Fixture, kind: PortKind) -> Result<Response, ControlError> {
    f.req(Request::PortAdd {
        switch: "br0".into(),
        name: "vx".into(),
        kind,
        options: PortSettings::default(),
    })
}

fn add_mac(f: &mut Fixture, mac: &str, remote: &str) -> Result<Response, ControlError> {
    f.req(Request::RemoteMacAdd {
        switch: "br0".into(),
        port: "vx".into(),
        mac: mac.into(),
        remote: remote.into(),
    })
}

fn shown(f: &mut Fixture) -> Vec<(String, String, bool)> {
    let Response::RemoteMacs { entries } = f.ok(Request::RemoteMacShow {
        switch: "br0".into(),
        port: "vx".into(),
    }) else {
        panic!("not remote MACs")
    };
    entries
        .into_iter()
        .map(|e| (e.mac, e.remote, e.is_static))
        .collect()
}

fn saved_macs(f: &Fixture) -> Vec<RemoteMac> {
    match &f.saved().switches[0].ports[0].kind {
        PortKind::Vxlan { remote_macs, .. } => remote_macs.clone(),
        other => panic!("not a VXLAN port: {other:?}"),
    }
}

fn udp_port(offset: u16) -> u16 {
    41_000 + u16::try_from(std::process::id() % 10_000).unwrap() + offset
}

#[test]
fn remote_macs_are_added_moved_and_deleted_in_the_running_port_and_the_state_file() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut f = fixture(vec![switch("br0", &[])]);
    let first = remote_mac("02:00:00:00:00:01", "127.0.0.2");
    add_port(&mut f, vxlan(udp_port(0), vec![first.clone()])).unwrap();
    assert_eq!(
        shown(&mut f),
        [("02:00:00:00:00:01".into(), "127.0.0.2".into(), true)]
    );

    // Added while running, upper case accepted and stored canonical; then moved.
    add_mac(&mut f, "02:00:00:00:00:0A", "127.0.0.3").unwrap();
    add_mac(&mut f, "02:00:00:00:00:01", "127.0.0.3").unwrap();
    assert_eq!(
        shown(&mut f),
        [
            ("02:00:00:00:00:01".into(), "127.0.0.3".into(), true),
            ("02:00:00:00:00:0a".into(), "127.0.0.3".into(), true),
        ]
    );
    assert_eq!(
        saved_macs(&f),
        [
            remote_mac("02:00:00:00:00:0a", "127.0.0.3"),
            remote_mac("02:00:00:00:00:01", "127.0.0.3"),
        ]
    );

    f.ok(Request::RemoteMacDel {
        switch: "br0".into(),
        port: "vx".into(),
        mac: "02:00:00:00:00:0a".into(),
    });
    assert_eq!(shown(&mut f).len(), 1);
    assert_eq!(saved_macs(&f).len(), 1);
    let e = f.err(Request::RemoteMacDel {
        switch: "br0".into(),
        port: "vx".into(),
        mac: "02:00:00:00:00:0a".into(),
    });
    assert_eq!(e.kind, ErrorKind::NotFound, "{}", e.message);
}

#[test]
fn bad_remote_macs_are_refused_and_change_nothing() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut f = fixture(vec![switch("br0", &[])]);
    add_port(&mut f, vxlan(udp_port(1), Vec::new())).unwrap();
    for (mac, remote, says) in [
        ("nonsense", "127.0.0.2", "MAC"),
        ("01:00:5e:00:00:01", "127.0.0.2", "unicast"),
        ("02:00:00:00:00:01", "not-an-ip", "IP address"),
        ("02:00:00:00:00:01", "fd00::2", "family"),
        (
            "02:00:00:00:00:01",
            "127.0.0.9",
            "not one of the port's remotes",
        ),
    ] {
        let e = add_mac(&mut f, mac, remote).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{mac} {remote}: {}", e.message);
        assert!(
            e.message.to_lowercase().contains(&says.to_lowercase()),
            "{says}: {}",
            e.message
        );
    }
    assert!(saved_macs(&f).is_empty());
    assert!(shown(&mut f).is_empty());
    // A port given twice the same MAC is refused whole.
    let twice = vxlan(
        udp_port(2),
        vec![
            remote_mac("02:00:00:00:00:01", "127.0.0.2"),
            remote_mac("02:00:00:00:00:01", "127.0.0.3"),
        ],
    );
    let e = f
        .req(Request::PortAdd {
            switch: "br0".into(),
            name: "vx2".into(),
            kind: twice,
            options: PortSettings::default(),
        })
        .unwrap_err();
    assert!(e.message.contains("twice"), "{}", e.message);
    // Ports of other kinds have no remote FDB.
    let e = f.err(Request::RemoteMacShow {
        switch: "br0".into(),
        port: "nope".into(),
    });
    assert_eq!(e.kind, ErrorKind::NotFound, "{}", e.message);
}
