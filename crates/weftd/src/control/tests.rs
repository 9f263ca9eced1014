//! The control plane with real workers, a temporary state file, and (where traffic is
//! needed) in-memory ports slipped in behind configured ports.

use std::time::{Duration, Instant};

use weft_control::rule::{ActionSpec, MatchSpec, RuleSpec};
use weft_control::state::{PortKind, PortSettings, PortState, SwitchSettings, VlanMode};
use weft_control::CaptureDirection;
use weft_switch::memory_port::{memory_port, MemoryPortHandle};
use weft_switch::{PortCaps, PortHalves};

use super::build::{Opened, Source};
use super::*;
use crate::config::{Bounded, WorkersConfig};
use crate::devices::Device;

struct Fixture {
    dir: tempfile::TempDir,
    c: Controller,
    session: Session,
}

/// A namespace no test creates: TAPs in it fail to open, as root or not, and nothing is
/// created on the host.
fn absent_netns() -> String {
    format!("weft-absent-{}", std::process::id())
}

fn tap(name: &str) -> PortState {
    PortState {
        name: name.into(),
        kind: PortKind::Tap {
            ifname: None,
            netns: Some(absent_netns()),
            queues: 1,
            mtu: 1500,
            offloads: true,
        },
        options: PortSettings::default(),
    }
}

fn switch(name: &str, ports: &[&str]) -> SwitchState {
    SwitchState {
        name: name.into(),
        settings: SwitchSettings::default(),
        ports: ports.iter().map(|p| tap(p)).collect(),
        static_macs: Vec::new(),
        rules: Vec::new(),
        on_demand: false,
    }
}

fn fixture_with(state: State, workers: usize) -> (Fixture, Vec<PortFailure>) {
    fixture_in(tempfile::tempdir().unwrap(), state, workers)
}

/// A controller keeping its files in `dir`, restoring `state`.
fn fixture_in(dir: tempfile::TempDir, state: State, workers: usize) -> (Fixture, Vec<PortFailure>) {
    let config = WorkersConfig {
        count: Bounded(workers as u64),
        ..WorkersConfig::default()
    };
    let pool = WorkerPool::start(&config).unwrap();
    // Sockets may be in `<dir>/vhost` (the default) and in `<dir>` itself.
    std::fs::create_dir(dir.path().join("vhost")).unwrap();
    let sockets = crate::socket_dirs::SocketDirs::open(
        &dir.path().join("vhost"),
        &[dir.path().to_path_buf()],
        &[&dir.path().join("weftd.sock")],
    )
    .unwrap();
    let (c, failures) = Controller::start(
        pool,
        super::DevicePaths::new(
            dir.path().join("state.json"),
            crate::devices::VhostPolicy::new(sockets),
        ),
        state,
        true,
    )
    .unwrap();
    (
        Fixture {
            dir,
            c,
            session: Session::default(),
        },
        failures,
    )
}

fn fixture(switches: Vec<SwitchState>) -> Fixture {
    fixture_with(
        State {
            version: 1,
            switches,
        },
        1,
    )
    .0
}

impl Fixture {
    fn req(&mut self, r: Request) -> Result<Response, ControlError> {
        self.c.handle(r, &mut self.session)
    }

    fn ok(&mut self, r: Request) -> Response {
        self.req(r).unwrap()
    }

    /// `port_show`'s (rx packets, tx packets) of `switch:port`.
    fn rx_tx(&mut self, switch: &str, port: &str) -> (u64, u64) {
        let Response::Port { counters, .. } = self.ok(Request::PortShow {
            switch: switch.into(),
            name: port.into(),
        }) else {
            panic!("port_show answered something else")
        };
        (counters.rx_packets, counters.tx_packets)
    }

    fn err(&mut self, r: Request) -> ControlError {
        self.req(r).unwrap_err()
    }

    fn file(&self) -> Vec<u8> {
        std::fs::read(self.dir.path().join("state.json")).unwrap()
    }

    fn saved(&self) -> State {
        crate::persist::load(&self.dir.path().join("state.json"))
            .unwrap()
            .unwrap()
    }

