//! Requests and a state file recorded from weftd's protocol as it was when the control
//! model still carried addresses as text. Each must decode and encode back to exactly the
//! same bytes: a field whose text form changes (a MAC written differently, an address in
//! another notation, a VNI as a string) breaks every client and state file in the field.

use weft_control::state::State;
use weft_control::{decode_request, encode_request};

const REQUESTS: &str = include_str!("fixtures/requests.jsonl");
const STATE_FILE: &str = include_str!("fixtures/state.json");

#[test]
fn recorded_requests_decode_and_encode_to_the_same_bytes() {
    let mut count = 0;
    for (n, line) in REQUESTS.lines().enumerate() {
        let envelope = decode_request(line.as_bytes())
            .unwrap_or_else(|e| panic!("line {}: {}", n + 1, e.error.message));
        let encoded = encode_request(&envelope);
        assert_eq!(encoded.trim_end(), line, "line {}", n + 1);
        count += 1;
    }
    assert!(count >= 40, "the fixture lost requests: {count}");
}

#[test]
fn recorded_requests_cover_every_op_and_port_kind() {
    let ops = [
        "hello",
        "switch_add",
        "switch_del",
        "switch_list",
        "port_add",
        "port_del",
        "port_set",
        "port_list",
        "port_show",
        "fdb_show",
        "fdb_add",
        "fdb_del",
        "fdb_flush",
        "remote_mac_add",
        "remote_mac_del",
        "remote_mac_show",
        "rule_add",
        "route_add",
        "rule_del",
        "rule_list",
        "stats",
        "capture_start",
        "capture_read",
        "capture_stop",
        "upcall_subscribe",
        "upcall_read",
        "upcall_unsubscribe",
        "packet_out",
        "config_show",
        "config_apply",
    ];
    for op in ops {
        assert!(
            REQUESTS.contains(&format!("{{\"op\":\"{op}\"")),
            "no {op} request recorded"
        );
    }
    for kind in [
        "tap",
        "af_packet",
        "af_xdp",
        "vhost_user",
        "vxlan",
        "tcp_link",
    ] {
        assert!(
            REQUESTS.contains(&format!("{{\"type\":\"{kind}\"")),
            "no {kind} port recorded"
        );
    }
}

#[test]
fn recorded_state_file_reads_and_writes_back_the_same_bytes() {
    // As weftd writes it: pretty-printed, one trailing newline.
    let state: State = serde_json::from_str(STATE_FILE).unwrap();
    let mut written = serde_json::to_string_pretty(&state).unwrap();
    written.push('\n');
    assert_eq!(written, STATE_FILE);
}

#[test]
fn recorded_state_file_is_what_config_apply_carries() {
    let state: State = serde_json::from_str(STATE_FILE).unwrap();
    let compact = serde_json::to_string(&state).unwrap();
    assert!(
        REQUESTS.contains(&format!("\"state\":{compact},")),
        "the config_apply fixture and the state file differ"
    );
}
