use std::io::Write;

use clap::Parser;
use weft_control::response::PortInfo;
use weft_control::rule::{ActionSpec, MatchSpec, RuleSpec};
use weft_control::state::{PortKind, PortSettings, State, SwitchSettings, SwitchState, VlanMode};
use weft_control::{CaptureDirection, ControlError, Request, Response};

use super::*;
use crate::cli::Cli;
use crate::client::Daemon;

fn parse(args: &[&str]) -> Cli {
    let mut argv = vec!["weft"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).unwrap()
}

fn request(args: &[&str]) -> Request {
    match plan(&parse(args).command).unwrap() {
        Plan::Call(r) => r,
        other => panic!("{args:?} is not a single request: {other:?}"),
    }
}

fn usage_error(args: &[&str]) -> clap::error::ErrorKind {
    let mut argv = vec!["weft"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).unwrap_err().kind()
}

#[test]
fn switch_add_fills_unset_settings_with_defaults() {
    assert_eq!(
        request(&["switch", "add", "br1", "--batch", "128", "--ageing", "600"]),
        Request::SwitchAdd {
            name: "br1".into(),
            settings: SwitchSettings {
                batch_size: 128,
                fdb_ageing_secs: 600,
                ..SwitchSettings::default()
            },
        }
    );
    assert_eq!(
        request(&[
            "switch",
            "add",
            "b",
            "--fdb-max",
            "1",
            "--fdb-per-port",
            "2",
            "--max-rules",
            "3",
            "--cache",
            "4"
        ]),
        Request::SwitchAdd {
            name: "b".into(),
            settings: SwitchSettings {
                fdb_max_entries: 1,
                fdb_max_per_port: 2,
                max_rules: 3,
                flow_cache_capacity: 4,
                ..SwitchSettings::default()
            },
        }
    );
}

#[test]
fn switch_del_and_list() {
    assert_eq!(
        request(&["switch", "del", "br1", "--force"]),
        Request::SwitchDel {
            name: "br1".into(),
            force: true
        }
    );
    assert_eq!(request(&["switch", "list"]), Request::SwitchList {});
    assert_eq!(request(&["switch", "ls"]), Request::SwitchList {});
}

#[test]
fn port_add_tap_with_all_options() {
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:vm1",
            "tap",
            "--ifname",
            "tap-vm1",
            "--netns",
            "blue",
            "--queues",
            "4",
            "--mtu",
            "9000",
            "--no-offloads",
            "--access",
            "10",
            "--no-learning"
        ]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vm1".into(),
            kind: PortKind::Tap {
                ifname: Some("tap-vm1".into()),
                netns: Some("blue".into()),
                queues: 4,
                mtu: 9000,
                offloads: false,
            },
            options: PortSettings {
                vlan: VlanMode::Access { vlan: 10 },
                flood_unknown_unicast: true,
                learning: false,
                ..PortSettings::default()
            },
        }
    );
}

/// `--no-create-switch` is taken before or after the port's kind and its options.
#[test]
fn port_add_no_create_switch_anywhere_on_the_line() {
    let create = |args: &[&str]| match request(args) {
        Request::PortAdd { create_switch, .. } => create_switch,
        other => panic!("not a port_add: {other:?}"),
    };
    assert!(create(&["port", "add", "lab:p1", "vhost-user"]));
    assert!(!create(&[
        "port",
        "add",
        "--no-create-switch",
        "lab:p1",
        "vhost-user"
    ]));
    assert!(!create(&[
        "port",
        "add",
        "lab:p1",
        "vhost-user",
        "--no-create-switch"
    ]));
    assert!(!create(&[
        "port",
        "add",
        "lab:p1",
        "tap",
        "--mtu",
        "9000",
        "--no-create-switch"
    ]));
}

#[test]
fn port_add_tap_defaults() {
    assert_eq!(
        request(&["port", "add", "br0:vm1", "tap"]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "vm1".into(),
            kind: PortKind::Tap {
                ifname: None,
                netns: None,
                queues: 1,
                mtu: 1500,
                offloads: true,
            },
            options: PortSettings::default(),
        }
    );
}

#[test]
fn port_add_af_packet_trunk() {
    assert_eq!(
        request(&[
            "port",
            "add",
            "br0:up",
            "af-packet",
            "--ifname",
            "eth1",
            "--trunk",
            "10,20",
            "--native",
            "1",
            "--no-flood-unknown"
        ]),
        Request::PortAdd {
            create_switch: true,
            switch: "br0".into(),
            name: "up".into(),
            kind: PortKind::AfPacket {
                ifname: "eth1".into()
            },
            options: PortSettings {
                vlan: VlanMode::Trunk {
                    vlans: vec![10, 20],
                    native: Some(1),
                },
                flood_unknown_unicast: false,
                learning: true,
                ..PortSettings::default()
            },
        }
    );
}

