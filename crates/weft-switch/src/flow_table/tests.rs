use weft_packet::MacAddr;

use super::*;
use crate::flow_match::MacMatch;
use crate::types::{PortId, MAX_PORTS};

fn mac(last: u8) -> MacAddr {
    MacAddr([0x52, 0x54, 0, 0, 0, last])
}

fn key(in_port: u16, dst: u8) -> FlowKey {
    FlowKey {
        in_port: PortId(in_port),
        dst_mac: mac(dst),
        src_mac: mac(0xaa),
        ethertype: 0x0806,
        ..FlowKey::default()
    }
}

fn to_dst(dst: u8) -> FlowMatch {
    FlowMatch {
        dst_mac: Some(MacMatch::exact(mac(dst))),
        ..FlowMatch::ANY
    }
}

fn output(port: u16) -> ActionList {
    ActionList::single(Action::Output(PortId(port)))
}

fn rule(priority: u16, matches: FlowMatch, actions: ActionList) -> FlowRule {
    FlowRule::new(priority, matches, actions)
}

fn actions(list: &[Action]) -> ActionList {
    ActionList::from_slice(list).unwrap()
}

#[test]
fn empty_table_matches_nothing() {
    let table = FlowTable::default();
    assert!(table.is_empty());
    assert_eq!(table.len(), 0);
    assert_eq!(table.lookup(&key(1, 2)), None);
}

#[test]
fn higher_priority_rule_wins_whatever_the_insertion_order() {
    let mut table = FlowTable::new(16);
    let low = table.insert(rule(10, FlowMatch::ANY, output(1))).unwrap();
    let high = table.insert(rule(20, to_dst(2), output(2))).unwrap();
    let mid = table.insert(rule(15, to_dst(2), output(3))).unwrap();
    assert_eq!(table.lookup(&key(0, 2)).map(|(id, _)| id), Some(high));
    assert_eq!(table.lookup(&key(0, 9)).map(|(id, _)| id), Some(low));
    table.remove(high);
    assert_eq!(table.lookup(&key(0, 2)).map(|(id, _)| id), Some(mid));
}

#[test]
fn equal_priority_ties_go_to_the_earlier_inserted_rule() {
    let mut table = FlowTable::new(16);
    let first = table.insert(rule(5, to_dst(2), output(1))).unwrap();
    let _second = table.insert(rule(5, FlowMatch::ANY, output(2))).unwrap();
    let (id, found) = table.lookup(&key(0, 2)).unwrap();
    assert_eq!(id, first);
    assert_eq!(found.actions, output(1));
}

#[test]
fn removing_the_winner_restores_the_next_rule() {
    let mut table = FlowTable::new(16);
    let a = table.insert(rule(5, to_dst(2), output(1))).unwrap();
    let b = table.insert(rule(5, to_dst(2), output(2))).unwrap();
    let c = table.insert(rule(1, FlowMatch::ANY, output(3))).unwrap();
    assert_eq!(table.remove(a).map(|r| r.actions), Some(output(1)));
    assert_eq!(table.lookup(&key(0, 2)).map(|(id, _)| id), Some(b));
    table.remove(b);
    assert_eq!(table.lookup(&key(0, 2)).map(|(id, _)| id), Some(c));
    table.remove(c);
    assert_eq!(table.lookup(&key(0, 2)), None);
}

#[test]
fn removing_an_unknown_rule_changes_nothing() {
    let mut table = FlowTable::new(16);
    let id = table.insert(rule(5, to_dst(2), output(1))).unwrap();
    table.remove(id);
    let generation = table.generation();
    assert_eq!(table.remove(id), None);
    assert_eq!(table.remove(RuleId(12345)), None);
    assert_eq!(table.generation(), generation);
}

#[test]
fn generation_bumps_on_insert_remove_and_clear() {
    let mut table = FlowTable::new(16);
    let g0 = table.generation();
    let id = table.insert(rule(5, to_dst(2), output(1))).unwrap();
    let g1 = table.generation();
    assert_ne!(g1, g0);
    table.remove(id);
    let g2 = table.generation();
    assert!(g2 != g1 && g2 != g0);
    table.clear();
    assert!(![g0, g1, g2].contains(&table.generation()));
}

