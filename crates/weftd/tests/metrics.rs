//! The Prometheus endpoint of a real weftd: valid text, the families promised, escaped
//! labels; bounded against bad HTTP.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{check_exposition, Daemon};
use serde_json::json;

#[test]
fn metrics_scrape_as_valid_prometheus_text() {
    let mut d = Daemon::new();
    std::fs::create_dir_all(d.state_file().parent().unwrap()).unwrap();
    let state = json!({"version": 1, "switches": [
        {"name": "br0", "ports": [{"name": "vm\"1\\a", "kind": {"type": "tap", "ifname": "tap-q", "netns": "weft-absent-ns"}}]},
        {"name": "br1"}]});
    std::fs::write(d.state_file(), state.to_string()).unwrap();
    d.launch();
    d.ok(json!({"op": "rule_add", "switch": "br1", "rule": {"actions": ["flood"]}}));
    // Answered once, so weftd has surely accepted it (and counts it) before the scrape.
    let mut held = d.client();
    assert!(held.hello_works());

    let (head, body) = d.scrape("/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    let samples = check_exposition(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert!(samples > 20);
    for family in [
        "weft_port_rx_packets_total",
        "weft_port_rx_bytes_total",
        "weft_port_tx_packets_total",
        "weft_port_tx_bytes_total",
        "weft_port_drops_total",
        "weft_port_up",
        "weft_switch_fdb_entries",
        "weft_switch_flow_cache_hits_total",
        "weft_switch_flow_cache_misses_total",
        "weft_switch_upcalls_total",
        "weft_switch_upcalls_unclaimed_total",
        "weft_switch_upcall_subscriber_lost_total",
        "weft_switch_packet_out_sent_total",
        "weft_worker_busy_ratio",
        "weftd_control_clients",
    ] {
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "{family} missing:\n{body}"
        );
    }
    let port = r#"switch="br0",port="vm\"1\\a""#;
    assert!(
        body.contains(&format!("weft_port_up{{{port}}} 0\n")),
        "a failed port is down:\n{body}"
    );
    assert!(body.contains(&format!(
        "weft_port_drops_total{{{port},reason=\"tx_queue_full\"}} 0\n"
    )));
    assert!(body.contains("weft_switch_rules{switch=\"br1\"} 1\n"));
    assert!(body.contains("weft_worker_busy_ratio{worker=\"0\"} "));
    let clients = body
        .lines()
        .find_map(|l| l.strip_prefix("weftd_control_clients "))
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap();
    assert!(clients >= 1, "the held client counts");
}

#[test]
fn other_paths_methods_and_bad_requests_are_refused() {
    let d = Daemon::start();
    assert!(d.scrape("/").0.starts_with("HTTP/1.1 200"));
    assert!(d.scrape("/nope").0.starts_with("HTTP/1.1 404"));
    let talk = |request: &[u8]| {
        let mut s = TcpStream::connect(("127.0.0.1", d.metrics_port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let _ = s.write_all(request);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    assert!(talk(b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    assert!(talk(b"garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
    assert!(talk(b"GET /metrics HTTP/9\r\n\r\n").starts_with("HTTP/1.1 400"));
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 64 * 1024));
    assert_eq!(
        talk(&huge),
        "",
        "an oversized head is dropped without an answer"
    );
    let head = talk(b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"),
        "HEAD has no body"
    );
    // Silent connections hold at most a few slots, for a bounded time; scrapes go on after.
    let silent: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", d.metrics_port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(5500));
    drop(silent);
    assert!(d.scrape("/metrics").0.starts_with("HTTP/1.1 200"));
    d.ok(json!({"op": "hello"}));
}