    /// Puts in-memory ports behind the configured ports of `switch` (same names).
    fn memory_ports(&mut self, name: &str) -> Vec<MemoryPortHandle> {
        let conf = self.c.switch_conf(name).unwrap().clone();
        let workers = self.c.switch_rt(name).unwrap().workers.clone();
        let mut handles = Vec::new();
        let sources = conf
            .ports
            .iter()
            .map(|_| {
                let (rx, tx, h) = memory_port(PortCaps::plain(1500), 256);
                handles.push(h);
                Source::Opened(Opened {
                    device: Device {
                        lanes: vec![PortHalves {
                            rx: Some(Box::new(rx)),
                            tx: Box::new(tx),
                        }],
                        handle: crate::devices::memory_handle(),
                    }
                    .spread(conf.settings.lanes, 0),
                    failed: None,
                })
            })
            .collect();
        self.c.install(&conf, sources, workers).unwrap();
        handles
    }
}

fn frame(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn drop_rule() -> RuleSpec {
    RuleSpec {
        priority: 10,
        matches: MatchSpec {
            dst_mac: Some("02:00:00:00:00:09".parse().unwrap()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Drop],
        cookie: 0,
    }
}

#[test]
fn switch_add_is_persisted_and_listed_and_a_duplicate_changes_nothing() {
    let mut f = fixture(vec![switch("br0", &[])]);
    f.ok(Request::SwitchAdd {
        name: "br1".into(),
        settings: SwitchSettings::default(),
    });
    let names: Vec<_> = f.saved().switches.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["br0", "br1"]);
    let Response::Switches { switches } = f.ok(Request::SwitchList {}) else {
        panic!()
    };
    assert_eq!(switches.len(), 2);
    let before = f.file();
    let e = f.err(Request::SwitchAdd {
        name: "br1".into(),
        settings: SwitchSettings::default(),
    });
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    assert_eq!(f.file(), before);
}

#[test]
fn refused_changes_leave_the_state_file_alone() {
    let mut f = fixture(vec![switch("br0", &["vm1"])]);
    let before = f.file();
    let cases: Vec<(Request, ErrorKind)> = vec![
        (
            Request::SwitchAdd {
                name: "bad name".into(),
                settings: SwitchSettings::default(),
            },
            ErrorKind::Invalid,
        ),
        (
            Request::SwitchAdd {
                name: "br9".into(),
                settings: SwitchSettings {
                    batch_size: 0,
                    ..SwitchSettings::default()
                },
            },
            ErrorKind::Invalid,
        ),
        (
            Request::RuleAdd {
                switch: "br0".into(),
                rule: RuleSpec {
                    actions: vec![ActionSpec::Output("nope".into())],
                    ..RuleSpec::default()
                },
            },
            ErrorKind::NotFound,
        ),
        (
            Request::RuleAdd {
                switch: "br0".into(),
                rule: RuleSpec {
                    actions: vec![ActionSpec::PushVlan(4095)],
                    ..RuleSpec::default()
                },
            },
            ErrorKind::Invalid,
        ),
        (
            Request::FdbAdd {
                switch: "br0".into(),
                vlan: 4095,
                mac: "02:00:00:00:00:01".parse().unwrap(),
                port: "vm1".into(),
            },
            ErrorKind::Invalid,
        ),
        (
            Request::FdbAdd {
                switch: "br0".into(),
                vlan: 0,
                mac: "02:00:00:00:00:01".parse().unwrap(),
                port: "vm2".into(),
            },
            ErrorKind::NotFound,
        ),
        (
            Request::PortSet {
                switch: "br0".into(),
                name: "vm1".into(),
                options: PortSettings {
                    vlan: VlanMode::Trunk {
                        vlans: vec![],
                        native: None,
                    },
                    ..PortSettings::default()
                },
            },
            ErrorKind::Invalid,
        ),
        (
            Request::PortAdd {
                create_switch: true,
                switch: "br0".into(),
                name: "vm1".into(),
                kind: tap("vm1").kind,
                options: PortSettings::default(),
            },
            ErrorKind::AlreadyExists,
        ),
        (
            Request::PortAdd {
                create_switch: true,
                switch: "br0".into(),
                name: "tap9".into(),
                kind: tap("tap9").kind,
                options: PortSettings::default(),
            },
            ErrorKind::System,
        ),
        (
            Request::RuleDel {
                switch: "br0".into(),
                id: 77,
            },
            ErrorKind::NotFound,
        ),
        (
            Request::SwitchDel {
                name: "br0".into(),
                force: false,
            },
            ErrorKind::Invalid,
        ),
        (
            Request::SwitchDel {
                name: "nope".into(),
                force: true,
            },
            ErrorKind::NotFound,
        ),
    ];
    for (request, kind) in cases {
        let e = f.err(request.clone());
        assert_eq!(e.kind, kind, "{request:?}: {e:?}");
        assert_eq!(f.file(), before, "{request:?} changed the state file");
    }
}

#[test]
fn a_tap_port_that_cannot_be_created_is_a_system_error_naming_why() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let e = f.err(Request::PortAdd {
        create_switch: true,
        switch: "br0".into(),
        name: "tap0".into(),
        kind: tap("tap0").kind,
        options: PortSettings::default(),
    });
    assert_eq!(e.kind, ErrorKind::System);
    assert!(
        e.message.contains("tap0") && e.message.contains(&absent_netns()),
        "{}",
        e.message
    );
}

