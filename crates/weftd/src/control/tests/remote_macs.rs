//! A VXLAN port's static remote MACs through the control plane: validated, persisted, and
//! changed in the running port's remote FDB without reopening it.

use weft_control::state::RemoteMac;

use super::*;

fn vxlan(udp: u16, remote_macs: Vec<RemoteMac>) -> PortKind {
    PortKind::Vxlan {
        local: "127.0.0.1".parse().unwrap(),
        vni: weft_control::Vni::new(7).unwrap(),
        remotes: vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()],
        netns: None,
        learning: false,
        port: Some(udp),
        remote_macs,
        remote_ageing: 300,
        directory: false,
    }
}

fn remote_mac(mac: &str, remote: &str) -> RemoteMac {
    RemoteMac {
        mac: mac.parse().unwrap(),
        remote: remote.parse().unwrap(),
    }
}

fn add_port(f: &mut Fixture, kind: PortKind) -> Result<Response, ControlError> {
    f.req(Request::PortAdd {
        create_switch: true,
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
        mac: mac.parse().unwrap(),
        remote: remote.parse().unwrap(),
    })
}

/// The entries `remote_mac_show` lists: MAC, endpoint, source.
fn shown(f: &mut Fixture) -> Vec<(String, String, String)> {
    let Response::RemoteMacs { entries } = f.ok(Request::RemoteMacShow {
        switch: "br0".into(),
        port: "vx".into(),
        mac: None,
    }) else {
        panic!("not remote MACs")
    };
    entries
        .into_iter()
        .map(|e| (e.mac, e.remote, e.source))
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
        [(
            "02:00:00:00:00:01".into(),
            "127.0.0.2".into(),
            "static".into()
        )]
    );

    // Added while running, upper case accepted and stored canonical; then moved.
    add_mac(&mut f, "02:00:00:00:00:0A", "127.0.0.3").unwrap();
    add_mac(&mut f, "02:00:00:00:00:01", "127.0.0.3").unwrap();
    assert_eq!(
        shown(&mut f),
        [
            (
                "02:00:00:00:00:01".into(),
                "127.0.0.3".into(),
                "static".into()
            ),
            (
                "02:00:00:00:00:0a".into(),
                "127.0.0.3".into(),
                "static".into()
            ),
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
        mac: "02:00:00:00:00:0a".parse().unwrap(),
    });
    assert_eq!(shown(&mut f).len(), 1);
    assert_eq!(saved_macs(&f).len(), 1);
    let e = f.err(Request::RemoteMacDel {
        switch: "br0".into(),
        port: "vx".into(),
        mac: "02:00:00:00:00:0a".parse().unwrap(),
    });
    assert_eq!(e.kind, ErrorKind::NotFound, "{}", e.message);
}

#[test]
fn directory_entries_are_shown_by_source_never_saved_and_a_static_one_overrides_them() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut f = fixture(vec![switch("br0", &[])]);
    let pinned = remote_mac("02:00:00:00:00:01", "127.0.0.2");
    add_port(&mut f, vxlan(udp_port(4), vec![pinned.clone()])).unwrap();
    let fdb = f.c.port_rt("br0", "vx").unwrap().device.remote_fdb.clone();
    let fdb = fdb.expect("an open VXLAN port has a remote FDB");
    let mac = |s: &str| s.parse::<weft_packet::MacAddr>().unwrap();
    let at = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let applied = fdb.replace_directory(&[
        (mac("02:00:00:00:00:01"), at("127.0.0.3")),
        (mac("02:00:00:00:00:02"), at("127.0.0.3")),
    ]);
    assert_eq!((applied.added, applied.shadowed_by_static), (1, 1));
    let entry = |m: &str, r: &str, source: &str| (m.to_string(), r.to_string(), source.to_string());
    assert_eq!(
        shown(&mut f),
        [
            entry("02:00:00:00:00:01", "127.0.0.2", "static"),
            entry("02:00:00:00:00:02", "127.0.0.3", "directory"),
        ]
    );
    assert_eq!(saved_macs(&f), std::slice::from_ref(&pinned));

    // The directory owns its entries: remote-mac del refuses, and says why.
    let e = f.err(Request::RemoteMacDel {
        switch: "br0".into(),
        port: "vx".into(),
        mac: mac("02:00:00:00:00:02"),
    });
    assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
    assert!(e.message.contains("directory"), "{}", e.message);

    // A static entry overrides one (and is saved).
    add_mac(&mut f, "02:00:00:00:00:02", "127.0.0.2").unwrap();
    assert_eq!(
        shown(&mut f),
        [
            entry("02:00:00:00:00:01", "127.0.0.2", "static"),
            entry("02:00:00:00:00:02", "127.0.0.2", "static"),
        ]
    );
    assert_eq!(saved_macs(&f).len(), 2);
}

#[test]
fn bad_remote_macs_are_refused_and_change_nothing() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut f = fixture(vec![switch("br0", &[])]);
    add_port(&mut f, vxlan(udp_port(1), Vec::new())).unwrap();
    // A MAC or an endpoint that does not parse cannot be built: the request that carries
    // it does not decode (weft-control's text_form tests).
    for (mac, remote, says) in [
        ("01:00:5e:00:00:01", "127.0.0.2", "unicast"),
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
            create_switch: true,
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
        mac: None,
    });
    assert_eq!(e.kind, ErrorKind::NotFound, "{}", e.message);
}