#[test]
fn port_option_conflicts_are_usage_errors() {
    use clap::error::ErrorKind::*;
    assert_eq!(
        usage_error(&["port", "add", "b:p", "tap", "--access", "1", "--trunk", "2"]),
        ArgumentConflict
    );
    assert_eq!(
        usage_error(&["port", "add", "b:p", "tap", "--native", "1"]),
        MissingRequiredArgument
    );
    assert_eq!(
        usage_error(&["port", "add", "b:p", "af-packet"]),
        MissingRequiredArgument
    );
    assert_eq!(usage_error(&["port", "add", "bp", "tap"]), ValueValidation);
    assert_eq!(usage_error(&["port", "add", ":p", "tap"]), ValueValidation);
    assert_eq!(
        usage_error(&["port", "set", "b:p", "--learning", "--no-learning"]),
        ArgumentConflict
    );
}

#[test]
fn port_del_list_show() {
    assert_eq!(
        request(&["port", "del", "br0:vm1"]),
        Request::PortDel {
            switch: "br0".into(),
            name: "vm1".into()
        }
    );
    assert_eq!(
        request(&["port", "list"]),
        Request::PortList { switch: None }
    );
    assert_eq!(
        request(&["port", "list", "br0"]),
        Request::PortList {
            switch: Some("br0".into())
        }
    );
    assert_eq!(
        request(&["port", "show", "br0:vm1"]),
        Request::PortShow {
            switch: "br0".into(),
            name: "vm1".into()
        }
    );
}

#[test]
fn port_set_changes_only_what_is_given() {
    let cli = parse(&["port", "set", "br0:vm1", "--trunk", "5", "--learning"]);
    let Plan::PortSet {
        switch,
        port,
        changes,
    } = plan(&cli.command).unwrap()
    else {
        panic!("not a port set")
    };
    assert_eq!((switch.as_str(), port.as_str()), ("br0", "vm1"));
    let current = PortSettings {
        vlan: VlanMode::Access { vlan: 3 },
        flood_unknown_unicast: false,
        learning: false,
        ..PortSettings::default()
    };
    assert_eq!(
        updated_settings(current, &changes).unwrap(),
        PortSettings {
            vlan: VlanMode::Trunk {
                vlans: vec![5],
                native: None
            },
            flood_unknown_unicast: false,
            learning: true,
            ..PortSettings::default()
        }
    );
}

#[test]
fn port_set_without_changes_is_a_usage_error() {
    let cli = parse(&["port", "set", "br0:vm1"]);
    let e = plan(&cli.command).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::USAGE);
}

/// Answers from a list, recording the requests.
struct Script {
    answers: Vec<Result<Response, ControlError>>,
    seen: Vec<Request>,
}

impl Daemon for Script {
    fn call_waiting(
        &mut self,
        request: Request,
        _extra: std::time::Duration,
    ) -> Result<Response, CliError> {
        self.seen.push(request);
        if self.answers.is_empty() {
            return Err(CliError::Protocol("script ran out".into()));
        }
        self.answers.remove(0).map_err(CliError::Daemon)
    }
}

#[test]
fn port_set_reads_then_writes_the_options() {
    let info = PortInfo {
        switch: "br0".into(),
        name: "vm1".into(),
        kind: PortKind::AfPacket {
            ifname: "eth1".into(),
        },
        options: PortSettings {
            vlan: VlanMode::Access { vlan: 3 },
            ..PortSettings::default()
        },
        mtu: 1500,
        offloads: vec![],
        failed: None,
        attached: None,
        guest_mtu: None,
        warnings: Vec::new(),
    };
    let mut d = Script {
        answers: vec![
            Ok(Response::Port {
                port: info,
                counters: Default::default(),
            }),
            Ok(Response::Done),
        ],
        seen: vec![],
    };
    let changes = PortChanges {
        learning: Some(false),
        ..PortChanges::default()
    };
    port_set(&mut d, "br0".into(), "vm1".into(), &changes).unwrap();
    assert_eq!(
        d.seen[1],
        Request::PortSet {
            switch: "br0".into(),
            name: "vm1".into(),
            options: PortSettings {
                vlan: VlanMode::Access { vlan: 3 },
                flood_unknown_unicast: true,
                learning: false,
                ..PortSettings::default()
            },
        }
    );
}