#[test]
fn restored_ports_whose_device_fails_are_kept_and_marked_failed() {
    let (mut f, failures) = fixture_with(
        State {
            version: 1,
            switches: vec![switch("br0", &["vm1", "vm2"])],
        },
        1,
    );
    assert_eq!(failures.len(), 2);
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!()
    };
    assert_eq!(ports.len(), 2);
    assert!(ports.iter().all(|p| p
        .failed
        .as_deref()
        .is_some_and(|w| w.contains("network namespace"))));
    assert_eq!(
        f.saved().switches[0].ports.len(),
        2,
        "kept in the state file"
    );
}

#[test]
fn static_entries_are_persisted_shown_and_go_with_their_port() {
    let mut f = fixture(vec![switch("br0", &["vm1", "vm2"])]);
    f.ok(Request::FdbAdd {
        switch: "br0".into(),
        vlan: 0,
        mac: "02-00-00-00-00-01".parse().unwrap(),
        port: "vm1".into(),
    });
    assert_eq!(
        f.saved().switches[0].static_macs[0].mac.to_string(),
        "02:00:00:00:00:01",
        "canonical form"
    );
    let e = f.err(Request::FdbAdd {
        switch: "br0".into(),
        vlan: 0,
        mac: "02:00:00:00:00:01".parse().unwrap(),
        port: "vm2".into(),
    });
    assert_eq!(e.kind, ErrorKind::AlreadyExists);
    let Response::Fdb { entries } = f.ok(Request::FdbShow {
        switch: "br0".into(),
        vlan: None,
        port: None,
    }) else {
        panic!()
    };
    assert_eq!(entries.len(), 1);
    assert!(entries[0].is_static && entries[0].port == "vm1");
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "vm1".into(),
    });
    assert!(f.saved().switches[0].static_macs.is_empty());
    let Response::Fdb { entries } = f.ok(Request::FdbShow {
        switch: "br0".into(),
        vlan: None,
        port: None,
    }) else {
        panic!()
    };
    assert!(entries.is_empty());
}

#[test]
fn fdb_del_and_flush_update_the_saved_static_entries() {
    let mut f = fixture(vec![switch("br0", &["vm1", "vm2"])]);
    for (mac, port, vlan) in [
        ("02:00:00:00:00:01", "vm1", 0),
        ("02:00:00:00:00:02", "vm2", 0),
        ("02:00:00:00:00:03", "vm2", 7),
    ] {
        f.ok(Request::FdbAdd {
            switch: "br0".into(),
            vlan,
            mac: mac.parse().unwrap(),
            port: port.into(),
        });
    }
    f.ok(Request::FdbDel {
        switch: "br0".into(),
        vlan: 0,
        mac: "02:00:00:00:00:01".parse().unwrap(),
    });
    assert_eq!(f.saved().switches[0].static_macs.len(), 2);
    let e = f.err(Request::FdbDel {
        switch: "br0".into(),
        vlan: 0,
        mac: "02:00:00:00:00:01".parse().unwrap(),
    });
    assert_eq!(e.kind, ErrorKind::NotFound);
    f.ok(Request::FdbFlush {
        switch: "br0".into(),
        port: None,
        vlan: None,
        dynamic_only: true,
    });
    assert_eq!(
        f.saved().switches[0].static_macs.len(),
        2,
        "dynamic_only keeps statics"
    );
    f.ok(Request::FdbFlush {
        switch: "br0".into(),
        port: Some("vm2".into()),
        vlan: Some(7),
        dynamic_only: false,
    });
    let left = &f.saved().switches[0].static_macs;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].mac.to_string(), "02:00:00:00:00:02");
    let Response::Fdb { entries } = f.ok(Request::FdbShow {
        switch: "br0".into(),
        vlan: None,
        port: None,
    }) else {
        panic!()
    };
    assert_eq!(entries.len(), 1);
}

