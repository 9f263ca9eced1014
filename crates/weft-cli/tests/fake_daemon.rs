//! The whole client path — argument parsing, the socket, the protocol, output, errors and exit
//! codes — against a fake weftd that answers canned responses.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{code, stderr, stdout, weft_cmd, FakeDaemon};
use weft_control::codec::hex_encode;
use weft_control::response::{
    CapturedPacket, FdbEntry, PortCounters, PortInfo, PortStats, SwitchInfo, SwitchStats,
};
use weft_control::state::{PortKind, PortSettings, SwitchSettings, VlanMode};
use weft_control::{CaptureDirection, ControlError, ErrorKind, Request, Response};

fn br0() -> SwitchInfo {
    SwitchInfo {
        name: "br0".into(),
        settings: SwitchSettings::default(),
        ports: 0,
        fdb_entries: 0,
        rules: 0,
        worker: 0,
        workers: vec![0],
    }
}

fn switches_only(r: &Request) -> Result<Response, ControlError> {
    match r {
        Request::SwitchList {} => Ok(Response::Switches {
            switches: vec![br0()],
        }),
        Request::Hello {} => Ok(Response::Hello {
            daemon_version: "9.9.9".into(),
            protocol_version: 1,
            pid: None,
        }),
        _ => Err(ControlError::new(ErrorKind::BadRequest, "not in this test")),
    }
}

#[test]
fn json_switch_list_prints_the_response_object() {
    let d = FakeDaemon::start(switches_only);
    let o = d.weft(&["--json", "switch", "list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let back: Response = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        back,
        Response::Switches {
            switches: vec![br0()]
        }
    );
    let envelopes = d.seen.lock().unwrap().clone();
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].version, 1);
    assert_eq!(envelopes[0].token, None);
    assert_eq!(envelopes[0].request, Request::SwitchList {});
}

#[test]
fn human_switch_list_is_a_table() {
    let d = FakeDaemon::start(switches_only);
    let o = d.weft(&["switch", "list"]);
    assert_eq!(code(&o), 0);
    let out = stdout(&o);
    assert!(out.starts_with("NAME  PORTS  FDB"), "{out}");
    assert!(out.contains("\nbr0 "), "{out}");
}

