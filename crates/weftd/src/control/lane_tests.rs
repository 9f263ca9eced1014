//! A switch on several lanes (`settings.lanes`): one lane per worker, every change made on
//! each, counters and rule hits added up, what one lane learns forwarded by the others.

use weft_control::response::SwitchInfo;
use weft_switch::lanes::SharedTx;

use super::*;

/// `br0` on two lanes with ports `a`, `b`, `c`, on two workers.
fn two_lanes() -> Fixture {
    let mut conf = switch("br0", &["a", "b", "c"]);
    conf.settings.lanes = 2;
    fixture_with(
        State {
            version: 1,
            switches: vec![conf],
        },
        2,
    )
    .0
}

impl Fixture {
    /// In-memory ports behind `switch`'s ports: port `i` is received by lane `i % lanes`
    /// (as a vhost-user port's queue pairs are), every lane transmits through one half.
    fn memory_ports_spread(&mut self, name: &str) -> Vec<MemoryPortHandle> {
        let conf = self.c.switch_conf(name).unwrap().clone();
        let workers = self.c.switch_rt(name).unwrap().workers.clone();
        let lanes = workers.len();
        let mut handles = Vec::new();
        let sources = (0..conf.ports.len())
            .map(|i| {
                let (rx, tx, h) = memory_port(PortCaps::plain(1500), 256);
                handles.push(h);
                let mut rx = Some(rx);
                let halves = SharedTx::share(Box::new(tx), lanes)
                    .into_iter()
                    .enumerate()
                    .map(|(lane, tx)| PortHalves {
                        rx: (lane == i % lanes)
                            .then(|| rx.take())
                            .flatten()
                            .map(|r| Box::new(r) as Box<dyn weft_switch::PortRx>),
                        tx: Box::new(tx),
                    })
                    .collect();
                Source::Opened(Opened {
                    device: Device {
                        lanes: halves,
                        handle: crate::devices::memory_handle(),
                    },
                    failed: None,
                })
            })
            .collect();
        self.c.install(&conf, sources, workers).unwrap();
        handles
    }
}

#[test]
fn a_switch_on_two_lanes_runs_on_both_workers_and_forwards_what_either_lane_learned() {
    let mut f = two_lanes();
    let Response::Switches { switches } = f.ok(Request::SwitchList {}) else {
        panic!()
    };
    let SwitchInfo { workers, .. } = &switches[0];
    assert_eq!(workers, &vec![0, 1]);
    let h = f.memory_ports_spread("br0");
    let (ma, mb) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    // a (lane 0) floods; b (lane 1) answers a: unicast, so c never sees it.
    assert!(h[0].inject(&frame([0xff; 6], ma)));
    wait_for(|| !h[1].take_sent().is_empty());
    assert_eq!(h[2].take_sent().len(), 1);
    // Lane 1 takes it in while its own ports are quiet (at its next look at them).
    let lanes = |f: &mut Fixture| {
        let Ok(Response::Stats { switches, .. }) = f.req(Request::Stats { switch: None }) else {
            panic!()
        };
        switches[0].lanes.clone()
    };
    wait_for(|| lanes(&mut f)[1].applied == 1);
    let now = lanes(&mut f);
    assert_eq!((now[0].lane, now[0].worker, now[0].posted), (0, 0, 1));
    assert_eq!((now[1].lane, now[1].worker), (1, 1));
    assert!(h[1].inject(&frame(ma, mb)));
    wait_for(|| !h[0].take_sent().is_empty());
    std::thread::sleep(Duration::from_millis(50));
    assert!(h[2].take_sent().is_empty(), "lane 1 knew where a is");
    // The FDB the first lane shows holds what the second learned.
    let Response::Fdb { entries } = f.ok(Request::FdbShow {
        switch: "br0".into(),
        vlan: None,
        port: None,
    }) else {
        panic!()
    };
    let ports: Vec<&str> = entries.iter().map(|e| e.port.as_str()).collect();
    assert_eq!(ports, vec!["a", "b"]);
    // Counters add up over the lanes.
    assert_eq!(f.rx_tx("br0", "b"), (1, 1));
    let Response::Stats { switches, .. } = f.ok(Request::Stats { switch: None }) else {
        panic!()
    };
    assert_eq!(switches[0].rx_packets, 2, "one frame on each lane");
}

#[test]
fn rules_go_on_every_lane_and_their_hits_add_up() {
    let mut f = two_lanes();
    let h = f.memory_ports_spread("br0");
    let Response::RuleAdded { id } = f.ok(Request::RuleAdd {
        switch: "br0".into(),
        rule: drop_rule(),
    }) else {
        panic!()
    };
    let to_dropped = frame([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 7]);
    assert!(h[0].inject(&to_dropped)); // lane 0
    assert!(h[1].inject(&to_dropped)); // lane 1
    wait_for(|| {
        let Ok(Response::Rules { rules }) = f.req(Request::RuleList {
            switch: "br0".into(),
        }) else {
            return false;
        };
        rules[0].packets == 2
    });
    assert!(h.iter().all(|p| p.take_sent().is_empty()));
    f.ok(Request::RuleDel {
        switch: "br0".into(),
        id,
    });
    assert!(h[1].inject(&to_dropped));
    wait_for(|| h[0].take_sent().len() == 1);
}