#[test]
fn clear_removes_every_rule_and_never_reuses_ids() {
    let mut table = FlowTable::new(16);
    let old = table.insert(rule(5, to_dst(2), output(1))).unwrap();
    table.insert(rule(1, FlowMatch::ANY, output(2))).unwrap();
    table.clear();
    assert!(table.is_empty());
    assert_eq!(table.lookup(&key(0, 2)), None);
    let new = table.insert(rule(5, to_dst(2), output(1))).unwrap();
    assert_ne!(new, old);
    assert_eq!(table.get(old), None);
    table.record_hit(old, 1, 1);
    assert_eq!(table.stats(new), Some(RuleStats::default()));
}

#[test]
fn rules_lists_in_lookup_order_with_counters() {
    let mut table = FlowTable::new(16);
    let a = table.insert(rule(1, FlowMatch::ANY, output(1))).unwrap();
    let b = table.insert(rule(9, to_dst(2), output(2))).unwrap();
    let c = table.insert(rule(9, to_dst(3), output(3))).unwrap();
    table.record_hit(c, 2, 128);
    let listed: Vec<_> = table.rules().map(|(id, _, stats)| (id, stats)).collect();
    let hit = RuleStats {
        packets: 2,
        bytes: 128,
    };
    assert_eq!(
        listed,
        vec![
            (b, RuleStats::default()),
            (c, hit),
            (a, RuleStats::default())
        ]
    );
}

#[test]
fn record_hit_accumulates_per_rule_and_ignores_unknown_ids() {
    let mut table = FlowTable::new(16);
    let a = table.insert(rule(1, FlowMatch::ANY, output(1))).unwrap();
    let b = table.insert(rule(2, to_dst(2), output(2))).unwrap();
    table.record_hit(a, 3, 300);
    table.record_hit(a, 2, 200);
    table.record_hit(b, 1, 64);
    table.record_hit(RuleId(999), 7, 7);
    // Counters follow the rule when others move around it.
    table.insert(rule(3, to_dst(3), output(3))).unwrap();
    assert_eq!(
        table.stats(a),
        Some(RuleStats {
            packets: 5,
            bytes: 500
        })
    );
    assert_eq!(
        table.stats(b),
        Some(RuleStats {
            packets: 1,
            bytes: 64
        })
    );
    table.record_hit(b, u64::MAX, u64::MAX);
    assert_eq!(table.stats(b).map(|s| s.packets), Some(u64::MAX));
}

#[test]
fn table_full_is_rejected_and_leaves_the_table_unchanged() {
    let mut table = FlowTable::new(2);
    table.insert(rule(1, FlowMatch::ANY, output(1))).unwrap();
    table.insert(rule(2, to_dst(2), output(2))).unwrap();
    let generation = table.generation();
    let err = table.insert(rule(3, to_dst(3), output(3))).unwrap_err();
    assert_eq!(err, FlowError::TableFull { max_rules: 2 });
    assert!(err.to_string().contains("max_rules"));
    assert_eq!(table.len(), 2);
    assert_eq!(table.generation(), generation);
}

#[test]
fn max_rules_is_clamped() {
    assert_eq!(FlowTable::new(usize::MAX).max_rules(), MAX_FLOW_RULES);
    assert_eq!(FlowTable::default().max_rules(), DEFAULT_MAX_RULES);
}

/// Inserting `bad` fails with `expected` and leaves the table exactly as it was.
fn assert_rejected(bad: FlowRule, expected: FlowError) {
    let mut table = FlowTable::new(16);
    let good = table.insert(rule(1, FlowMatch::ANY, output(1))).unwrap();
    let generation = table.generation();
    let err = table.insert(bad).unwrap_err();
    assert_eq!(err, expected);
    assert!(!err.to_string().is_empty());
    assert_eq!(table.len(), 1);
    assert_eq!(table.generation(), generation);
    assert_eq!(table.lookup(&key(0, 2)).map(|(id, _)| id), Some(good));
    // The next id follows on as if the failed insert never happened.
    assert_eq!(
        table.insert(rule(1, FlowMatch::ANY, output(1))),
        Ok(RuleId(good.0 + 1))
    );
}

