use proptest::prelude::*;

use super::*;
use crate::rule::{ActionSpec, MatchSpec, RuleSpec};
use crate::state::{PortKind, PortSettings, VhostMode, VlanMode};

fn round_trip(request: Request) {
    let env = RequestEnvelope {
        version: PROTOCOL_VERSION,
        id: 42,
        token: None,
        request,
    };
    let line = encode_request(&env);
    assert!(line.ends_with('\n'));
    assert_eq!(decode_request(line.trim_end().as_bytes()).unwrap(), env);
}

#[test]
fn every_request_kind_round_trips() {
    round_trip(Request::Hello {});
    round_trip(Request::SwitchList {});
    round_trip(Request::PortAdd {
        create_switch: true,
        switch: "br0".into(),
        name: "tap1".into(),
        kind: PortKind::Tap {
            ifname: None,
            netns: Some("ns1".into()),
            queues: 2,
            mtu: 9000,
            offloads: false,
        },
        options: PortSettings {
            vlan: VlanMode::Trunk {
                vlans: vec![10, 20],
                native: Some(1),
            },
            ..PortSettings::default()
        },
    });
    round_trip(Request::RuleAdd {
        switch: "br0".into(),
        rule: RuleSpec {
            priority: 10,
            matches: MatchSpec {
                in_port: Some("tap1".into()),
                ip_dst: Some("10.0.0.0/8".parse().unwrap()),
                ..MatchSpec::default()
            },
            actions: vec![
                ActionSpec::PushVlan(5),
                ActionSpec::Output("tap2".into()),
                ActionSpec::Controller,
            ],
            cookie: 7,
        },
    });
}

