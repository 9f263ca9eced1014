//! Switches on demand (VALE): `port add` to a switch that does not exist creates it with
//! default settings, and a switch made so goes away with its last port.

use super::port_kinds::vhost;
use super::*;

fn add(
    f: &mut Fixture,
    switch: &str,
    port: &str,
    create_switch: bool,
) -> Result<Response, ControlError> {
    f.req(Request::PortAdd {
        switch: switch.into(),
        name: port.into(),
        kind: vhost(None),
        options: PortSettings::default(),
        create_switch,
    })
}

fn del(f: &mut Fixture, switch: &str, port: &str) {
    f.ok(Request::PortDel {
        switch: switch.into(),
        name: port.into(),
    });
}

fn switches(f: &mut Fixture) -> Vec<String> {
    let Response::Switches { switches } = f.ok(Request::SwitchList {}) else {
        panic!("not a switch list")
    };
    switches.into_iter().map(|s| s.name).collect()
}

#[test]
fn a_port_added_to_a_missing_switch_creates_it_and_its_last_port_takes_it_away() {
    let mut f = fixture(vec![switch("br0", &[])]);
    add(&mut f, "lab", "p1", true).unwrap();
    add(&mut f, "lab", "p2", true).unwrap();
    assert_eq!(switches(&mut f), ["br0", "lab"]);
    let saved = f.saved();
    let lab = saved.switches.iter().find(|s| s.name == "lab").unwrap();
    assert!(lab.on_demand);
    assert_eq!(lab.settings, SwitchSettings::default());
    del(&mut f, "lab", "p1");
    assert_eq!(switches(&mut f), ["br0", "lab"]);
    del(&mut f, "lab", "p2");
    assert_eq!(switches(&mut f), ["br0"]);
    assert!(f.saved().switches.iter().all(|s| s.name != "lab"));
}

#[test]
fn a_switch_made_with_switch_add_stays_when_its_last_port_goes() {
    let mut f = fixture(vec![switch("br0", &[])]);
    add(&mut f, "br0", "p1", true).unwrap();
    del(&mut f, "br0", "p1");
    assert_eq!(switches(&mut f), ["br0"]);
}

#[test]
fn no_create_switch_refuses_a_missing_switch_and_changes_nothing() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let before = f.file();
    let e = add(&mut f, "lab", "p1", false).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e:?}");
    assert_eq!(f.file(), before);
}

#[test]
fn a_port_that_cannot_be_added_leaves_no_switch_behind() {
    let mut f = fixture(vec![switch("br0", &[])]);
    let before = f.file();
    // A bad switch name, and a bad port name on a good one.
    let e = add(&mut f, "bad name", "p1", true).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e:?}");
    assert!(e.message.contains("creating switch"), "{}", e.message);
    let e = add(&mut f, "lab", "bad name", true).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e:?}");
    assert_eq!(switches(&mut f), ["br0"]);
    assert_eq!(f.file(), before);
}

#[test]
fn a_switch_on_demand_with_rules_left_stays_after_its_last_port() {
    let mut f = fixture(vec![switch("br0", &[])]);
    add(&mut f, "lab", "p1", true).unwrap();
    f.ok(Request::RuleAdd {
        switch: "lab".into(),
        rule: drop_rule(),
    });
    del(&mut f, "lab", "p1");
    assert_eq!(switches(&mut f), ["br0", "lab"]);
}

#[test]
fn a_switch_on_demand_comes_back_from_the_state_file_and_still_goes_with_its_last_port() {
    let mut f = fixture(vec![switch("br0", &[])]);
    add(&mut f, "lab", "p1", true).unwrap();
    let saved = f.saved();
    let (mut g, failures) = fixture_with(saved, 1);
    assert!(failures.is_empty(), "{failures:?}");
    assert!(g
        .saved()
        .switches
        .iter()
        .any(|s| s.name == "lab" && s.on_demand));
    drop(f);
    del(&mut g, "lab", "p1");
    assert_eq!(switches(&mut g), ["br0"]);
}

#[test]
fn an_empty_switch_on_demand_left_in_the_state_file_goes_at_the_next_start() {
    let mut left = switch("lab", &[]);
    left.on_demand = true;
    let (mut f, failures) = fixture_with(
        State {
            version: 1,
            switches: vec![switch("br0", &[]), left],
        },
        1,
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(switches(&mut f), ["br0"]);
    assert!(f.saved().switches.iter().all(|s| s.name != "lab"));
}