#[test]
fn a_port_named_by_rules_cannot_go_until_they_do() {
    let mut f = fixture(vec![switch("br0", &["vm1", "vm2"])]);
    let Response::RuleAdded { id } = f.ok(Request::RuleAdd {
        switch: "br0".into(),
        rule: RuleSpec {
            matches: MatchSpec {
                in_port: Some("vm1".into()),
                ..MatchSpec::default()
            },
            actions: vec![ActionSpec::Output("vm2".into())],
            ..RuleSpec::default()
        },
    }) else {
        panic!()
    };
    let e = f.err(Request::PortDel {
        switch: "br0".into(),
        name: "vm2".into(),
    });
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains(&id.to_string()));
    f.ok(Request::RuleDel {
        switch: "br0".into(),
        id,
    });
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "vm2".into(),
    });
    assert_eq!(f.saved().switches[0].ports.len(), 1);
}

#[test]
fn rules_list_in_lookup_order_with_their_ids() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let mut ids = Vec::new();
    for priority in [1, 30, 20] {
        let Response::RuleAdded { id } = f.ok(Request::RuleAdd {
            switch: "br0".into(),
            rule: RuleSpec {
                priority,
                ..drop_rule()
            },
        }) else {
            panic!()
        };
        ids.push(id);
    }
    let Response::Rules { rules } = f.ok(Request::RuleList {
        switch: "br0".into(),
    }) else {
        panic!()
    };
    let got: Vec<_> = rules.iter().map(|r| (r.id, r.rule.priority)).collect();
    assert_eq!(got, vec![(ids[1], 30), (ids[2], 20), (ids[0], 1)]);
    let saved: Vec<_> = f.saved().switches[0]
        .rules
        .iter()
        .map(|r| r.priority)
        .collect();
    assert_eq!(saved, vec![1, 30, 20], "the file keeps insertion order");
}

#[test]
fn config_apply_validates_whole_then_changes_only_the_difference() {
    let mut f = fixture(vec![switch("br0", &["vm1"]), switch("old", &[])]);
    f.ok(Request::RuleAdd {
        switch: "br0".into(),
        rule: drop_rule(),
    });
    let mut target = f.c.state().clone();
    target.switches.retain(|s| s.name != "old");
    target.switches.push(switch("new", &[]));
    target.switches[0].rules.push(RuleSpec {
        priority: 3,
        ..drop_rule()
    });
    let before = f.file();
    let Response::Applied { changes } = f.ok(Request::ConfigApply {
        state: target.clone(),
        dry_run: true,
    }) else {
        panic!()
    };
    assert_eq!(changes.len(), 3, "{changes:?}");
    assert_eq!(f.file(), before, "a dry run changes nothing");

    let mut bad = target.clone();
    bad.switches[0].rules.push(RuleSpec {
        actions: vec![ActionSpec::Output("ghost".into())],
        ..RuleSpec::default()
    });
    assert_eq!(
        f.err(Request::ConfigApply {
            state: bad,
            dry_run: false
        })
        .kind,
        ErrorKind::NotFound
    );
    assert_eq!(f.file(), before, "an invalid target changes nothing");

    let Response::Rules { rules } = f.ok(Request::RuleList {
        switch: "br0".into(),
    }) else {
        panic!()
    };
    let kept_id = rules[0].id;
    f.ok(Request::ConfigApply {
        state: target.clone(),
        dry_run: false,
    });
    assert_eq!(f.saved(), target);
    let Response::Config { state } = f.ok(Request::ConfigShow {}) else {
        panic!()
    };
    assert_eq!(state, target);
    let Response::Rules { rules } = f.ok(Request::RuleList {
        switch: "br0".into(),
    }) else {
        panic!()
    };
    assert_eq!(rules.len(), 2);
    assert!(
        rules.iter().any(|r| r.id == kept_id),
        "the unchanged rule stays installed"
    );
    let Response::Applied { changes } = f.ok(Request::ConfigApply {
        state: target,
        dry_run: false,
    }) else {
        panic!()
    };
    assert!(changes.is_empty(), "{changes:?}");
}