#[test]
fn request_wire_form_is_the_documented_one() {
    let env = decode_request(br#"{"version":1,"id":7,"request":{"op":"switch_add","name":"br1"}}"#)
        .unwrap();
    assert_eq!(env.id, 7);
    assert!(matches!(env.request, Request::SwitchAdd { ref name, .. } if name == "br1"));
}

fn error_of(line: &[u8]) -> (Option<u64>, ErrorKind) {
    let e = decode_request(line).unwrap_err();
    (e.id, e.error.kind)
}

#[test]
fn malformed_requests_get_typed_errors() {
    use ErrorKind::*;
    let cases: &[(&[u8], Option<u64>, ErrorKind)] = &[
        (b"", None, BadRequest),
        (b"not json", None, BadRequest),
        (b"{", None, BadRequest),
        (b"[]", None, BadRequest),
        (b"null", None, BadRequest),
        (b"{}", None, BadRequest),
        (br#"{"id":3,"request":{"op":"hello"}}"#, Some(3), BadRequest),
        (br#"{"version":"1","id":3,"request":{"op":"hello"}}"#, Some(3), BadRequest),
        (br#"{"version":2,"id":3,"request":{"op":"hello"}}"#, Some(3), UnsupportedVersion),
        (br#"{"version":1,"request":{"op":"hello"}}"#, None, BadRequest),
        (br#"{"version":1,"id":-1,"request":{"op":"hello"}}"#, None, BadRequest),
        (br#"{"version":1,"id":3}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"explode"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"switch_add"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"switch_add","name":7}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"switch_add","name":"a","colour":"red"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"extra":1,"request":{"op":"hello"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"hello","x":1}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"config_show","switch":"b"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"port_add","switch":"b","name":"p","kind":{"type":"warp"}}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"fdb_add","switch":"b","vlan":70000,"mac":"x","port":"p"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"rule_del","switch":"b","id":"seven"}}"#, Some(3), BadRequest),
        (br#"{"version":1,"id":3,"request":{"op":"rule_add","switch":"b","rule":{"actions":[{"teleport":1}]}}}"#, Some(3), BadRequest),
    ];
    for (line, id, kind) in cases {
        assert_eq!(
            error_of(line),
            (*id, *kind),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn oversized_request_is_too_large() {
    let line = vec![b' '; MAX_REQUEST_BYTES + 1];
    assert_eq!(error_of(&line), (None, ErrorKind::TooLarge));
}

#[test]
fn responses_round_trip_ok_and_error() {
    for result in [
        Ok(Response::Done),
        Ok(Response::RuleAdded { id: 9 }),
        Err(ControlError::not_found("no switch \"x\"").with_hint("weft switch list")),
    ] {
        let env = ResponseEnvelope {
            version: PROTOCOL_VERSION,
            id: 5,
            result,
        };
        let line = encode_response(&env);
        assert_eq!(decode_response(line.as_bytes()).unwrap(), env);
    }
    assert!(decode_response(br#"{"version":1,"id":1}"#).is_err());
    assert!(decode_response(
        br#"{"version":1,"id":1,"ok":{"kind":"done"},"error":{"kind":"internal","message":"x"}}"#
    )
    .is_err());
}

#[test]
fn remote_mac_entries_carry_their_source_and_old_ones_without_it_still_parse() {
    use crate::response::RemoteMacEntry;
    let entry = |source: &str, is_static| RemoteMacEntry {
        mac: "02:00:00:00:00:02".into(),
        remote: "10.0.0.2".into(),
        is_static,
        source: source.into(),
        age_secs: None,
    };
    let env = ResponseEnvelope {
        version: PROTOCOL_VERSION,
        id: 5,
        result: Ok(Response::RemoteMacs {
            entries: vec![entry("directory", false)],
        }),
    };
    let line = encode_response(&env);
    assert!(line.contains(r#""source":"directory""#), "{line}");
    assert_eq!(decode_response(line.as_bytes()).unwrap(), env);

    // From a daemon that predates the field: named by `is_static`.
    let old = br#"{"version":1,"id":5,"ok":{"kind":"remote_macs","entries":[{"mac":"02:00:00:00:00:02","remote":"10.0.0.2","is_static":true},{"mac":"02:00:00:00:00:03","remote":"10.0.0.2","is_static":false,"age_secs":4}]}}"#;
    let Ok(Response::RemoteMacs { entries }) = decode_response(old).unwrap().result else {
        panic!("not remote MACs");
    };
    let names: Vec<_> = entries.iter().map(RemoteMacEntry::source_name).collect();
    assert_eq!(names, ["static", "learned"]);
    assert_eq!(entry("directory", false).source_name(), "directory");
}

#[test]
fn hex_round_trips_and_rejects_garbage() {
    assert_eq!(hex_encode(&[0, 0xab, 0xff]), "00abff");
    assert_eq!(hex_decode("00abff"), Some(vec![0, 0xab, 0xff]));
    assert_eq!(hex_decode("0"), None);
    assert_eq!(hex_decode("zz"), None);
}

proptest! {
    #[test]
    fn arbitrary_lines_never_panic(line in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_request(&line);
        let _ = decode_response(&line);
    }

    #[test]
    fn hex_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        prop_assert_eq!(hex_decode(&hex_encode(&bytes)), Some(bytes));
    }
}

#[test]
fn vhost_user_and_vxlan_port_kinds_round_trip() {
    for kind in [
        PortKind::VhostUser {
            socket: Some("/run/weft/vm1.sock".into()),
            mode: VhostMode::Server,
            mtu: 9000,
            dispatch: None,
            notify: None,
            queues: 1,
        },
        PortKind::VhostUser {
            socket: None,
            mode: VhostMode::Server,
            mtu: 1500,
            dispatch: None,
            notify: None,
            queues: 1,
        },
        PortKind::VhostUser {
            socket: Some("/run/qemu/vm2.sock".into()),
            mode: VhostMode::Client,
            mtu: 1500,
            dispatch: None,
            notify: None,
            queues: 1,
        },
        PortKind::Vxlan {
            local: "10.0.0.1".parse().unwrap(),
            vni: crate::Vni::new(42).unwrap(),
            remotes: vec!["10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap()],
            netns: Some("under".into()),
            learning: true,
            port: Some(4790),
            remote_macs: vec![a_remote_mac()],
            remote_ageing: 300,
            directory: false,
        },
    ] {
        round_trip(Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "p1".into(),
            kind,
            options: PortSettings::default(),
        });
    }
}

/// The port kind of a `port_add` request line.
fn port_add_kind(line: &[u8]) -> PortKind {
    let Request::PortAdd { kind, .. } = decode_request(line).unwrap().request else {
        panic!("not a port_add")
    };
    kind
}

#[test]
fn new_port_kinds_take_their_defaults_and_snake_case_names() {
    assert_eq!(
        port_add_kind(br#"{"version":1,"id":1,"request":{"op":"port_add","switch":"br0","name":"vm1","kind":{"type":"vhost_user"}}}"#),
        PortKind::VhostUser {
            socket: None,
            mode: VhostMode::Server,
            mtu: 1500,
            dispatch: None,
            notify: None,
            queues: 1,
        }
    );
    assert_eq!(
        port_add_kind(br#"{"version":1,"id":1,"request":{"op":"port_add","switch":"br0","name":"vm1","kind":{"type":"vhost_user","mode":"client","socket":"/q.sock"}}}"#),
        PortKind::VhostUser {
            socket: Some("/q.sock".into()),
            mode: VhostMode::Client,
            mtu: 1500,
            dispatch: None,
            notify: None,
            queues: 1,
        }
    );
    assert_eq!(
        port_add_kind(br#"{"version":1,"id":1,"request":{"op":"port_add","switch":"br0","name":"vx","kind":{"type":"vxlan","local":"10.0.0.1","vni":7}}}"#),
        PortKind::Vxlan {
            local: "10.0.0.1".parse().unwrap(),
            vni: crate::Vni::new(7).unwrap(),
            remotes: Vec::new(),
            netns: None,
            learning: false,
            port: None,
            remote_macs: Vec::new(),
            remote_ageing: 300,
            directory: false,
        }
    );
}

fn a_remote_mac() -> crate::state::RemoteMac {
    crate::state::RemoteMac {
        mac: "02:00:00:00:00:02".parse().unwrap(),
        remote: "10.0.0.2".parse().unwrap(),
    }
}

#[test]
fn remote_mac_requests_round_trip() {
    round_trip(Request::RemoteMacAdd {
        switch: "br0".into(),
        port: "vx".into(),
        mac: "02:00:00:00:00:02".parse().unwrap(),
        remote: "10.0.0.2".parse().unwrap(),
    });
    round_trip(Request::RemoteMacDel {
        switch: "br0".into(),
        port: "vx".into(),
        mac: "02:00:00:00:00:02".parse().unwrap(),
    });
    round_trip(Request::RemoteMacShow {
        switch: "br0".into(),
        port: "vx".into(),
        mac: None,
    });
    round_trip(Request::RemoteMacShow {
        switch: "br0".into(),
        port: "vx".into(),
        mac: Some("02:00:00:00:00:02".parse().unwrap()),
    });
}

#[test]
fn route_add_round_trips_with_and_without_a_remote() {
    let rule = RuleSpec {
        priority: 100,
        matches: MatchSpec {
            dst_mac: Some("02:00:00:00:00:02".parse().unwrap()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output("vx".into())],
        cookie: 1,
    };
    round_trip(Request::RouteAdd {
        switch: "br0".into(),
        rule: rule.clone(),
        remote: Some("10.0.0.2".parse().unwrap()),
    });
    round_trip(Request::RouteAdd {
        switch: "br0".into(),
        rule,
        remote: None,
    });
}

#[test]
fn upcalls_round_trip_and_read_as_documented() {
    use crate::response::{UpcallInfo, UpcallReason};
    let upcall = UpcallInfo {
        switch: "br0".into(),
        port: "tap1".into(),
        reason: UpcallReason::Action,
        cookie: Some(7),
        priority: Some(100),
        orig_len: 42,
        data: "ffffffffffff".into(),
    };
    let env = ResponseEnvelope {
        version: PROTOCOL_VERSION,
        id: 3,
        result: Ok(Response::Upcalls {
            upcalls: vec![upcall],
            lost: 2,
        }),
    };
    let line = encode_response(&env);
    assert_eq!(
        line.trim_end(),
        r#"{"version":1,"id":3,"ok":{"kind":"upcalls","upcalls":[{"switch":"br0","port":"tap1","reason":"action","cookie":7,"priority":100,"orig_len":42,"data":"ffffffffffff"}],"lost":2}}"#
    );
    assert_eq!(decode_response(line.as_bytes()).unwrap(), env);
    round_trip(Request::PacketOut {
        switch: "br0".into(),
        output: None,
        in_port: Some("p".into()),
        normal: true,
        frame: "00".into(),
    });
}
