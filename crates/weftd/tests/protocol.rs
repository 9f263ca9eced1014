//! The control protocol against a real weftd: changes through raw JSON lines, and hostile
//! input (oversized, truncated, malformed, unknown) answered with typed errors, never a
//! crash or a wedge; bounds on clients and idle time.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Client, Daemon};
use serde_json::{json, Value};

const MAX_REQUEST_BYTES: usize = weft_control::MAX_REQUEST_BYTES;

#[test]
fn switches_rules_and_static_entries_change_through_the_protocol() {
    let d = Daemon::new();
    std::fs::create_dir_all(d.state_file().parent().unwrap()).unwrap();
    // Ports whose TAP cannot be created (their namespace does not exist) stand in, failed:
    // nothing is created on the host.
    let seed = json!({"version": 1, "switches": [{"name": "br0", "ports": [
        {"name": "vm1", "kind": {"type": "tap", "netns": "weft-absent-ns"}},
        {"name": "vm2", "kind": {"type": "tap", "netns": "weft-absent-ns"}}]}]});
    std::fs::write(d.state_file(), seed.to_string()).unwrap();
    let mut d = d;
    d.launch();

    d.ok(json!({"op": "switch_add", "name": "br1"}));
    assert_eq!(
        d.err_kind(json!({"op": "switch_add", "name": "br1"})),
        "already_exists"
    );
    let id = d.ok(
        json!({"op": "rule_add", "switch": "br0", "rule": {"priority": 5,
        "match": {"in_port": "vm1"}, "actions": [{"push_vlan": 10}, {"output": "vm2"}]}}),
    )["id"]
        .as_u64()
        .unwrap();
    d.ok(json!({"op": "fdb_add", "switch": "br0", "vlan": 0, "mac": "02:00:00:00:00:aa", "port": "vm2"}));
    d.ok(json!({"op": "port_set", "switch": "br0", "name": "vm1", "options": {"vlan": {"mode": "trunk", "vlans": [10, 20], "native": 1}}}));
    let conf = d.config();
    let br0 = &conf["switches"][0];
    assert_eq!(br0["rules"][0]["actions"][1]["output"], "vm2");
    assert_eq!(br0["static_macs"][0]["mac"], "02:00:00:00:00:aa");
    assert_eq!(br0["ports"][0]["options"]["vlan"]["mode"], "trunk");
    assert_eq!(conf["switches"][1]["name"], "br1");

    let port = d.ok(json!({"op": "port_show", "switch": "br0", "name": "vm2"}));
    assert_eq!(port["counters"]["rx_packets"], 0);
    assert_eq!(
        d.err_kind(json!({"op": "port_del", "switch": "br0", "name": "vm2"})),
        "invalid",
        "a rule names it"
    );
    d.ok(json!({"op": "rule_del", "switch": "br0", "id": id}));
    d.ok(json!({"op": "fdb_flush", "switch": "br0"}));
    d.ok(json!({"op": "port_del", "switch": "br0", "name": "vm2"}));
    d.ok(json!({"op": "switch_del", "name": "br0", "force": true}));
    d.ok(json!({"op": "switch_del", "name": "br1"}));
    assert_eq!(d.config(), json!({"version": 1, "switches": []}));
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(d.state_file()).unwrap()).unwrap();
    assert_eq!(saved, json!({"version": 1, "switches": []}));
}

#[test]
fn config_apply_takes_a_whole_configuration_or_nothing() {
    let d = Daemon::start();
    let target = json!({"version": 1, "switches": [
        {"name": "a", "rules": [{"actions": ["drop"]}]},
        {"name": "b", "settings": {"max_rules": 2}}]});
    let dry = d.ok(json!({"op": "config_apply", "state": target, "dry_run": true}));
    assert_eq!(dry["changes"].as_array().unwrap().len(), 3, "{dry}");
    assert_eq!(
        d.config()["switches"][0]["name"],
        "br0",
        "a dry run changes nothing"
    );
    let bad = json!({"version": 1, "switches": [{"name": "a", "rules": [{"actions": [{"output": "x"}]}]}]});
    assert_eq!(
        d.err_kind(json!({"op": "config_apply", "state": bad})),
        "not_found"
    );
    d.ok(json!({"op": "config_apply", "state": target}));
    let shown = d.config();
    assert_eq!(shown["switches"].as_array().unwrap().len(), 2);
    assert_eq!(shown["switches"][1]["settings"]["max_rules"], 2);
}

