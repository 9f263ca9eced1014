//! A controller's requests: upcall subscriptions read with their losses, and packet-out
//! out of a port or through the switch, hostile ones refused.

use weft_control::response::{UpcallInfo, UpcallReason};

use super::*;

const ARP: u16 = 0x0806;

/// `br0` with in-memory ports a, b, c and a rule sending ARP to the controller.
fn controlled() -> (Fixture, Vec<MemoryPortHandle>) {
    let mut f = fixture(vec![switch("br0", &["a", "b", "c"])]);
    let h = f.memory_ports("br0");
    f.ok(Request::RuleAdd {
        switch: "br0".into(),
        rule: RuleSpec {
            priority: 100,
            matches: MatchSpec {
                ethertype: Some(ARP),
                ..MatchSpec::default()
            },
            actions: vec![ActionSpec::Controller],
            cookie: 5,
        },
    });
    (f, h)
}

fn arp_request(src: u8) -> Vec<u8> {
    let mut f = frame([0xff; 6], [2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&ARP.to_be_bytes());
    f
}

fn subscribe(f: &mut Fixture, switch: Option<&str>, queue: Option<u32>) -> u64 {
    let Response::UpcallSubscribed { id } = f.ok(Request::UpcallSubscribe {
        switch: switch.map(str::to_string),
        queue,
    }) else {
        panic!("upcall_subscribe answered something else")
    };
    id
}

fn read(f: &mut Fixture, id: u64) -> (Vec<UpcallInfo>, u64) {
    match f.ok(Request::UpcallRead {
        id,
        max: None,
        wait_ms: 0,
    }) {
        Response::Upcalls { upcalls, lost } => (upcalls, lost),
        other => panic!("upcall_read answered {other:?}"),
    }
}

/// Reads until `n` upcalls came.
fn read_n(f: &mut Fixture, id: u64, n: usize) -> (Vec<UpcallInfo>, u64) {
    let mut all = Vec::new();
    let mut lost = 0;
    wait_for(|| {
        let (u, l) = read(f, id);
        all.extend(u);
        lost = l;
        all.len() >= n
    });
    (all, lost)
}

/// Waits for the frames `port` sends next.
fn sent(port: &MemoryPortHandle) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    wait_for(|| {
        got.extend(port.take_sent().into_iter().map(|(f, _)| f));
        !got.is_empty()
    });
    got
}

fn packet_out(
    f: &mut Fixture,
    output: Option<&str>,
    in_port: Option<&str>,
    frame: &str,
) -> Result<Response, ControlError> {
    f.req(Request::PacketOut {
        switch: "br0".into(),
        output: output.map(str::to_string),
        in_port: in_port.map(str::to_string),
        normal: false,
        frame: frame.into(),
    })
}

