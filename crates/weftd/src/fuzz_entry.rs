//! The body of the `control_connection` fuzz target (in `fuzz/`), also run by a proptest
//! on stable: arbitrary bytes as one client connection to a real control plane (one
//! worker, a state file in the temporary directory), through the same path the socket
//! takes: the bounded line reader, decoding, validation, the change on the worker, the
//! state file, the response.
//!
//! Checks: nothing panics; every response line is a valid response; there is at most one
//! response per request line (plus one for a too-long line); the configuration always
//! passes validation, and equals what the state file holds.

pub mod handover;

use std::io::{self, Read, Write};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use weft_control::state::State;
use weft_control::{decode_response, Request};

use crate::config::WorkersConfig;
use crate::control::pool::WorkerPool;
use crate::control::{lock, Controller, Session};
use crate::devices::VhostPolicy;
use crate::server::conn::{serve, Conn, Context};

/// A connection that delivers `input` then end-of-file, and keeps what is written.
struct Replay<'a> {
    input: &'a [u8],
    output: Vec<u8>,
}

impl Read for Replay<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.input.len().min(buf.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Replay<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Conn for Replay<'_> {
    fn set_read_timeout(&self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

fn initial() -> State {
    State {
        version: 1,
        switches: vec![weft_control::state::SwitchState {
            name: "br0".into(),
            settings: weft_control::state::SwitchSettings::default(),
            ports: Vec::new(),
            static_macs: Vec::new(),
            rules: Vec::new(),
            on_demand: false,
        }],
    }
}

/// The state file the fuzzed control plane writes (one per process).
pub fn state_file() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("weftd-fuzz-{}.json", std::process::id()))
}

fn controller() -> &'static Mutex<Controller> {
    static CONTROLLER: OnceLock<Mutex<Controller>> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        let path = state_file();
        let pool =
            WorkerPool::start(&WorkersConfig::default()).unwrap_or_else(|e| panic!("workers: {e}"));
        let sockets = crate::socket_dirs::SocketDirs::open(&std::env::temp_dir(), &[], &[])
            .unwrap_or_else(|e| panic!("socket dirs: {e}"));
        let paths = crate::control::DevicePaths::new(path, VhostPolicy::new(sockets));
        let (c, _) = Controller::start(pool, paths, initial(), true)
            .unwrap_or_else(|e| panic!("start: {}", e.message));
        Mutex::new(c)
    })
}

/// Tables are allocated at the size asked for (bounded per switch, by design); inputs
/// asking for large ones only measure the machine's memory, so they are skipped.
fn asks_for_big_tables(input: &[u8]) -> bool {
    const KEYS: [&[u8]; 4] = [
        b"fdb_max_entries",
        b"fdb_max_per_port",
        b"max_rules",
        b"flow_cache_capacity",
    ];
    KEYS.iter().any(|k| {
        input.windows(k.len()).enumerate().any(|(i, w)| {
            w == *k && {
                let digits: Vec<u8> = input[i + k.len()..]
                    .iter()
                    .skip_while(|b| !b.is_ascii_digit())
                    .take_while(|b| b.is_ascii_digit())
                    .copied()
                    .collect();
                digits.len() > 5
            }
        })
    })
}

