//! `weft route` (routes as flow rules tagged with the route cookie) and `weft remote-mac`.

use weft_control::response::RuleInfo;

use super::*;
use crate::commands::route::{route_of, ROUTE_COOKIE};

fn route_cmd(args: &[&str]) -> crate::cli_overlay::RouteCmd {
    let mut argv = vec!["weft", "route"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).unwrap().command {
        crate::cli::Command::Route(cmd) => cmd,
        other => panic!("not a route command: {other:?}"),
    }
}

fn run_script(args: &[&str], answers: Vec<Result<Response, ControlError>>) -> (Script, String) {
    let mut script = Script {
        answers,
        seen: Vec::new(),
    };
    let out = route::run(&mut script, &route_cmd(args), false).unwrap();
    (script, out)
}

fn rule(id: u64, rule: RuleSpec) -> RuleInfo {
    RuleInfo {
        id,
        rule,
        packets: 5,
        bytes: 300,
    }
}

const A: &str = "52:54:00:00:00:01";
const B: &str = "52:54:00:00:00:02";

#[test]
fn a_route_is_a_mac_rule_with_the_route_cookie() {
    let (script, out) = run_script(
        &[
            "add",
            "br0",
            "--src",
            A,
            "--dst",
            "52:54:00:00:00:0B",
            "--to",
            "vm2",
        ],
        vec![Ok(Response::RuleAdded { id: 7 })],
    );
    assert_eq!(out, "7\n");
    let expected = RuleSpec {
        priority: 100,
        matches: MatchSpec {
            src_mac: Some(A.parse().unwrap()),
            dst_mac: Some("52:54:00:00:00:0b".parse().unwrap()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output("vm2".into())],
        cookie: ROUTE_COOKIE,
    };
    assert_eq!(
        script.seen,
        [Request::RuleAdd {
            switch: "br0".into(),
            rule: expected.clone(),
        }]
    );
    // `any` is a wildcard; the rule reads back as the same route.
    let (script, _) = run_script(
        &[
            "add",
            "br0",
            "--dst",
            "any",
            "--to",
            "vx",
            "--priority",
            "9",
        ],
        vec![Ok(Response::RuleAdded { id: 8 })],
    );
    let Request::RuleAdd { rule: any, .. } = &script.seen[0] else {
        panic!("{:?}", script.seen)
    };
    assert_eq!(any.matches, MatchSpec::default());
    let back = route_of(&rule(8, any.clone())).unwrap();
    assert_eq!(
        (back.src.as_str(), back.dst.as_str(), back.to.as_str()),
        ("any", "any", "vx")
    );
    assert_eq!(back.priority, 9);
    assert!(route_of(&rule(7, expected)).is_some());
}

#[test]
fn a_route_with_a_remote_is_one_route_add_request_carrying_the_remote() {
    let (script, out) = run_script(
        &[
            "add",
            "br0",
            "--dst",
            B,
            "--to",
            "vx",
            "--remote",
            "192.0.2.3",
        ],
        vec![Ok(Response::RuleAdded { id: 1 })],
    );
    assert_eq!(out, "1\n");
    assert_eq!(
        script.seen,
        [Request::RouteAdd {
            switch: "br0".into(),
            rule: RuleSpec {
                priority: 100,
                matches: MatchSpec {
                    dst_mac: Some(B.parse().unwrap()),
                    ..MatchSpec::default()
                },
                actions: vec![ActionSpec::Output("vx".into())],
                cookie: ROUTE_COOKIE,
            },
            remote: Some("192.0.2.3".parse().unwrap()),
        }]
    );
    // Without a destination MAC there is no entry to pin: refused before any request.
    let mut script = Script {
        answers: Vec::new(),
        seen: Vec::new(),
    };
    let cmd = route_cmd(&["add", "br0", "--to", "vx", "--remote", "192.0.2.3"]);
    let e = route::run(&mut script, &cmd, false).unwrap_err();
    assert!(e.render().contains("--dst"), "{}", e.render());
    assert!(script.seen.is_empty());
}

#[test]
fn route_list_shows_only_routes_and_del_removes_the_matching_ones() {
    let route_rule = |src: Option<&str>, dst: &str, to: &str| RuleSpec {
        priority: 100,
        matches: MatchSpec {
            src_mac: src.map(|m| m.parse().unwrap()),
            dst_mac: Some(dst.parse().unwrap()),
            ..MatchSpec::default()
        },
        actions: vec![ActionSpec::Output(to.into())],
        cookie: ROUTE_COOKIE,
    };
    let mut not_a_route = route_rule(None, B, "vm2");
    not_a_route.cookie = 0;
    let mut more_than_macs = route_rule(None, B, "vm2");
    more_than_macs.matches.in_port = Some("vm1".into());
    let listed = Response::Rules {
        rules: vec![
            rule(1, route_rule(Some(A), B, "vm2")),
            rule(2, not_a_route),
            rule(3, more_than_macs),
            rule(4, route_rule(None, B, "vx")),
        ],
    };
    let (_, out) = run_script(&["list", "br0"], vec![Ok(listed.clone())]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[1].contains(A) && lines[1].contains("vm2"), "{out}");
    assert!(lines[2].contains("any") && lines[2].contains("vx"), "{out}");

    // By source and destination: only route 4 (source any) goes.
    let (script, _) = run_script(
        &["del", "br0", "--dst", B],
        vec![Ok(listed.clone()), Ok(Response::Done)],
    );
    assert_eq!(
        script.seen[1..],
        [Request::RuleDel {
            switch: "br0".into(),
            id: 4
        }]
    );
    // A rule that is not a route is not deleted as one.
    let mut script = Script {
        answers: vec![Ok(listed)],
        seen: Vec::new(),
    };
    let e = route::run(&mut script, &route_cmd(&["del", "br0", "--id", "2"]), false).unwrap_err();
    assert!(matches!(&e, CliError::Daemon(c) if c.kind == weft_control::ErrorKind::NotFound));
    assert_eq!(script.seen.len(), 1);
}

#[test]
fn remote_mac_commands_are_one_request_each() {
    assert_eq!(
        request(&[
            "remote-mac",
            "add",
            "br0:vx",
            "52:54:00:00:00:0A",
            "192.0.2.2"
        ]),
        Request::RemoteMacAdd {
            switch: "br0".into(),
            port: "vx".into(),
            mac: "52:54:00:00:00:0a".parse().unwrap(),
            remote: "192.0.2.2".parse().unwrap(),
        }
    );
    assert_eq!(
        request(&["remote-mac", "del", "br0:vx", B]),
        Request::RemoteMacDel {
            switch: "br0".into(),
            port: "vx".into(),
            mac: B.parse().unwrap(),
        }
    );
    assert_eq!(
        request(&["remote-mac", "show", "br0:vx"]),
        Request::RemoteMacShow {
            switch: "br0".into(),
            port: "vx".into(),
            mac: None,
        }
    );
    use clap::error::ErrorKind::ValueValidation;
    assert_eq!(
        usage_error(&["remote-mac", "add", "br0:vx", "nonsense", "192.0.2.2"]),
        ValueValidation
    );
    assert_eq!(
        usage_error(&[
            "port",
            "add",
            "br0:vx",
            "vxlan",
            "--local",
            "192.0.2.1",
            "--vni",
            "1",
            "--remote-mac",
            "52:54:00:00:00:01"
        ]),
        ValueValidation
    );
}
