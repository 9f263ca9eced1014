//! Hostile TCP control clients against a real weftd: whatever they do (connect and idle,
//! send garbage, a wrong token, or trickle bytes), root on the Unix socket still gets in, and
//! a client refused for the limit is told so.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Daemon;
use serde_json::{json, Value};

const TOKEN: &str = "0123456789abcdef-token";

/// A daemon with a TCP listener (and `control` lines added to `[control]`); its port.
fn daemon_with_tcp(control: &str) -> (Daemon, u16) {
    let port = common::free_port();
    let mut d = Daemon::new();
    let token_file = d.dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let conf = d.dir.path().join("weftd.toml");
    std::fs::write(
        &conf,
        format!(
            "[control]\n{control}\n[control.tcp]\nlisten = \"127.0.0.1:{port}\"\ntoken_file = \"{}\"\n",
            token_file.display()
        ),
    )
    .unwrap();
    d.extra_args = vec!["--config".into(), conf.to_str().unwrap().into()];
    d.launch();
    (d, port)
}

fn tcp(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

fn request(id: u64, token: Option<&str>, op: &str) -> String {
    let mut r = json!({"version": 1, "id": id, "request": {"op": op}});
    if let Some(t) = token {
        r["token"] = json!(t);
    }
    format!("{r}\n")
}

/// The next line from `s`, parsed; `None` at a close (or a reset).
fn read_reply(s: &TcpStream) -> Option<Value> {
    let mut line = String::new();
    match BufReader::new(s).read_line(&mut line) {
        Ok(n) if n > 0 => Some(serde_json::from_str(&line).unwrap()),
        _ => None,
    }
}

/// True once the daemon has closed `s` (EOF or a reset), within its read timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// Root's `hello` on the Unix socket, answered within 1 s.
fn root_gets_in(d: &Daemon, round: usize) {
    let start = Instant::now();
    let mut c = d.client();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    assert!(
        c.hello_works(),
        "round {round}: root's hello on the Unix socket failed"
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "round {round}: root waited {:?}",
        start.elapsed()
    );
}

#[test]
fn sixty_four_hostile_tcp_clients_never_keep_root_out_and_the_refused_are_told_why() {
    let (d, port) = daemon_with_tcp("");
    let stop = Arc::new(AtomicBool::new(false));
    let mut hostile = Vec::new();
    for i in 0..64 {
        let mut s = tcp(port);
        match i % 4 {
            0 => {} // connects and idles
            1 => s.write_all(b"\x16\x03\x01 not a request at all\n").unwrap(),
            2 => s
                .write_all(request(1, Some("0123456789abcdef-tokeN"), "hello").as_bytes())
                .unwrap(),
            _ => {} // one byte at a time, below
        }
        hostile.push(s);
    }
    // Slowloris: the trickling ones send a byte of a request that never ends, every 50 ms.
    let trickle: Vec<TcpStream> = hostile
        .iter()
        .skip(3)
        .step_by(4)
        .map(|s| s.try_clone().unwrap())
        .collect();
    let trickler = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let bytes = b"{\"version\":1,\"id\":1,\"token\":\"";
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                for mut s in &trickle {
                    let _ = s.write_all(&bytes[n % bytes.len()..][..1]);
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    for round in 0..20 {
        root_gets_in(&d, round);
        std::thread::sleep(Duration::from_millis(100));
    }
    // While idle ones hold the handshake slots (those that sent garbage or a wrong token
    // were closed and freed theirs), the next connections are refused with a reason.
    let mut idle = Vec::new();
    let refusal = loop {
        assert!(
            idle.len() <= 8,
            "{} more connections were all taken",
            idle.len()
        );
        let s = tcp(port);
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        match read_reply(&s) {
            Some(r) => break (r, s),
            None => idle.push(s),
        }
    };
    let (r, mut more) = refusal;
    assert_eq!(r["error"]["kind"], "limit_reached", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("authenticate"),
        "{r}"
    );
    more.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(closed(&mut more));
    root_gets_in(&d, 20);
    // Each hostile connection was refused for the limit at once, or got a slot and then
    // its answer (garbage, wrong token: an error and the close), or still holds its slot
    // (idle, trickling) — at most as many as there are handshake slots.
    let (mut limit, mut answered, mut holding) = (0, 0, 0);
    for (i, s) in hostile.iter().enumerate() {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        match read_reply(s) {
            Some(r) if r["error"]["kind"] == "limit_reached" => limit += 1,
            Some(r) => {
                let want = if i % 4 == 1 {
                    "bad_request"
                } else {
                    "permission_denied"
                };
                assert!(i % 4 == 1 || i % 4 == 2, "connection {i} answered {r}");
                assert_eq!(r["error"]["kind"], want, "connection {i}");
                answered += 1;
            }
            None => holding += 1,
        }
    }
    assert_eq!(limit + answered + holding, 64);
    assert!(holding <= 8, "{holding} hold a slot");
    assert!(limit >= 32 - 8, "{limit} told about the limit");
    stop.store(true, Ordering::Relaxed);
    trickler.join().unwrap();
    // And the TCP listener still serves a client with the token once they are gone.
    drop(hostile);
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut s = tcp(port);
        s.write_all(request(5, Some(TOKEN), "hello").as_bytes())
            .unwrap();
        match read_reply(&s) {
            Some(r) if r["ok"]["kind"] == "hello" => break,
            r => assert!(Instant::now() < deadline, "never served: {r:?}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_tcp_client_that_trickles_or_sends_blank_lines_is_closed_at_the_handshake_deadline() {
    let (d, port) = daemon_with_tcp("idle_timeout_secs = 1");
    for trickle in [&b"\n"[..], b"{"] {
        let mut s = tcp(port);
        let start = Instant::now();
        let mut cut = false;
        while start.elapsed() < Duration::from_secs(5) {
            if s.write_all(trickle).is_err() {
                cut = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            cut || closed(&mut s),
            "{trickle:?} every 100 ms kept the connection"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
    }
    d.ok(json!({"op": "hello"}));
}

#[test]
fn a_bad_line_ends_an_authenticated_tcp_connection() {
    let (_d, port) = daemon_with_tcp("");
    let mut s = tcp(port);
    s.write_all(request(1, Some(TOKEN), "hello").as_bytes())
        .unwrap();
    assert_eq!(read_reply(&s).unwrap()["ok"]["kind"], "hello");
    s.write_all(b"garbage\n").unwrap();
    assert_eq!(read_reply(&s).unwrap()["error"]["kind"], "bad_request");
    assert!(closed(&mut s), "one bad line and the client goes");

    let mut s = tcp(port);
    s.write_all(b"{\"version\":1}\n").unwrap();
    assert_eq!(read_reply(&s).unwrap()["error"]["kind"], "bad_request");
    assert!(closed(&mut s), "a bad first line too");
}

#[test]
fn tcp_clients_with_the_token_cannot_take_the_slots_kept_for_root() {
    // Three slots, one kept for root: two TCP clients fit, the third is refused.
    let (d, port) = daemon_with_tcp("max_clients = 3");
    let deadline = Instant::now() + Duration::from_secs(10);
    let held: Vec<TcpStream> = loop {
        let held: Vec<TcpStream> = (0..2)
            .map(|i| {
                let s = tcp(port);
                (&s).write_all(request(i, Some(TOKEN), "hello").as_bytes())
                    .unwrap();
                s
            })
            .collect();
        if held
            .iter()
            .all(|s| read_reply(s).is_some_and(|r| r["ok"]["kind"] == "hello"))
        {
            break held;
        }
        // The launch probe may still hold a slot.
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut third = tcp(port);
    third
        .write_all(request(9, Some(TOKEN), "hello").as_bytes())
        .unwrap();
    let r = read_reply(&third).unwrap();
    assert_eq!(r["error"]["kind"], "limit_reached", "{r}");
    assert_eq!(r["id"], 9);
    assert!(r["error"]["hint"].as_str().unwrap().contains("max_clients"));
    assert!(closed(&mut third));
    root_gets_in(&d, 0);
    drop(held);
}