#[test]
fn config_apply_rebuilds_a_switch_whose_settings_change() {
    let mut f = fixture(vec![switch("br0", &["vm1"])]);
    let mut target = f.c.state().clone();
    target.switches[0].settings.batch_size = 32;
    target.switches[0].rules.push(drop_rule());
    f.ok(Request::ConfigApply {
        state: target.clone(),
        dry_run: false,
    });
    assert_eq!(f.saved(), target);
    let Response::Ports { ports } = f.ok(Request::PortList { switch: None }) else {
        panic!()
    };
    assert!(
        ports[0].failed.is_some(),
        "the port kept its (failed) device"
    );
    let Response::Rules { rules } = f.ok(Request::RuleList {
        switch: "br0".into(),
    }) else {
        panic!()
    };
    assert_eq!(rules.len(), 1);
}

#[test]
fn config_apply_rebuilds_a_switch_whose_mac_move_settings_change() {
    let mut f = fixture(vec![switch("br0", &["vm1"])]);
    let mut target = f.c.state().clone();
    target.switches[0].settings.mac_move_limit = 4;
    target.switches[0].settings.mac_move_hold_secs = 20;
    let Response::Applied { changes } = f.ok(Request::ConfigApply {
        state: target.clone(),
        dry_run: false,
    }) else {
        panic!()
    };
    assert_eq!(changes, vec!["rebuild switch br0 (its settings change)"]);
    assert_eq!(f.saved(), target);
    let mut bad = target.clone();
    bad.switches[0].settings.mac_move_hold_secs = 0;
    let e = f.err(Request::ConfigApply {
        state: bad,
        dry_run: false,
    });
    assert!(e.message.contains("mac_move_hold_secs"), "{}", e.message);
    assert_eq!(f.saved(), target, "nothing saved");
}

#[test]
fn switches_spread_over_workers_and_rebalance_when_one_goes() {
    let (mut f, _) = fixture_with(
        State {
            version: 1,
            switches: vec![],
        },
        2,
    );
    for name in ["a", "b", "c", "d"] {
        f.ok(Request::SwitchAdd {
            name: name.into(),
            settings: SwitchSettings::default(),
        });
    }
    let workers = |f: &mut Fixture| {
        let Response::Switches { switches } = f.ok(Request::SwitchList {}) else {
            panic!()
        };
        switches.iter().map(|s| s.worker).collect::<Vec<_>>()
    };
    let w = workers(&mut f);
    assert_eq!(w.iter().filter(|x| **x == 0).count(), 2, "{w:?}");
    for name in ["a", "c"] {
        f.ok(Request::SwitchDel {
            name: name.into(),
            force: false,
        });
    }
    let w = workers(&mut f);
    assert_ne!(w[0], w[1], "the two left run on different workers: {w:?}");
    f.ok(Request::RuleAdd {
        switch: "b".into(),
        rule: drop_rule(),
    });
    let Response::Stats { workers, .. } = f.ok(Request::Stats { switch: None }) else {
        panic!()
    };
    assert_eq!(workers.len(), 2);
}