#[test]
fn a_controller_reads_upcalls_and_answers_out_of_a_port_or_through_the_switch() {
    let (mut f, h) = controlled();
    let id = subscribe(&mut f, Some("br0"), None);
    let request = arp_request(1);
    assert!(h[0].inject(&request));
    let (upcalls, lost) = read_n(&mut f, id, 1);
    assert_eq!(
        upcalls,
        vec![UpcallInfo {
            switch: "br0".into(),
            port: "a".into(),
            reason: UpcallReason::Action,
            cookie: Some(5),
            priority: Some(100),
            orig_len: 60,
            data: weft_control::codec::hex_encode(&request),
        }]
    );
    assert_eq!(lost, 0);
    assert!(
        h[1].take_sent().is_empty() && h[2].take_sent().is_empty(),
        "not flooded"
    );

    // An answer out of the asking port, exactly as given.
    let reply = frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 9]);
    packet_out(
        &mut f,
        Some("a"),
        None,
        &weft_control::codec::hex_encode(&reply),
    )
    .unwrap();
    assert_eq!(sent(&h[0]), vec![reply]);
    assert!(h[1].take_sent().is_empty() && h[2].take_sent().is_empty());

    // The request re-injected on its port meets its rule again: up, not flooded. With
    // normal it goes to the bridge alone, and floods as if no controller were there.
    let hex = weft_control::codec::hex_encode(&request);
    packet_out(&mut f, None, Some("a"), &hex).unwrap();
    assert_eq!(read_n(&mut f, id, 1).0.len(), 1);
    assert!(h[1].take_sent().is_empty() && h[2].take_sent().is_empty());
    f.ok(Request::PacketOut {
        switch: "br0".into(),
        output: None,
        in_port: Some("a".into()),
        normal: true,
        frame: hex,
    });
    assert_eq!(sent(&h[1]), vec![request.clone()]);
    assert_eq!(sent(&h[2]), vec![request.clone()]);
    assert_eq!(read_n(&mut f, id, 0).0.len(), 0, "not sent up again");

    // A frame no rule takes floods as the bridge would, and teaches it nothing.
    let other = frame([0xff; 6], [2, 0, 0, 0, 0, 7]);
    packet_out(
        &mut f,
        None,
        Some("a"),
        &weft_control::codec::hex_encode(&other),
    )
    .unwrap();
    assert_eq!(sent(&h[1]), vec![other.clone()]);
    assert_eq!(sent(&h[2]), vec![other]);
    assert!(h[0].take_sent().is_empty(), "never out of its in_port");
    let Response::Fdb { entries } = f.ok(Request::FdbShow {
        switch: "br0".into(),
        vlan: None,
        port: None,
    }) else {
        panic!()
    };
    assert!(
        entries.iter().all(|e| e.mac != "02:00:00:00:00:07"),
        "an injected frame's source is not learned: {entries:?}"
    );

    let snap = f.c.snapshot(None).unwrap();
    let text = crate::metrics::encode(&snap, crate::metrics::DaemonGauges::default());
    for line in [
        "weft_switch_upcalls_total{switch=\"br0\"} 2\n",
        "weft_switch_packet_out_sent_total{switch=\"br0\"} 1\n",
        "weft_switch_packet_out_injected_total{switch=\"br0\"} 3\n",
        "weft_switch_upcalls_unclaimed_total{switch=\"br0\"} 0\n",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    f.ok(Request::UpcallUnsubscribe { id });
    assert_eq!(
        f.err(Request::UpcallRead {
            id,
            max: None,
            wait_ms: 0
        })
        .kind,
        ErrorKind::NotFound
    );
}

#[test]
fn a_slow_subscription_loses_and_is_told_while_another_and_the_switch_go_on() {
    let (mut f, h) = controlled();
    let slow = subscribe(&mut f, None, Some(2));
    let fast = subscribe(&mut f, Some("br0"), None);
    for i in 1..=6 {
        assert!(h[0].inject(&arp_request(i)));
        // One batch each, so the slow queue fills across batches.
        wait_for(|| h[0].pending_rx() == 0);
    }
    let (all, lost) = read_n(&mut f, fast, 6);
    assert_eq!((all.len(), lost), (6, 0));
    let (some, lost) = read(&mut f, slow);
    assert_eq!((some.len(), lost), (2, 4));
    let snap = f.c.snapshot(None).unwrap();
    let text = crate::metrics::encode(&snap, crate::metrics::DaemonGauges::default());
    assert!(
        text.contains("weft_switch_upcall_subscriber_lost_total{switch=\"br0\"} 4\n"),
        "{text}"
    );
    // The switch still forwards what no rule sends up.
    assert!(h[0].inject(&frame([0xff; 6], [2, 0, 0, 0, 0, 8])));
    sent(&h[1]);
}