#[test]
fn empty_action_list_is_rejected() {
    assert_rejected(
        rule(9, FlowMatch::ANY, ActionList::new()),
        FlowError::EmptyActions,
    );
    assert!(FlowError::EmptyActions.to_string().contains("Drop"));
}

#[test]
fn more_than_max_actions_is_rejected() {
    let list = [Action::Flood; MAX_ACTIONS + 1];
    assert_eq!(
        ActionList::from_slice(&list),
        Err(FlowError::TooManyActions)
    );
    let mut full = ActionList::from_slice(&list[..MAX_ACTIONS]).unwrap();
    assert_eq!(full.len(), MAX_ACTIONS);
    assert_eq!(full.push(Action::Flood), Err(FlowError::TooManyActions));
    assert_eq!(full.len(), MAX_ACTIONS);
}

#[test]
fn drop_with_other_actions_is_rejected() {
    assert_rejected(
        rule(
            9,
            FlowMatch::ANY,
            actions(&[Action::Output(PortId(1)), Action::Drop]),
        ),
        FlowError::DropWithOtherActions,
    );
    let drop_only = rule(9, FlowMatch::ANY, ActionList::single(Action::Drop));
    assert_eq!(drop_only.validate(), Ok(()));
}

#[test]
fn second_push_vlan_is_rejected() {
    let list = actions(&[
        Action::PushVlan(10),
        Action::Output(PortId(1)),
        Action::PushVlan(20),
    ]);
    assert_rejected(rule(9, FlowMatch::ANY, list), FlowError::DuplicatePushVlan);
}

#[test]
fn second_pop_vlan_is_rejected() {
    let list = actions(&[Action::PopVlan, Action::PopVlan, Action::Normal]);
    assert_rejected(rule(9, FlowMatch::ANY, list), FlowError::DuplicatePopVlan);
}

#[test]
fn pop_then_push_vlan_is_a_valid_retag() {
    let list = actions(&[
        Action::PopVlan,
        Action::PushVlan(20),
        Action::Output(PortId(2)),
    ]);
    assert_eq!(list.validate(), Ok(()));
}

#[test]
fn push_vlan_outside_1_to_4094_is_rejected() {
    for vlan in [0, 4095, u16::MAX] {
        let list = actions(&[Action::PushVlan(vlan), Action::Flood]);
        assert_rejected(
            rule(9, FlowMatch::ANY, list),
            FlowError::InvalidPushVlan { vlan },
        );
    }
    for vlan in [1, 4094] {
        assert_eq!(
            ActionList::single(Action::PushVlan(vlan)).validate(),
            Ok(())
        );
    }
}

#[test]
fn output_to_a_port_beyond_max_ports_is_rejected() {
    let port = PortId(u16::try_from(MAX_PORTS).unwrap());
    assert_rejected(
        rule(9, FlowMatch::ANY, ActionList::single(Action::Output(port))),
        FlowError::OutputPortOutOfRange { port },
    );
}

#[test]
fn invalid_match_is_rejected_by_insert() {
    let bad = FlowMatch {
        ip_proto: Some(6),
        ..FlowMatch::ANY
    };
    assert_rejected(
        rule(9, bad, output(1)),
        FlowError::MissingIpEthertype {
            field: crate::flow_match::MatchField::IpProto,
        },
    );
}

#[test]
fn action_lists_compare_by_their_actions_only() {
    let mut a = ActionList::new();
    a.push(Action::Flood).unwrap();
    assert_eq!(a, ActionList::single(Action::Flood));
    assert_ne!(a, ActionList::single(Action::Normal));
    assert_eq!(a.as_slice(), &[Action::Flood]);
    assert_eq!(format!("{a:?}"), "[Flood]");
}

#[test]
fn lookup_returns_the_installed_rule() {
    let mut table = FlowTable::new(4);
    let installed = FlowRule {
        cookie: 0xfeed,
        ..rule(
            7,
            to_dst(2),
            actions(&[Action::PushVlan(5), Action::Output(PortId(1))]),
        )
    };
    let id = table.insert(installed).unwrap();
    assert_eq!(table.lookup(&key(0, 2)), Some((id, &installed)));
    assert_eq!(table.get(id), Some(&installed));
}