#[test]
fn weft_socket_environment_variable_names_the_socket() {
    let d = FakeDaemon::start(switches_only);
    let o = weft_cmd()
        .env("WEFT_SOCKET", &d.socket)
        .args(["switch", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

fn refusing(r: &Request) -> Result<Response, ControlError> {
    match r {
        Request::SwitchDel { name, .. } => {
            Err(ControlError::not_found(format!("no switch \"{name}\""))
                .with_hint("`weft switch list` shows the switches"))
        }
        Request::SwitchAdd { .. } => Err(ControlError::exists("switch \"br0\" exists")),
        Request::RuleAdd { .. } => Err(ControlError::new(
            ErrorKind::LimitReached,
            "br0 has 4096 rules",
        )),
        Request::PortAdd { .. } => Err(ControlError::new(
            ErrorKind::System,
            "cannot create TAP device",
        )),
        Request::Stats { .. } => Err(ControlError::new(
            ErrorKind::PermissionDenied,
            "credentials refused",
        )),
        _ => Err(ControlError::new(ErrorKind::Internal, "bug")),
    }
}

#[test]
fn daemon_errors_print_message_and_hint_with_exit_codes_by_kind() {
    let d = FakeDaemon::start(refusing);
    let o = d.weft(&["switch", "del", "br9"]);
    assert_eq!(code(&o), 3);
    assert_eq!(
        stderr(&o),
        "weft: error: no switch \"br9\"\nhint: `weft switch list` shows the switches\n"
    );
    assert!(o.stdout.is_empty());
    assert_eq!(code(&d.weft(&["switch", "add", "br0"])), 4);
    assert_eq!(code(&d.weft(&["rule", "add", "br0", "actions=drop"])), 4);
    assert_eq!(code(&d.weft(&["port", "add", "br0:t", "tap"])), 6);
    assert_eq!(code(&d.weft(&["stats"])), 5);
    assert_eq!(code(&d.weft(&["fdb", "show", "br0"])), 6);
}

#[test]
fn a_daemon_that_is_not_running_gets_advice_and_exit_5() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weftd.sock");
    let o = weft_cmd()
        .arg("--socket")
        .arg(&path)
        .args(["switch", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 5);
    assert_eq!(
        stderr(&o),
        format!(
            "weft: error: cannot connect to weftd at {}: No such file or directory — is weftd \
             running? start it with `weftd` or point --socket at its socket\n",
            path.display()
        )
    );
}

#[test]
fn usage_errors_exit_2_without_contacting_the_daemon() {
    let d = FakeDaemon::start(switches_only);
    let o = d.weft(&["rule", "add", "br0", "in_port=vm1,dl_dts=1 actions=drop"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).starts_with(
        "weft: error: unknown key 'dl_dts' at column 13: did you mean 'dl_dst'?\nhint: in the rule:"
    ));
    assert_eq!(code(&d.weft(&["port", "add", "nocolon", "tap"])), 2);
    assert_eq!(code(&d.weft(&["frobnicate"])), 2);
    assert_eq!(code(&d.weft(&["port", "set", "br0:p"])), 2);
    assert!(d.requests().is_empty());
}

#[test]
fn help_and_completions_need_no_daemon() {
    let o = weft_cmd().args(["rule", "add", "--help"]).output().unwrap();
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).contains("push_vlan:V"));
    for shell in ["bash", "zsh", "fish"] {
        let o = weft_cmd()
            .args(["--socket", "/nonexistent", "completions", shell])
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{shell}");
        assert!(stdout(&o).contains("weft"), "{shell}");
    }
}

#[test]
fn version_prints_both_sides() {
    let d = FakeDaemon::start(switches_only);
    let o = d.weft(&["version"]);
    assert_eq!(code(&o), 0);
    assert_eq!(
        stdout(&o),
        format!(
            "weft {} (protocol 1)\nweftd 9.9.9 (protocol 1)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let o = d.weft(&["--json", "hello"]);
    let back: Response = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(matches!(back, Response::Hello { .. }));
}

#[test]
fn garbage_answers_are_protocol_errors() {
    let d = FakeDaemon::start_raw(|_| Some(b"this is not json\n".to_vec()));
    let o = d.weft(&["switch", "list"]);
    assert_eq!(code(&o), 6);
    assert!(
        stderr(&o).contains("invalid response from weftd"),
        "{}",
        stderr(&o)
    );

    let d = FakeDaemon::start_raw(|_| None);
    let o = d.weft(&["switch", "list"]);
    assert_eq!(code(&o), 6);
    assert!(
        stderr(&o).contains("closed the connection"),
        "{}",
        stderr(&o)
    );

    let d = FakeDaemon::start_raw(|_| {
        Some(b"{\"version\":1,\"id\":77,\"ok\":{\"kind\":\"done\"}}\n".to_vec())
    });
    let o = d.weft(&["switch", "list"]);
    assert_eq!(code(&o), 6);
    assert!(stderr(&o).contains("answered request 77"), "{}", stderr(&o));
}

#[test]
fn a_silent_daemon_times_out() {
    let d = FakeDaemon::start_raw(|_| {
        std::thread::sleep(Duration::from_secs(3));
        None
    });
    let o = d.weft(&["--timeout", "0.2", "switch", "list"]);
    assert_eq!(code(&o), 6);
    assert!(
        stderr(&o).starts_with("weft: error: weftd did not answer within 0.2s"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn tcp_requests_carry_the_token() {
    let d = FakeDaemon::start_tcp(switches_only);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let o = weft_cmd()
        .args(["--connect", d.tcp.as_deref().unwrap(), "--token-file"])
        .arg(&token)
        .args(["--json", "switch", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(d.seen.lock().unwrap()[0].token.as_deref(), Some("s3cret"));
}

fn port_info(options: PortSettings) -> PortInfo {
    PortInfo {
        switch: "br0".into(),
        name: "vm1".into(),
        kind: PortKind::Tap {
            ifname: None,
            netns: None,
            queues: 1,
            mtu: 1500,
            offloads: true,
        },
        options,
        mtu: 1500,
        offloads: vec![],
        failed: None,
        attached: None,
        guest_mtu: None,
        warnings: Vec::new(),
    }
}

#[test]
fn port_set_keeps_the_options_not_given() {
    let d = FakeDaemon::start(|r| match r {
        Request::PortShow { .. } => Ok(Response::Port {
            port: port_info(PortSettings {
                vlan: VlanMode::Access { vlan: 5 },
                flood_unknown_unicast: false,
                learning: true,
                ..PortSettings::default()
            }),
            counters: PortCounters::default(),
        }),
        Request::PortSet { .. } => Ok(Response::Done),
        _ => Err(ControlError::new(ErrorKind::Internal, "no")),
    });
    let o = d.weft(&["port", "set", "br0:vm1", "--no-learning"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        d.requests()[1],
        Request::PortSet {
            switch: "br0".into(),
            name: "vm1".into(),
            options: PortSettings {
                vlan: VlanMode::Access { vlan: 5 },
                flood_unknown_unicast: false,
                learning: false,
                ..PortSettings::default()
            },
        }
    );
}

#[test]
fn config_apply_sends_the_file_and_prints_the_changes() {
    let d = FakeDaemon::start(|r| match r {
        Request::ConfigApply { .. } => Ok(Response::Applied {
            changes: vec!["add switch br1".into()],
        }),
        _ => Err(ControlError::new(ErrorKind::Internal, "no")),
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    std::fs::write(&file, r#"{"version":1,"switches":[{"name":"br1"}]}"#).unwrap();
    let o = d.weft(&["config", "apply", file.to_str().unwrap(), "--dry-run"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "dry run: these changes would be made (nothing was applied):\n  add switch br1\n"
    );
    let Request::ConfigApply { state, dry_run } = &d.requests()[0] else {
        panic!("not config_apply");
    };
    assert!(dry_run);
    assert_eq!(state.switches[0].name, "br1");
    assert_eq!(state.version, 1);
}

/// Stats whose counters grow by 1000 packets of 100 bytes on every call.
fn growing_stats() -> impl Fn(&Request) -> Result<Response, ControlError> {
    let calls = AtomicU64::new(0);
    move |r| match r {
        Request::Stats { .. } => {
            let n = calls.fetch_add(1, Ordering::SeqCst) * 1000;
            Ok(Response::Stats {
                switches: vec![SwitchStats {
                    name: "br0".into(),
                    batches: n,
                    rx_packets: n,
                    fdb_entries: 2,
                    fdb_moves: 0,
                    mac_flap_episodes: 0,
                    flow_cache_hits: 0,
                    flow_cache_misses: 0,
                    upcalls: 0,
                    ports: vec![PortStats {
                        name: "vm1".into(),
                        counters: PortCounters {
                            rx_packets: n,
                            rx_bytes: n * 100,
                            tx_packets: n,
                            tx_bytes: n * 100,
                            drops: BTreeMap::from([("no_destination".into(), n / 10)]),
                            device: BTreeMap::new(),
                        },
                    }],
                    lanes: Vec::new(),
                }],
                workers: vec![],
            })
        }
        _ => Err(ControlError::new(ErrorKind::Internal, "no")),
    }
}

#[test]
fn top_without_a_terminal_prints_one_sample_and_exits() {
    let d = FakeDaemon::start(growing_stats());
    let o = d.weft(&["top", "--interval", "0.2"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("RX-PPS"), "{out}");
    assert!(out.contains("br0     vm1"), "{out}");
    assert!(!out.contains('\x1b'), "no escape codes in a pipe: {out:?}");
    assert_eq!(d.requests().len(), 2);
}

#[test]
fn top_json_reports_rates() {
    let d = FakeDaemon::start(growing_stats());
    let o = d.weft(&["--json", "top", "--interval", "0.2"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let port = &v["ports"][0];
    assert_eq!(port["port"], "vm1");
    let secs = v["interval_secs"].as_f64().unwrap();
    assert!(secs >= 0.2, "{secs}");
    let rx_pps = port["rx_pps"].as_f64().unwrap();
    assert!((rx_pps - 1000.0 / secs).abs() < 1e-6, "{rx_pps}");
    assert!((port["rx_bps"].as_f64().unwrap() - rx_pps * 800.0).abs() < 1e-3);
    assert!((port["drops_ps"].as_f64().unwrap() - rx_pps / 10.0).abs() < 1e-6);
}

fn frame(n: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60 + usize::from(n)];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, n]);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f
}

/// Hands out three packets on the first read, then nothing; counts stops.
fn capturing(stops: &'static AtomicU64) -> impl Fn(&Request) -> Result<Response, ControlError> {
    let reads = AtomicU64::new(0);
    move |r| match r {
        Request::CaptureStart { .. } => Ok(Response::CaptureStarted { id: 4 }),
        Request::CaptureRead { id: 4, .. } => {
            let first = reads.fetch_add(1, Ordering::SeqCst) == 0;
            let packets = if first {
                (0..3)
                    .map(|n| CapturedPacket {
                        time_ns: 1_700_000_000_000_000_000 + u64::from(n) * 1000,
                        direction: CaptureDirection::In,
                        orig_len: 60 + u32::from(n),
                        data: hex_encode(&frame(n)),
                    })
                    .collect()
            } else {
                vec![]
            };
            Ok(Response::CapturePackets { packets, lost: 2 })
        }
        Request::CaptureStop { id: 4 } => {
            stops.fetch_add(1, Ordering::SeqCst);
            Ok(Response::Done)
        }
        _ => Err(ControlError::not_found("no such capture")),
    }
}

fn tshark_frame_lengths(file: &std::path::Path) -> Option<String> {
    let o = std::process::Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-e", "frame.len"])
        .output()
        .ok()?;
    assert!(o.status.success(), "tshark failed: {}", stderr(&o));
    Some(stdout(&o))
}

#[test]
fn capture_writes_a_pcap_that_readers_accept() {
    static STOPS: AtomicU64 = AtomicU64::new(0);
    let d = FakeDaemon::start(capturing(&STOPS));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vm1.pcap");
    let o = d.weft(&[
        "capture",
        "br0:vm1",
        "-w",
        file.to_str().unwrap(),
        "-c",
        "3",
        "--direction",
        "in",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!("3 packets captured to {}, 2 lost\n", file.display())
    );
    assert_eq!(STOPS.load(Ordering::SeqCst), 1);
    assert!(matches!(
        d.requests()[0],
        Request::CaptureStart {
            direction: CaptureDirection::In,
            ..
        }
    ));

    let bytes = std::fs::read(&file).unwrap();
    let mut reader = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
    let mut n = 0u8;
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.data.as_ref(), frame(n).as_slice());
        assert_eq!(
            p.timestamp,
            Duration::from_nanos(1_700_000_000_000_000_000 + u64::from(n) * 1000)
        );
        n += 1;
    }
    assert_eq!(n, 3);

    if let Some(lengths) = tshark_frame_lengths(&file) {
        assert_eq!(lengths, "60\n61\n62\n");
    }
}

#[test]
fn capture_to_stdout_streams_the_pcap_and_reports_on_stderr() {
    static STOPS: AtomicU64 = AtomicU64::new(0);
    let d = FakeDaemon::start(capturing(&STOPS));
    let o = d.weft(&["capture", "br0:vm1", "-w", "-", "-c", "2"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stderr(&o), "2 packets captured to stdout, 2 lost\n");
    let mut reader = pcap_file::pcap::PcapReader::new(&o.stdout[..]).unwrap();
    let mut count = 0;
    while let Some(p) = reader.next_packet() {
        p.unwrap();
        count += 1;
    }
    assert_eq!(count, 2);
}

#[test]
fn capture_stops_after_its_duration() {
    static STOPS: AtomicU64 = AtomicU64::new(0);
    let d = FakeDaemon::start(capturing(&STOPS));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.pcap");
    let o = d.weft(&[
        "--json",
        "capture",
        "br0:vm1",
        "-w",
        file.to_str().unwrap(),
        "--duration",
        "0.3",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["captured"], 3);
    assert_eq!(v["lost"], 2);
    assert_eq!(STOPS.load(Ordering::SeqCst), 1);
}

#[test]
fn capture_of_a_missing_port_exits_3() {
    let d = FakeDaemon::start(|_| Err(ControlError::not_found("no port \"br0:nope\"")));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.pcap");
    let o = d.weft(&["capture", "br0:nope", "-w", file.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    assert_eq!(stderr(&o), "weft: error: no port \"br0:nope\"\n");
}

#[test]
fn a_closed_stdout_pipe_is_not_a_crash() {
    let d = FakeDaemon::start(|_| {
        Ok(Response::Fdb {
            entries: (0..20_000u32)
                .map(|i| FdbEntry {
                    vlan: 0,
                    mac: format!("52:54:00:00:{:02x}:{:02x}", i >> 8 & 0xff, i & 0xff),
                    port: "vm1".into(),
                    is_static: false,
                    age_secs: Some(1),
                })
                .collect(),
        })
    });
    let mut child = weft_cmd()
        .arg("--socket")
        .arg(&d.socket)
        .args(["fdb", "show", "br0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn stdin_can_carry_a_json_rule() {
    let d = FakeDaemon::start(|r| match r {
        Request::RuleAdd { .. } => Ok(Response::RuleAdded { id: 12 }),
        _ => Err(ControlError::new(ErrorKind::Internal, "no")),
    });
    let mut child = weft_cmd()
        .arg("--socket")
        .arg(&d.socket)
        .args(["rule", "add", "br0", "--json-rule", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"priority":1,"actions":["drop"]}"#)
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0);
    assert_eq!(stdout(&o), "12\n");
}