/// Requests that must be refused, with the error kind each must get.
fn hostile_requests() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mut deep = "[".repeat(100_000);
    deep.push_str(&"]".repeat(100_000));
    let req = |r: Value| {
        json!({"version": 1, "id": 9, "request": r})
            .to_string()
            .into_bytes()
    };
    vec![
        ("not JSON", b"hello weftd".to_vec(), "bad_request"),
        (
            "truncated object",
            b"{\"version\":1,\"id\":1,\"requ".to_vec(),
            "bad_request",
        ),
        ("an array", b"[1,2,3]".to_vec(), "bad_request"),
        ("an empty object", b"{}".to_vec(), "bad_request"),
        (
            "binary garbage",
            vec![0, 0xff, 0xfe, 0x80, 7, 0],
            "bad_request",
        ),
        (
            "byte order mark",
            b"\xef\xbb\xbf{\"version\":1,\"id\":1,\"request\":{\"op\":\"hello\"}}".to_vec(),
            "bad_request",
        ),
        ("deep nesting", deep.into_bytes(), "bad_request"),
        (
            "huge number",
            b"{\"version\":1e999,\"id\":1,\"request\":{\"op\":\"hello\"}}".to_vec(),
            "bad_request",
        ),
        (
            "future version",
            b"{\"version\":2,\"id\":4,\"request\":{\"op\":\"hello\"}}".to_vec(),
            "unsupported_version",
        ),
        (
            "version as text",
            b"{\"version\":\"1\",\"id\":1,\"request\":{\"op\":\"hello\"}}".to_vec(),
            "bad_request",
        ),
        (
            "negative id",
            b"{\"version\":1,\"id\":-1,\"request\":{\"op\":\"hello\"}}".to_vec(),
            "bad_request",
        ),
        (
            "no request",
            b"{\"version\":1,\"id\":1}".to_vec(),
            "bad_request",
        ),
        (
            "unknown envelope field",
            b"{\"version\":1,\"id\":1,\"x\":0,\"request\":{\"op\":\"hello\"}}".to_vec(),
            "bad_request",
        ),
        ("unknown op", req(json!({"op": "reboot"})), "bad_request"),
        (
            "unknown request field",
            req(json!({"op": "hello", "please": true})),
            "bad_request",
        ),
        (
            "missing field",
            req(json!({"op": "switch_add"})),
            "bad_request",
        ),
        (
            "wrong type",
            req(json!({"op": "switch_add", "name": 7})),
            "bad_request",
        ),
        (
            "u16 overflow",
            req(
                json!({"op": "fdb_add", "switch": "br0", "vlan": 70000, "mac": "02:00:00:00:00:01", "port": "p"}),
            ),
            "bad_request",
        ),
        (
            "unknown port kind",
            req(json!({"op": "port_add", "switch": "br0", "name": "p", "kind": {"type": "vhost"}})),
            "bad_request",
        ),
        (
            "empty switch name",
            req(json!({"op": "switch_add", "name": ""})),
            "invalid",
        ),
        (
            "long switch name",
            req(json!({"op": "switch_add", "name": "s".repeat(100)})),
            "invalid",
        ),
        (
            "bad batch size",
            req(json!({"op": "switch_add", "name": "x", "settings": {"batch_size": 100000}})),
            "invalid",
        ),
        (
            "bad MAC",
            req(json!({"op": "fdb_add", "switch": "br0", "mac": "02:00:00:00:00", "port": "p"})),
            "invalid",
        ),
        (
            "multicast MAC",
            req(json!({"op": "fdb_add", "switch": "br0", "mac": "01:00:5e:00:00:01", "port": "p"})),
            "invalid",
        ),
        (
            "VLAN out of range",
            req(
                json!({"op": "fdb_add", "switch": "br0", "vlan": 4095, "mac": "02:00:00:00:00:01", "port": "p"}),
            ),
            "invalid",
        ),
        (
            "too many queues",
            req(
                json!({"op": "port_add", "switch": "br0", "name": "p", "kind": {"type": "tap", "queues": 99}}),
            ),
            "invalid",
        ),
        (
            "rule on unknown port",
            req(
                json!({"op": "rule_add", "switch": "br0", "rule": {"actions": [{"output": "ghost"}]}}),
            ),
            "not_found",
        ),
        (
            "rule without prerequisite",
            req(
                json!({"op": "rule_add", "switch": "br0", "rule": {"match": {"ip_proto": 6}, "actions": ["drop"]}}),
            ),
            "invalid",
        ),
        (
            "rule with drop and more",
            req(json!({"op": "rule_add", "switch": "br0", "rule": {"actions": ["drop", "flood"]}})),
            "invalid",
        ),
        (
            "unknown switch",
            req(json!({"op": "port_list", "switch": "nope"})),
            "not_found",
        ),
        (
            "unknown rule",
            req(json!({"op": "rule_del", "switch": "br0", "id": 12345})),
            "not_found",
        ),
        (
            "unknown capture",
            req(json!({"op": "capture_read", "id": 77})),
            "not_found",
        ),
        (
            "endless capture wait",
            req(json!({"op": "capture_read", "id": 1, "wait_ms": 999999})),
            "invalid",
        ),
        (
            "tap port in a missing namespace",
            req(
                json!({"op": "port_add", "switch": "br0", "name": "tap0", "kind": {"type": "tap", "netns": "weft-absent-ns"}}),
            ),
            "system",
        ),
        (
            "tap of more queues than a port takes",
            req(
                json!({"op": "port_add", "switch": "br0", "name": "tap0", "kind": {"type": "tap", "queues": 17}}),
            ),
            "invalid",
        ),
        (
            "invalid config_apply",
            req(
                json!({"op": "config_apply", "state": {"version": 1, "switches": [{"name": "a"}, {"name": "a"}]}}),
            ),
            "already_exists",
        ),
        (
            "state of a future version",
            req(json!({"op": "config_apply", "state": {"version": 9}})),
            "unsupported_version",
        ),
    ]
}