/// Feeds `input` as one connection; panics when a check fails.
pub fn control_connection(input: &[u8]) {
    if asks_for_big_tables(input) {
        return;
    }
    let controller = controller();
    let ctx = Context {
        controller,
        token: None,
        idle_timeout: Duration::from_secs(5),
        files_as: crate::control::FileReader::Weftd,
    };
    let mut conn = Replay {
        input,
        output: Vec::new(),
    };
    serve(&mut conn, &ctx);
    let lines = input.split(|b| *b == b'\n').count();
    let mut responses = 0;
    for line in conn.output.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        responses += 1;
        if let Err(e) = decode_response(line) {
            panic!(
                "invalid response line {:?}: {}",
                String::from_utf8_lossy(line),
                e.message
            );
        }
    }
    assert!(responses <= lines, "{responses} responses to {lines} lines");
    let mut c = lock(controller);
    let state = c.state().clone();
    if let Err(e) = crate::model::validate::state(&state) {
        panic!("the configuration became invalid: {}", e.message);
    }
    match crate::persist::load(c.state_path()) {
        Ok(Some(saved)) => assert_eq!(
            saved, state,
            "the state file differs from the configuration"
        ),
        other => panic!("the state file is unreadable: {other:?}"),
    }
    // Back to the start, so that inputs do not pile switches up.
    let mut session = Session::default();
    let reset = c.handle(
        Request::ConfigApply {
            state: initial(),
            dry_run: false,
        },
        &mut session,
    );
    if let Err(e) = reset {
        panic!("cannot go back to the initial configuration: {}", e.message);
    }
    c.end_session(&mut session);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn op() -> impl Strategy<Value = serde_json::Value> {
        let name = prop_oneof![
            Just("br0".to_string()),
            Just("br1".to_string()),
            "[a-z:\" ]{0,6}"
        ];
        let mac = prop_oneof![Just("02:00:00:00:00:01".to_string()), "[0-9a-f:]{0,20}"];
        prop_oneof![
            Just(json!({"op": "hello"})),
            Just(json!({"op": "switch_list"})),
            Just(json!({"op": "config_show"})),
            name.clone().prop_map(|n| json!({"op": "switch_add", "name": n})),
            (name.clone(), any::<bool>()).prop_map(|(n, f)| json!({"op": "switch_del", "name": n, "force": f})),
            (name.clone(), any::<u16>(), any::<u16>()).prop_map(|(n, p, v)| json!({"op": "rule_add", "switch": n,
                "rule": {"priority": p, "match": {"vlan": v}, "actions": ["flood"]}})),
            (name.clone(), mac.clone(), "[0-9.]{0,12}").prop_map(|(n, m, r)| json!({"op": "route_add", "switch": n,
                "rule": {"match": {"dst_mac": m}, "actions": [{"output": "p"}]}, "remote": r})),
            (name.clone(), 0u64..8).prop_map(|(n, id)| json!({"op": "rule_del", "switch": n, "id": id})),
            (name.clone(), mac, any::<u16>()).prop_map(|(n, m, v)| json!({"op": "fdb_add", "switch": n, "mac": m, "vlan": v, "port": "p"})),
            name.clone().prop_map(|n| json!({"op": "stats", "switch": n})),
            name.prop_map(|n| json!({"op": "config_apply", "state": {"version": 1, "switches": [{"name": n}]}})),
            any::<u64>().prop_map(|id| json!({"op": "capture_read", "id": id})),
        ]
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => op().prop_map(|r| json!({"version": 1, "id": 1, "request": r}).to_string().into_bytes()),
            1 => proptest::collection::vec(any::<u8>(), 0..64),
            1 => op().prop_map(|r| {
                let mut s = json!({"version": 1, "id": 1, "request": r}).to_string().into_bytes();
                s.truncate(s.len() / 2);
                s
            }),
        ]
    }

    struct RemoveOnDrop(std::path::PathBuf);

    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn control_connection_survives_any_sequence_of_lines() {
        let _cleanup = RemoveOnDrop(state_file());
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 64,
            ..ProptestConfig::default()
        });
        let inputs = (proptest::collection::vec(line(), 0..12), any::<bool>());
        let result = runner.run(&inputs, |(lines, newline_at_end)| {
            let mut input = Vec::new();
            for l in &lines {
                input.extend_from_slice(l);
                input.push(b'\n');
            }
            if !newline_at_end {
                input.pop();
            }
            control_connection(&input);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    }

    #[test]
    fn big_table_requests_are_recognised() {
        assert!(asks_for_big_tables(br#"{"fdb_max_entries": 16777216}"#));
        assert!(!asks_for_big_tables(br#"{"fdb_max_entries": 8192}"#));
    }
}