#[test]
fn fdb_commands() {
    assert_eq!(
        request(&["fdb", "show", "br0", "--vlan", "10", "--port", "vm1"]),
        Request::FdbShow {
            switch: "br0".into(),
            vlan: Some(10),
            port: Some("vm1".into())
        }
    );
    assert_eq!(
        request(&[
            "fdb",
            "add",
            "br0",
            "52:54:00:AB:00:01",
            "vm1",
            "--vlan",
            "10"
        ]),
        Request::FdbAdd {
            switch: "br0".into(),
            vlan: 10,
            mac: "52:54:00:ab:00:01".parse().unwrap(),
            port: "vm1".into()
        }
    );
    assert_eq!(
        request(&["fdb", "del", "br0", "52:54:00:00:00:01"]),
        Request::FdbDel {
            switch: "br0".into(),
            vlan: 0,
            mac: "52:54:00:00:00:01".parse().unwrap()
        }
    );
    assert_eq!(
        request(&[
            "fdb",
            "flush",
            "br0",
            "--port",
            "vm1",
            "--vlan",
            "3",
            "--dynamic"
        ]),
        Request::FdbFlush {
            switch: "br0".into(),
            port: Some("vm1".into()),
            vlan: Some(3),
            dynamic_only: true
        }
    );
    assert_eq!(
        usage_error(&["fdb", "add", "br0", "52:54:00", "vm1"]),
        clap::error::ErrorKind::ValueValidation
    );
}

#[test]
fn rule_add_parses_the_text() {
    assert_eq!(
        request(&[
            "rule",
            "add",
            "br0",
            "priority=5,in_port=a actions=output:b"
        ]),
        Request::RuleAdd {
            switch: "br0".into(),
            rule: RuleSpec {
                priority: 5,
                matches: MatchSpec {
                    in_port: Some("a".into()),
                    ..MatchSpec::default()
                },
                actions: vec![ActionSpec::Output("b".into())],
                cookie: 0,
            },
        }
    );
}

#[test]
fn rule_syntax_error_is_a_usage_error_with_a_caret() {
    let cli = parse(&["rule", "add", "br0", "in_port=a,dl_dts=1 actions=drop"]);
    let e = plan(&cli.command).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::USAGE);
    assert_eq!(
        e.to_string(),
        "unknown key 'dl_dts' at column 11: did you mean 'dl_dst'?"
    );
    let hint = e.hint().unwrap();
    assert!(
        hint.contains("  in_port=a,dl_dts=1 actions=drop\n            ^"),
        "{hint}"
    );
}

#[test]
fn rule_add_reads_json_rules() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        r#"{{"priority":3,"match":{{"vlan":7}},"actions":["flood"]}}"#
    )
    .unwrap();
    let path = f.path().to_str().unwrap();
    assert_eq!(
        request(&["rule", "add", "br0", "--json-rule", path]),
        Request::RuleAdd {
            switch: "br0".into(),
            rule: RuleSpec {
                priority: 3,
                matches: MatchSpec {
                    vlan: Some(7),
                    ..MatchSpec::default()
                },
                actions: vec![ActionSpec::Flood],
                cookie: 0,
            },
        }
    );
    let mut bad = tempfile::NamedTempFile::new().unwrap();
    write!(bad, r#"{{"priority":3,"actions":["fly"]}}"#).unwrap();
    let cli = parse(&[
        "rule",
        "add",
        "br0",
        "--json-rule",
        bad.path().to_str().unwrap(),
    ]);
    assert_eq!(
        plan(&cli.command).unwrap_err().exit_code(),
        crate::error::exit::REFUSED
    );
    assert_eq!(
        usage_error(&["rule", "add", "br0"]),
        clap::error::ErrorKind::MissingRequiredArgument
    );
}

#[test]
fn rule_del_list_stats() {
    assert_eq!(
        request(&["rule", "del", "br0", "7"]),
        Request::RuleDel {
            switch: "br0".into(),
            id: 7
        }
    );
    assert_eq!(
        request(&["rule", "list", "br0"]),
        Request::RuleList {
            switch: "br0".into()
        }
    );
    assert_eq!(request(&["stats"]), Request::Stats { switch: None });
    assert_eq!(
        request(&["stats", "br0"]),
        Request::Stats {
            switch: Some("br0".into())
        }
    );
    assert_eq!(request(&["hello"]), Request::Hello {});
    assert_eq!(request(&["config", "show"]), Request::ConfigShow {});
}

fn sample_state() -> State {
    State {
        version: 1,
        switches: vec![SwitchState {
            name: "br0".into(),
            settings: SwitchSettings::default(),
            ports: vec![],
            static_macs: vec![],
            rules: vec![],
            on_demand: false,
        }],
    }
}

#[test]
fn config_apply_takes_a_state_or_a_config_answer() {
    let state = sample_state();
    let mut bare = tempfile::NamedTempFile::new().unwrap();
    write!(bare, "{}", serde_json::to_string(&state).unwrap()).unwrap();
    assert_eq!(
        request(&[
            "config",
            "apply",
            bare.path().to_str().unwrap(),
            "--dry-run"
        ]),
        Request::ConfigApply {
            state: state.clone(),
            dry_run: true
        }
    );
    let mut answer = tempfile::NamedTempFile::new().unwrap();
    let wrapped = Response::Config {
        state: state.clone(),
    };
    write!(answer, "{}", crate::output::json(&wrapped)).unwrap();
    assert_eq!(
        request(&["config", "apply", answer.path().to_str().unwrap()]),
        Request::ConfigApply {
            state,
            dry_run: false
        }
    );
}