#[test]
fn hostile_requests_get_typed_errors_and_the_daemon_keeps_answering() {
    let d = Daemon::start();
    let before = d.config();
    let cases = hostile_requests();
    assert!(cases.len() >= 20);
    let mut shared = d.client();
    for (what, bytes, kind) in cases {
        // On a connection of its own...
        let mut c = d.client();
        c.send_raw(&bytes).unwrap();
        c.send_raw(b"\n").unwrap();
        let r = c.read_response();
        assert_eq!(r["error"]["kind"], kind, "{what}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}: {r}"
        );
        assert_eq!(
            c.request(json!({"op": "hello"}))["ok"]["kind"],
            "hello",
            "{what}: the connection still works"
        );
        // ...and in the middle of a long-lived one.
        shared.send_raw(&bytes).unwrap();
        shared.send_raw(b"\n").unwrap();
        assert_eq!(shared.read_response()["error"]["kind"], kind, "{what}");
        assert_eq!(
            shared.request(json!({"op": "hello"}))["ok"]["kind"],
            "hello",
            "{what}"
        );
    }
    assert_eq!(d.config(), before, "nothing changed");
}

#[test]
fn the_response_echoes_a_readable_id_even_on_errors() {
    let d = Daemon::start();
    let mut c = d.client();
    c.send_raw(b"{\"version\":2,\"id\":41,\"request\":{\"op\":\"hello\"}}\n")
        .unwrap();
    assert_eq!(c.read_response()["id"], 41);
    c.send_raw(b"{\"version\":1,\"id\":42,\"request\":{\"op\":\"nope\"}}\n")
        .unwrap();
    assert_eq!(c.read_response()["id"], 42);
    c.send_raw(b"garbage\n").unwrap();
    assert_eq!(c.read_response()["id"], 0);
}

#[test]
fn pipelined_requests_and_blank_lines_are_answered_in_order() {
    let d = Daemon::start();
    let mut c = d.client();
    let mut batch = String::new();
    for id in 1..=20 {
        batch.push_str(
            &json!({"version": 1, "id": id, "request": {"op": "switch_list"}}).to_string(),
        );
        batch.push_str("\n\n");
    }
    c.send_raw(batch.as_bytes()).unwrap();
    for id in 1..=20 {
        assert_eq!(c.read_response()["id"], id);
    }
}

