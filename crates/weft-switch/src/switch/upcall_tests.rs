//! Upcalls handed to subscriptions after each batch, and frames a controller sends.

use std::sync::Arc;

use weft_packet::MacAddr;

use super::deliver::PacketOutError;
use super::tests::{frame, mac, rule, Rig, T0};
use super::*;
use crate::flow_match::FlowMatch;
use crate::flow_table::Action;
use crate::upcall::{RuleRef, UpcallReason, UpcallSubscription};

/// A rig of `n` ports whose switch sends every frame to the controller (cookie 42,
/// priority 7) and hands upcalls to a hub.
fn controlled(n: usize) -> (Rig, Arc<UpcallHub>) {
    let mut r = Rig::new(n);
    let mut up = rule(7, FlowMatch::default(), &[Action::Controller]);
    up.cookie = 42;
    r.sw.add_rule(up).unwrap();
    let hub = Arc::new(UpcallHub::new());
    r.sw.set_upcall_hub(Some(Arc::clone(&hub)));
    (r, hub)
}

fn subscribe(hub: &UpcallHub, switch: Option<&str>, capacity: usize) -> Arc<UpcallSubscription> {
    let s = Arc::new(UpcallSubscription::new(
        switch.map(str::to_string),
        capacity,
        2048,
    ));
    hub.subscribe(Arc::clone(&s));
    s
}

type Seen = (
    String,
    String,
    UpcallReason,
    Option<RuleRef>,
    usize,
    Vec<u8>,
);

fn take(s: &UpcallSubscription) -> Vec<Seen> {
    let mut seen = Vec::new();
    s.drain(usize::MAX, |u| {
        seen.push((
            u.switch.to_string(),
            u.port.to_string(),
            u.reason,
            u.rule,
            u.orig_len,
            u.data.to_vec(),
        ))
    });
    seen
}

#[test]
fn upcalls_reach_a_subscriber_after_the_batch_with_port_rule_and_bytes() {
    let (mut r, hub) = controlled(2);
    let s = subscribe(&hub, Some("br0"), 16);
    let f = frame(MacAddr::BROADCAST, mac(1), 60);
    r.send(1, &f);
    let seen = take(&s);
    assert_eq!(
        seen,
        vec![(
            "br0".to_string(),
            "p1".to_string(),
            UpcallReason::Action,
            Some(RuleRef {
                cookie: 42,
                priority: 7
            }),
            60,
            f
        )]
    );
    assert_eq!(
        r.sw.drain_upcalls(|_| {}),
        0,
        "the lane's queue was emptied"
    );
    assert!(r.sent(0).is_empty(), "the rule only sends up");
    assert_eq!(r.sw.stats().upcalls.unclaimed, 0);
}

#[test]
fn upcalls_with_no_subscriber_are_dropped_and_counted_as_unclaimed() {
    let (mut r, hub) = controlled(2);
    let other = subscribe(&hub, Some("br9"), 16);
    for _ in 0..3 {
        r.send(0, &frame(MacAddr::BROADCAST, mac(1), 60));
    }
    assert!(
        take(&other).is_empty(),
        "another switch's subscription gets nothing"
    );
    let stats = r.sw.stats().upcalls;
    assert_eq!((stats.queued, stats.unclaimed), (3, 3));
    assert_eq!(
        r.sw.drain_upcalls(|_| {}),
        0,
        "nothing piles up in the lane"
    );
}

#[test]
fn a_slow_subscriber_loses_and_counts_while_another_gets_everything() {
    let (mut r, hub) = controlled(2);
    let slow = subscribe(&hub, None, 1);
    let fast = subscribe(&hub, Some("br0"), 64);
    for i in 0..5u8 {
        r.send(0, &frame(MacAddr::BROADCAST, mac(i + 1), 60));
    }
    assert_eq!(take(&fast).len(), 5);
    assert_eq!(take(&slow).len(), 1);
    assert_eq!(slow.lost(), 4);
    assert_eq!(fast.lost(), 0);
    assert_eq!(r.sw.stats().upcalls.subscriber_lost, 4);
    // Once read, the slow one takes again.
    r.send(0, &frame(MacAddr::BROADCAST, mac(9), 60));
    assert_eq!(take(&slow).len(), 1);
}

#[test]
fn without_a_hub_upcalls_wait_for_drain_upcalls() {
    let mut r = Rig::new(2);
    r.sw.add_rule(rule(1, FlowMatch::default(), &[Action::Controller]))
        .unwrap();
    r.send(0, &frame(MacAddr::BROADCAST, mac(1), 60));
    let mut rules = Vec::new();
    assert_eq!(r.sw.drain_upcalls(|u| rules.push(u.rule.is_some())), 1);
    assert_eq!(rules, vec![true]);
}

#[test]
fn send_out_transmits_the_frame_as_it_is_and_counts_it() {
    let mut r = Rig::new(3);
    let f = frame(mac(2), mac(1), 60);
    r.sw.send_out(r.ports[2].0, &f, T0).unwrap();
    assert_eq!(r.sent(2), vec![f]);
    assert!(r.sent(1).is_empty() && r.sent(0).is_empty());
    assert_eq!(r.counters(2).tx_packets, 1);
    assert_eq!(r.sw.stats().packet_out.sent, 1);
    assert_eq!(r.sw.fdb().lookup(0, mac(1), T0), None, "nothing learned");
}