#[test]
fn invalid_state_file_names_the_line() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    write!(
        f,
        "{{\n  \"switches\": [\n    {{\"nmae\": \"br0\"}}\n  ]\n}}"
    )
    .unwrap();
    let cli = parse(&["config", "apply", f.path().to_str().unwrap()]);
    let e = plan(&cli.command).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::REFUSED);
    let msg = e.to_string();
    assert!(msg.contains("line 3"), "{msg}");
    assert!(msg.contains("nmae"), "{msg}");
}

#[test]
fn missing_state_file_is_a_local_failure() {
    let cli = parse(&["config", "apply", "/nonexistent/weft.json"]);
    let e = plan(&cli.command).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::GENERIC);
    assert_eq!(
        e.to_string(),
        "reading /nonexistent/weft.json: No such file or directory"
    );
}

#[test]
fn capture_and_top_are_plans_with_their_arguments() {
    let cli = parse(&[
        "capture",
        "br0:vm1",
        "-w",
        "x.pcap",
        "-c",
        "5",
        "--direction",
        "in",
        "--snaplen",
        "128",
    ]);
    let Plan::Capture(args) = plan(&cli.command).unwrap() else {
        panic!("not a capture")
    };
    assert_eq!(
        crate::capture::start_request(args),
        Request::CaptureStart {
            switch: "br0".into(),
            port: "vm1".into(),
            direction: CaptureDirection::In,
            snaplen: Some(128),
        }
    );
    assert_eq!(args.count, Some(5));
    assert_eq!(
        usage_error(&["capture", "br0:vm1", "-w", "x", "-c", "0"]),
        clap::error::ErrorKind::ValueValidation
    );
    let cli = parse(&["top", "--interval", "0.25"]);
    let Plan::Top(args) = plan(&cli.command).unwrap() else {
        panic!("not top")
    };
    assert_eq!(args.interval, std::time::Duration::from_millis(250));
    assert_eq!(
        usage_error(&["top", "--interval", "0"]),
        clap::error::ErrorKind::ValueValidation
    );
}

#[test]
fn connect_needs_a_token_file() {
    assert_eq!(
        usage_error(&["--connect", "h:1", "switch", "list"]),
        clap::error::ErrorKind::MissingRequiredArgument
    );
}

#[test]
fn durations_are_bounded() {
    use crate::cli::parse_secs;
    assert_eq!(parse_secs("0.5"), Ok(std::time::Duration::from_millis(500)));
    assert!(parse_secs("0").is_err());
    assert!(parse_secs("-1").is_err());
    assert!(parse_secs("1e-12").is_err());
    assert!(parse_secs("NaN").is_err());
    assert!(parse_secs("inf").is_err());
    assert!(parse_secs("1e300").is_err());
    assert!(parse_secs("soon").is_err());
}

const WORDS: &[&str] = &[
    "switch",
    "port",
    "fdb",
    "rule",
    "stats",
    "top",
    "capture",
    "config",
    "add",
    "del",
    "set",
    "list",
    "show",
    "flush",
    "apply",
    "tap",
    "af-packet",
    "br0",
    "br0:vm1",
    ":",
    "a:",
    "vm1",
    "--json",
    "--access",
    "--trunk",
    "--native",
    "--plain",
    "--vlan",
    "--port",
    "--dynamic",
    "--ifname",
    "--queues",
    "--mtu",
    "--force",
    "--batch",
    "-c",
    "-w",
    "--interval",
    "--duration",
    "--json-rule",
    "/nonexistent",
    "10",
    "0",
    "-1",
    "65536",
    "1,2,x",
    "0x10",
    "52:54:00:00:00:01",
    "actions=drop",
    "in_port=x actions=output:y",
    "priority=",
    "é",
    "",
    "--learning",
    "--no-learning",
    "--snaplen",
    "--direction",
    "in",
    "sideways",
    "--dry-run",
];

proptest::proptest! {
    #[test]
    fn no_command_line_panics(picks in proptest::collection::vec(0..WORDS.len(), 0..8)) {
        let mut argv = vec!["weft"];
        argv.extend(picks.iter().map(|&i| WORDS[i]));
        if let Ok(cli) = Cli::try_parse_from(argv) {
            let _ = plan(&cli.command);
        }
    }
}

mod port_kinds;
mod port_policy;
mod routes;
mod tcp_link;
