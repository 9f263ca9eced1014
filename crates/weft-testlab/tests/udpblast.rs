//! weft-udpblast over loopback: the sink counts what the generator sent (no namespace, no
//! root), and both print the JSON line the benchmark script reads.

use std::net::UdpSocket;
use std::process::{Command, Stdio};

fn json(output: &[u8]) -> serde_json::Value {
    serde_json::from_slice(output).unwrap_or_else(|e| {
        panic!(
            "not one JSON line ({e}): {}",
            String::from_utf8_lossy(output)
        )
    })
}

#[test]
fn the_sink_counts_the_datagrams_the_generator_sends_over_loopback() {
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bin = env!("CARGO_BIN_EXE_weft-udpblast");
    let addr = format!("127.0.0.1:{port}");
    let receiver = Command::new(bin)
        .args([
            "recv",
            "--bind",
            &addr,
            "--seconds",
            "10",
            "--idle-ms",
            "500",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sender = Command::new(bin)
        .args([
            "send",
            "--dst",
            &addr,
            "--size",
            "18",
            "--seconds",
            "0.5",
            "--burst",
            "32",
        ])
        .output()
        .unwrap();
    assert!(sender.status.success());
    let received = receiver.wait_with_output().unwrap();
    assert!(received.status.success());
    let (sent, got) = (json(&sender.stdout), json(&received.stdout));
    let sent_packets = sent["packets"].as_u64().unwrap();
    let got_packets = got["packets"].as_u64().unwrap();
    assert!(sent_packets >= 32, "{sent}");
    // Loopback may drop at a full receive buffer, never invent datagrams.
    assert!(
        got_packets > 0 && got_packets <= sent_packets,
        "{sent} {got}"
    );
    assert_eq!(got["bytes"].as_u64().unwrap(), got_packets * 18);
    assert!(got["pps"].as_f64().unwrap() > 0.0, "{got}");
}