#[test]
fn unread_upcalls_are_counted_unclaimed_and_subscriptions_end_with_session_or_idleness() {
    let (mut f, h) = controlled();
    assert!(h[0].inject(&arp_request(1)));
    wait_for(|| {
        let snap = f.c.snapshot(None).unwrap();
        crate::metrics::encode(&snap, crate::metrics::DaemonGauges::default())
            .contains("weft_switch_upcalls_unclaimed_total{switch=\"br0\"} 1\n")
    });

    assert_eq!(
        f.err(Request::UpcallSubscribe {
            switch: Some("nope".into()),
            queue: None
        })
        .kind,
        ErrorKind::NotFound
    );
    for queue in [0, 8193] {
        let e = f.err(Request::UpcallSubscribe {
            switch: None,
            queue: Some(queue),
        });
        assert_eq!(e.kind, ErrorKind::Invalid, "{queue}");
        assert!(e.message.contains("1 to 8192"), "{e:?}");
    }
    for _ in 0..crate::control::upcalls::MAX_SUBSCRIPTIONS {
        subscribe(&mut f, None, None);
    }
    let e = f.err(Request::UpcallSubscribe {
        switch: None,
        queue: None,
    });
    assert_eq!(e.kind, ErrorKind::LimitReached);
    let mut session = std::mem::take(&mut f.session);
    f.c.end_session(&mut session);
    assert_eq!(
        f.c.upcall_subscriptions(),
        0,
        "they went with the connection"
    );

    let id = subscribe(&mut f, None, None);
    f.c.upcalls
        .end_idle(Instant::now() + crate::control::upcalls::IDLE_LIMIT + Duration::from_secs(1));
    let e = f.err(Request::UpcallRead {
        id,
        max: None,
        wait_ms: 0,
    });
    assert!(e.kind == ErrorKind::NotFound && e.hint.is_some(), "{e:?}");
}

#[test]
fn hostile_packet_outs_are_refused_with_a_clear_error_and_send_nothing() {
    let (mut f, h) = controlled();
    let good = weft_control::codec::hex_encode(&frame([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]));
    let too_big = weft_control::codec::hex_encode(&vec![0x02; 1515]);
    let huge = "00".repeat(70_000);
    type Case<'a> = (
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
        ErrorKind,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (Some("a"), None, "zz", ErrorKind::Invalid, "not hex"),
        (Some("a"), None, "abc", ErrorKind::Invalid, "not hex"),
        (
            Some("a"),
            None,
            "0011",
            ErrorKind::Invalid,
            "shorter than an Ethernet header",
        ),
        (Some("a"), None, &too_big, ErrorKind::Invalid, "MTU 1500"),
        (None, Some("a"), &too_big, ErrorKind::Invalid, "MTU 1500"),
        (
            Some("a"),
            None,
            &huge,
            ErrorKind::Invalid,
            "longer than any port takes",
        ),
        (Some("zz"), None, &good, ErrorKind::NotFound, "no port"),
        (None, Some("zz"), &good, ErrorKind::NotFound, "no port"),
        (None, None, &good, ErrorKind::Invalid, "exactly one"),
        (
            Some("a"),
            Some("b"),
            &good,
            ErrorKind::Invalid,
            "exactly one",
        ),
    ];
    for (output, in_port, frame, kind, says) in cases {
        let e = packet_out(&mut f, output, in_port, frame).unwrap_err();
        assert_eq!(e.kind, kind, "{e:?}");
        assert!(e.message.contains(says), "{says:?} in {e:?}");
    }
    let e = f.err(Request::PacketOut {
        switch: "nope".into(),
        output: Some("a".into()),
        in_port: None,
        normal: false,
        frame: good.clone(),
    });
    assert_eq!(e.kind, ErrorKind::NotFound);
    let e = f.err(Request::PacketOut {
        switch: "br0".into(),
        output: Some("a".into()),
        in_port: None,
        normal: true,
        frame: good,
    });
    assert!(e.message.contains("normal goes with in_port"), "{e:?}");
    std::thread::sleep(Duration::from_millis(50));
    for port in &h {
        assert!(port.take_sent().is_empty(), "nothing was sent");
    }
    let snap = f.c.snapshot(None).unwrap();
    let text = crate::metrics::encode(&snap, crate::metrics::DaemonGauges::default());
    assert!(
        text.contains("weft_switch_packet_out_refused_total{switch=\"br0\"} 2\n"),
        "the two the switch checked: {text}"
    );
}