#[test]
fn a_request_at_the_size_limit_is_served_and_one_byte_more_is_too_large() {
    let d = Daemon::start();
    let body = json!({"version": 1, "id": 1, "request": {"op": "hello"}}).to_string();
    // Pad with JSON whitespace to exactly the limit, newline included.
    let mut line = body.clone().into_bytes();
    line.resize(MAX_REQUEST_BYTES - 1, b' ');
    line.push(b'\n');
    let mut c = d.client();
    c.send_raw(&line).unwrap();
    assert_eq!(c.read_response()["ok"]["kind"], "hello");

    let mut line = body.into_bytes();
    line.resize(MAX_REQUEST_BYTES, b' ');
    line.push(b'\n');
    let mut c = d.client();
    c.send_raw(&line).unwrap();
    let r = c.read_response();
    assert_eq!(r["error"]["kind"], "too_large", "{r}");
    assert!(c.closed_by_daemon());

    // A client that streams without end is cut off at the limit too.
    let mut c = d.client();
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent <= MAX_REQUEST_BYTES {
        if c.send_raw(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let line = c.try_read_line().expect("an error line before the close");
    assert!(line.contains("too_large"), "{line}");
    d.ok(json!({"op": "hello"}));
}

#[test]
fn a_truncated_request_then_close_gets_an_answer() {
    let d = Daemon::start();
    let mut c = d.client();
    c.send_raw(b"{\"version\":1,\"id\":3,\"request\":{\"op\":\"hel")
        .unwrap();
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let r = c.read_response();
    assert_eq!(r["error"]["kind"], "bad_request");
    assert!(c.closed_by_daemon());
    let mut c = d.client();
    c.send_raw(b"{\"version\":1,\"id\":3,\"request\":{\"op\":\"hello\"}}")
        .unwrap();
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(
        c.read_response()["ok"]["kind"],
        "hello",
        "a last line without newline is served"
    );
}

#[test]
fn too_many_clients_are_refused_cleanly_and_slots_come_back() {
    let mut d = Daemon::with_config("[control]\nmax_clients = 3\n");
    d.launch();
    // The launch probe's connection may still be closing: wait until three fit.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut held: Vec<Client>;
    loop {
        held = (0..3).map(|_| d.client()).collect();
        let ok = held.iter_mut().all(Client::hello_works);
        if ok {
            break;
        }
        assert!(Instant::now() < deadline);
        held.clear();
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut extra = d.client();
    let r = extra.read_response();
    assert_eq!(r["error"]["kind"], "limit_reached", "{r}");
    assert!(r["error"]["hint"].as_str().unwrap().contains("max_clients"));
    assert!(extra.closed_by_daemon());
    for c in &mut held {
        assert_eq!(
            c.request(json!({"op": "hello"}))["ok"]["kind"],
            "hello",
            "the others go on"
        );
    }
    held.pop();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if d.client().hello_works() {
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_and_slow_clients_are_disconnected() {
    let mut d = Daemon::with_config("[control]\nidle_timeout_secs = 1\n");
    d.launch();
    let mut idle = d.client();
    idle.request(json!({"op": "hello"}));
    let start = Instant::now();
    assert!(idle.closed_by_daemon());
    assert!(start.elapsed() < Duration::from_secs(5));
    let mut slow = d.client();
    let start = Instant::now();
    for b in b"{\"version\":1," {
        if slow.send_raw(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(
        slow.closed_by_daemon(),
        "one byte at a time does not keep a slot"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    d.ok(json!({"op": "hello"}));
}

#[test]
fn the_tcp_listener_needs_the_token_in_every_request() {
    let d = Daemon::new();
    let port = common::free_port();
    let token_file = d.dir.path().join("token");
    std::fs::write(&token_file, "0123456789abcdef-token\n").unwrap();
    let conf = d.dir.path().join("weftd.toml");
    std::fs::write(
        &conf,
        format!(
            "[control.tcp]\nlisten = \"127.0.0.1:{port}\"\ntoken_file = \"{}\"\n",
            token_file.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut d = d;
    d.extra_args = vec!["--config".into(), conf.to_str().unwrap().into()];
    let out = d.run_to_exit(&[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    d.launch();

    let talk = |line: String, until_close: bool| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut r = std::io::BufReader::new(s);
        let mut out = String::new();
        std::io::BufRead::read_line(&mut r, &mut out).unwrap();
        let mut rest = String::new();
        let closed = until_close
            && std::io::Read::read_to_string(&mut r, &mut rest).is_ok_and(|_| rest.is_empty());
        (serde_json::from_str::<Value>(&out).unwrap(), closed)
    };
    let (r, closed) = talk(
        format!(
            "{}\n",
            json!({"version": 1, "id": 1, "request": {"op": "switch_list"}})
        ),
        true,
    );
    assert_eq!(r["error"]["kind"], "permission_denied");
    assert!(closed, "a request without the token ends the connection");
    let (r, _) = talk(
        format!(
            "{}\n",
            json!({"version": 1, "id": 1, "token": "0123456789abcdef-tokeN", "request": {"op": "hello"}})
        ),
        false,
    );
    assert_eq!(r["error"]["kind"], "permission_denied");
    let (r, _) = talk(
        format!(
            "{}\n",
            json!({"version": 1, "id": 2, "token": "0123456789abcdef-token", "request": {"op": "switch_list"}})
        ),
        false,
    );
    assert_eq!(r["ok"]["switches"][0]["name"], "br0", "{r}");
}