#[test]
fn more_lanes_than_workers_are_refused_with_the_fix() {
    let mut f = fixture(Vec::new());
    let e = f.err(Request::SwitchAdd {
        name: "br0".into(),
        settings: SwitchSettings {
            lanes: 2,
            ..SwitchSettings::default()
        },
    });
    assert!(e.message.contains("2 lanes"), "{}", e.message);
    assert!(e.hint.unwrap().contains("workers"));
    assert!(f.saved().switches.is_empty(), "nothing saved");
    let e = f.err(Request::SwitchAdd {
        name: "br0".into(),
        settings: SwitchSettings {
            lanes: 0,
            ..SwitchSettings::default()
        },
    });
    assert!(
        e.message.contains("lanes 0 is out of range"),
        "{}",
        e.message
    );
}

#[test]
fn config_apply_cannot_change_a_running_switchs_lanes() {
    let mut f = two_lanes();
    let mut target = f.c.state().clone();
    target.switches[0].settings.lanes = 1;
    let e = f.err(Request::ConfigApply {
        state: target,
        dry_run: false,
    });
    assert!(e.message.contains("runs on 2 lane(s)"), "{}", e.message);
    assert_eq!(f.saved().switches[0].settings.lanes, 2);
}

#[test]
fn a_switch_on_two_lanes_rebuilt_by_config_apply_keeps_its_ports_on_their_lanes() {
    let mut f = two_lanes();
    let h = f.memory_ports_spread("br0");
    let mut target = f.c.state().clone();
    target.switches[0].settings.batch_size = 32;
    f.ok(Request::ConfigApply {
        state: target,
        dry_run: false,
    });
    let (ma, mb) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    assert!(h[0].inject(&frame([0xff; 6], ma)));
    wait_for(|| !h[1].take_sent().is_empty());
    assert_eq!(h[2].take_sent().len(), 1);
    // b is still received by the second lane, which still hears what the first learned.
    assert!(h[1].inject(&frame(ma, mb)));
    wait_for(|| !h[0].take_sent().is_empty());
    std::thread::sleep(Duration::from_millis(50));
    assert!(h[2].take_sent().is_empty());
    let Response::Switches { switches } = f.ok(Request::SwitchList {}) else {
        panic!()
    };
    assert_eq!(switches[0].workers, vec![0, 1]);
}

/// What each lane of `br0` holds as `port`'s policy: (security, storm, MAC limit).
fn lane_policies(
    f: &Fixture,
    port: &str,
) -> Vec<(
    weft_switch::PortSecurity,
    weft_switch::StormControl,
    Option<weft_switch::MacLimit>,
)> {
    let id = f.c.port_rt("br0", port).unwrap().id;
    let workers = f.c.switch_rt("br0").unwrap().workers.clone();
    f.c.pool
        .on_lanes(&workers, "br0", move |sw, _| {
            let o = sw.port_options(id).unwrap();
            (o.security.clone(), *o.storm.config(), o.mac_limit)
        })
        .unwrap()
}

fn policy() -> PortSettings {
    use weft_control::state::{
        MacLimitAction, MacLimitSettings, PortSecuritySettings, RateSettings, StormSettings,
    };
    PortSettings {
        security: PortSecuritySettings {
            allowed_macs: vec!["52:54:00:00:00:01".parse().unwrap()],
            allowed_ips: vec!["10.0.0.5".parse().unwrap()],
            ..PortSecuritySettings::default()
        },
        storm: StormSettings {
            broadcast: Some(RateSettings {
                pps: Some(100),
                bps: None,
            }),
            ..StormSettings::default()
        },
        mac_limit: Some(MacLimitSettings {
            max: 2,
            action: MacLimitAction::Drop,
        }),
        ..PortSettings::default()
    }
}

#[test]
fn port_set_puts_a_ports_policy_on_every_lane_and_in_the_state_file() {
    let mut f = two_lanes();
    f.ok(Request::PortSet {
        switch: "br0".into(),
        name: "a".into(),
        options: policy(),
    });
    let lanes = lane_policies(&f, "a");
    assert_eq!(lanes.len(), 2);
    for (security, storm, limit) in lanes {
        assert_eq!(security.allowed_macs.len(), 1);
        assert_eq!(security.allowed_ips[0].len, 32);
        assert_eq!(storm.broadcast.unwrap().pps, Some(100));
        assert_eq!(limit.unwrap().max, 2);
    }
    assert_eq!(f.saved().switches[0].ports[0].options, policy());
    // And off again.
    f.ok(Request::PortSet {
        switch: "br0".into(),
        name: "a".into(),
        options: PortSettings::default(),
    });
    for (security, storm, limit) in lane_policies(&f, "a") {
        assert!(!security.is_enabled() && !storm.is_enabled() && limit.is_none());
    }
}

#[test]
fn config_apply_changes_a_running_ports_policy_on_every_lane() {
    let mut f = two_lanes();
    let mut target = f.c.state().clone();
    target.switches[0].ports[1].options = policy();
    let Response::Applied { changes } = f.ok(Request::ConfigApply {
        state: target.clone(),
        dry_run: false,
    }) else {
        panic!()
    };
    assert_eq!(changes, vec!["switch br0: change options of port b"]);
    for (security, storm, limit) in lane_policies(&f, "b") {
        assert!(security.is_enabled());
        assert!(storm.is_enabled());
        assert!(limit.is_some());
    }
    assert_eq!(f.saved(), target);
}

#[test]
fn an_unusable_policy_is_refused_before_anything_changes() {
    let mut f = two_lanes();
    let mut options = policy();
    options.security.allowed_ips = vec!["10.0.0.5/8".parse().unwrap()];
    let e = f.err(Request::PortSet {
        switch: "br0".into(),
        name: "a".into(),
        options,
    });
    assert!(
        e.message.contains("10.0.0.5/8 is not a prefix"),
        "{}",
        e.message
    );
    assert_eq!(
        f.saved().switches[0].ports[0].options,
        PortSettings::default()
    );
}