#[test]
fn traffic_is_counted_and_captured_in_both_directions() {
    let mut f = fixture(vec![switch("br0", &["a", "b"])]);
    let h = f.memory_ports("br0");
    let Response::CaptureStarted { id } = f.ok(Request::CaptureStart {
        switch: "br0".into(),
        port: "b".into(),
        direction: CaptureDirection::Both,
        snaplen: Some(20),
    }) else {
        panic!()
    };
    let bcast = frame([0xff; 6], [2, 0, 0, 0, 0, 1]);
    assert!(h[0].inject(&bcast));
    wait_for(|| !h[1].take_sent().is_empty());
    assert!(h[1].inject(&frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])));
    wait_for(|| !h[0].take_sent().is_empty());
    let mut packets = Vec::new();
    wait_for(|| {
        if let Ok(Response::CapturePackets { packets: p, lost }) = f.req(Request::CaptureRead {
            id,
            max: None,
            wait_ms: 0,
        }) {
            assert_eq!(lost, 0);
            packets.extend(p);
        }
        packets.len() >= 2
    });
    assert_eq!(packets[0].direction, CaptureDirection::Out);
    assert_eq!(packets[0].orig_len, 60);
    assert_eq!(
        packets[0].data, "ffffffffffff02000000000188b5000000000000",
        "cut at snaplen 20"
    );
    assert_eq!(packets[1].direction, CaptureDirection::In);
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    assert!(
        u128::from(packets[0].time_ns).abs_diff(now_ns) < 60_000_000_000,
        "wall clock time"
    );

    assert_eq!(f.rx_tx("br0", "a"), (1, 1));
    let snap = f.c.snapshot(None).unwrap();
    let text = crate::metrics::encode(&snap, crate::metrics::DaemonGauges::default());
    assert!(
        text.contains("weft_port_rx_packets_total{switch=\"br0\",port=\"a\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("weft_switch_fdb_entries{switch=\"br0\"} 2\n"),
        "{text}"
    );

    f.ok(Request::CaptureStop { id });
    assert_eq!(
        f.err(Request::CaptureRead {
            id,
            max: None,
            wait_ms: 0
        })
        .kind,
        ErrorKind::NotFound
    );
}

#[test]
fn captures_end_with_their_port_and_their_session_and_are_bounded() {
    let mut f = fixture(vec![switch("br0", &["a", "b"])]);
    let h = f.memory_ports("br0");
    let start = |f: &mut Fixture, port: &str| {
        f.req(Request::CaptureStart {
            switch: "br0".into(),
            port: port.into(),
            direction: CaptureDirection::In,
            snaplen: None,
        })
    };
    let Ok(Response::CaptureStarted { id }) = start(&mut f, "a") else {
        panic!()
    };
    assert!(h[0].inject(&frame([0xff; 6], [2, 0, 0, 0, 0, 1])));
    wait_for(|| !h[1].take_sent().is_empty());
    f.ok(Request::PortDel {
        switch: "br0".into(),
        name: "a".into(),
    });
    let Response::CapturePackets { packets, .. } = f.ok(Request::CaptureRead {
        id,
        max: None,
        wait_ms: 0,
    }) else {
        panic!()
    };
    assert_eq!(packets.len(), 1, "what was captured can still be read");
    let e = f.err(Request::CaptureRead {
        id,
        max: None,
        wait_ms: 0,
    });
    assert!(
        e.kind == ErrorKind::NotFound && e.message.contains("removed"),
        "{e:?}"
    );

    for _ in 0..MAX_CAPTURES {
        start(&mut f, "b").unwrap();
    }
    assert_eq!(
        start(&mut f, "b").unwrap_err().kind,
        ErrorKind::LimitReached
    );
    let mut session = std::mem::take(&mut f.session);
    f.c.end_session(&mut session);
    start(&mut f, "b").unwrap();
    assert_eq!(
        f.err(Request::CaptureStart {
            switch: "br0".into(),
            port: "b".into(),
            direction: CaptureDirection::In,
            snaplen: Some(5),
        })
        .kind,
        ErrorKind::Invalid
    );
}

mod on_demand;
mod port_kinds;
mod remote_macs;
mod tcp_link;
mod upcalls;

#[path = "lane_tests.rs"]
mod lanes;

#[test]
fn port_show_lists_every_nonzero_drop_reason_by_its_name() {
    use weft_switch::DropReason;
    let snap = weft_switch::PortCountersSnapshot {
        drops: DropReason::ALL
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, i as u64))
            .collect(),
        ..Default::default()
    };
    let info = super::ports::snapshot_info(&snap, &[]);
    for (i, reason) in DropReason::ALL.iter().enumerate() {
        assert_eq!(
            info.drops.get(reason.name()).copied(),
            (i > 0).then_some(i as u64),
            "{}",
            reason.name()
        );
    }
    assert!(info.drops.contains_key("rogue_ra") && info.drops.contains_key("mac_limit"));
}