fn route(dst: Option<&str>, src: Option<&str>) -> RuleSpec {
    RuleSpec {
        priority: 100,
        matches: MatchSpec {
            src_mac: src.map(|m| m.parse().unwrap()),
            dst_mac: dst.map(|m| m.parse().unwrap()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output("vx".into())],
        cookie: 1,
    }
}

fn add_route(f: &mut Fixture, rule: RuleSpec, remote: &str) -> Result<Response, ControlError> {
    f.req(Request::RouteAdd {
        switch: "br0".into(),
        rule,
        remote: Some(remote.parse().unwrap()),
    })
}

fn rule_count(f: &mut Fixture) -> usize {
    let Response::Rules { rules } = f.ok(Request::RuleList {
        switch: "br0".into(),
    }) else {
        panic!("not rules")
    };
    rules.len()
}

#[test]
fn a_route_with_a_remote_adds_its_rule_and_remote_mac_together_or_not_at_all() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut br0 = switch("br0", &[]);
    br0.settings.max_rules = 2;
    let mut f = fixture(vec![br0]);
    let pinned = remote_mac("02:00:00:00:00:01", "127.0.0.2");
    add_port(&mut f, vxlan(udp_port(3), vec![pinned.clone()])).unwrap();
    let before = vec![(
        "02:00:00:00:00:01".to_string(),
        "127.0.0.2".to_string(),
        "static".to_string(),
    )];

    // A bad rule, a bad remote, a route with no destination: refused, the entry for
    // 02:..:01 keeps its endpoint, and no rule goes in.
    let dst = Some("02:00:00:00:00:01");
    let mut bad_rule = route(dst, None);
    bad_rule.matches.ethertype = Some(0x0800);
    bad_rule.matches.ip_src = Some("10.0.0.1/8".parse().unwrap());
    for (rule, remote, says) in [
        (bad_rule, "127.0.0.3", "10.0.0.1"),
        (
            route(Some("02:00:00:00:00:01/ff:ff:ff:ff:ff:00"), None),
            "127.0.0.3",
            "has a mask",
        ),
        (
            route(dst, None),
            "127.0.0.9",
            "not one of the port's remotes",
        ),
        (route(None, None), "127.0.0.3", "destination MAC"),
    ] {
        let e = add_route(&mut f, rule, remote).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{}", e.message);
        assert!(e.message.contains(says), "{says}: {}", e.message);
        assert_eq!(shown(&mut f), before);
        assert_eq!(saved_macs(&f), std::slice::from_ref(&pinned));
        assert_eq!(rule_count(&mut f), 0);
        assert!(f.saved().switches[0].rules.is_empty());
    }

    // Both go in: the entry moves to the route's remote, the rule is listed and saved.
    let Response::RuleAdded { .. } = add_route(&mut f, route(dst, None), "127.0.0.3").unwrap()
    else {
        panic!("route_add answered something else")
    };
    let moved = vec![(
        "02:00:00:00:00:01".to_string(),
        "127.0.0.3".to_string(),
        "static".to_string(),
    )];
    assert_eq!(shown(&mut f), moved);
    assert_eq!(
        saved_macs(&f),
        [remote_mac("02:00:00:00:00:01", "127.0.0.3")]
    );
    assert_eq!(rule_count(&mut f), 1);

    // The rule limit refuses the next route's rule: its remote MAC does not go in either.
    add_route(&mut f, route(Some("02:00:00:00:00:02"), None), "127.0.0.2").unwrap();
    let e = add_route(&mut f, route(Some("02:00:00:00:00:03"), None), "127.0.0.2").unwrap_err();
    assert_eq!(e.kind, ErrorKind::LimitReached, "{}", e.message);
    let macs: Vec<String> = shown(&mut f).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(macs, ["02:00:00:00:00:01", "02:00:00:00:00:02"]);
    assert_eq!(saved_macs(&f).len(), 2);
    assert_eq!(rule_count(&mut f), 2);

    // Without a remote, a route is a plain rule (no remote FDB change).
    let e = f
        .req(Request::RouteAdd {
            switch: "br0".into(),
            rule: route(None, None),
            remote: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::LimitReached, "{}", e.message);
}

#[test]
fn remote_mac_show_of_one_mac_answers_that_entry_alone() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: a VXLAN port's raw socket needs root");
        return;
    }
    let mut f = fixture(vec![switch("br0", &[])]);
    let macs = vec![
        remote_mac("02:00:00:00:00:01", "127.0.0.2"),
        remote_mac("02:00:00:00:00:02", "127.0.0.3"),
    ];
    add_port(&mut f, vxlan(udp_port(7), macs)).unwrap();
    let one = |f: &mut Fixture, mac: &str| {
        let Response::RemoteMacs { entries } = f.ok(Request::RemoteMacShow {
            switch: "br0".into(),
            port: "vx".into(),
            mac: Some(mac.parse().unwrap()),
        }) else {
            panic!("not remote MACs")
        };
        entries
            .into_iter()
            .map(|e| (e.mac, e.remote))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        one(&mut f, "02:00:00:00:00:02"),
        [("02:00:00:00:00:02".to_string(), "127.0.0.3".to_string())]
    );
    assert!(one(&mut f, "02:00:00:00:00:09").is_empty());
}