#[test]
fn hostile_packet_outs_are_refused_with_their_reason_and_counted() {
    let mut r = Rig::new(2);
    let p = r.ports[1].0;
    assert_eq!(
        r.sw.send_out(p, &[0; 13], T0),
        Err(PacketOutError::TooShort(13))
    );
    assert_eq!(
        r.sw.inject(p, &[], Pipeline::Rules, T0),
        Err(PacketOutError::TooShort(0))
    );
    let big = frame(mac(2), mac(1), 1515);
    assert!(matches!(
        r.sw.send_out(p, &big, T0),
        Err(PacketOutError::TooBig {
            len: 1515,
            mtu: 1500,
            ..
        })
    ));
    assert!(matches!(
        r.sw.inject(p, &big, Pipeline::Rules, T0),
        Err(PacketOutError::TooBig { .. })
    ));
    // Exactly the MTU fits, tagged or not.
    r.sw.send_out(p, &frame(mac(2), mac(1), 1514), T0).unwrap();
    let mut tagged = frame(mac(2), mac(1), 1514);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    r.sw.send_out(p, &tagged, T0).unwrap();
    assert_eq!(
        r.sw.send_out(PortId(77), &frame(mac(2), mac(1), 60), T0),
        Err(PacketOutError::NoSuchPort(PortId(77)))
    );
    assert_eq!(
        r.sw.inject(PortId(77), &frame(mac(2), mac(1), 60), Pipeline::Normal, T0),
        Err(PacketOutError::NoSuchPort(PortId(77)))
    );
    let stats = r.sw.stats().packet_out;
    assert_eq!((stats.sent, stats.refused, stats.injected), (2, 6, 0));
    assert_eq!(r.sent(1).len(), 2);
}

#[test]
fn send_out_to_a_full_port_is_refused_and_counted_as_its_drop() {
    let mut r = Rig::with_queues(&[1024, 1]);
    let p = r.ports[1].0;
    r.sw.send_out(p, &frame(mac(2), mac(1), 60), T0).unwrap();
    assert_eq!(
        r.sw.send_out(p, &frame(mac(2), mac(1), 60), T0),
        Err(PacketOutError::TxQueueFull)
    );
    assert_eq!(
        r.counters(1)
            .drops(crate::counters::DropReason::TxQueueFull),
        1
    );
}

#[test]
fn an_injected_frame_runs_the_pipeline_but_teaches_the_fdb_nothing() {
    let mut r = Rig::new(3);
    // A station behind p2 is known; a controller injects a frame naming it as source on p0.
    r.send(2, &frame(MacAddr::BROADCAST, mac(5), 60));
    r.sent(0);
    r.sent(1);
    let f = frame(MacAddr::BROADCAST, mac(5), 60);
    r.sw.inject(r.ports[0].0, &f, Pipeline::Rules, T0).unwrap();
    assert_eq!(
        r.sent(1),
        vec![f.clone()],
        "flooded like a received broadcast"
    );
    assert_eq!(r.sent(2), vec![f]);
    assert!(r.sent(0).is_empty(), "never back out of its in-port");
    assert_eq!(
        r.sw.fdb().lookup(0, mac(5), T0),
        Some(r.ports[2].0),
        "the station stays where it was"
    );
    assert_eq!(
        r.counters(0).rx_packets,
        1,
        "counted as the in-port's receive"
    );
    assert_eq!(r.sw.stats().packet_out.injected, 1);
}

#[test]
fn an_injected_frame_matches_rules_on_its_in_port() {
    let (mut r, hub) = controlled(2);
    let s = subscribe(&hub, None, 8);
    r.sw.inject(
        r.ports[1].0,
        &frame(MacAddr::BROADCAST, mac(3), 60),
        Pipeline::Rules,
        T0,
    )
    .unwrap();
    let seen = take(&s);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1, "p1");
}

#[test]
fn a_frame_injected_to_the_normal_pipeline_skips_the_rule_that_sent_it_up() {
    let (mut r, hub) = controlled(3);
    let s = subscribe(&hub, None, 8);
    let f = frame(MacAddr::BROADCAST, mac(3), 60);
    r.sw.inject(r.ports[1].0, &f, Pipeline::Normal, T0).unwrap();
    assert!(take(&s).is_empty(), "no upcall: the rule never saw it");
    assert_eq!(r.sent(0), vec![f.clone()], "flooded by the bridge");
    assert_eq!(r.sent(2), vec![f.clone()]);
    assert!(r.sent(1).is_empty());
    assert_eq!(r.sw.fdb().lookup(0, mac(3), T0), None, "nor learned from");
    // The rules are back for the next frame, received or injected.
    r.sw.inject(r.ports[1].0, &f, Pipeline::Rules, T0).unwrap();
    assert_eq!(take(&s).len(), 1);
    assert!(r.sent(0).is_empty());
}
