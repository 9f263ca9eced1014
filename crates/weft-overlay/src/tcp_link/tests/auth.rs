//! Authenticated TCP links: the handshake's parts, key files, and (on loopback) ports with
//! keys against each other and against hand-made clients.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use proptest::prelude::*;
use weft_switch::{PortRx, RxBatch};

use super::sockets::{config, connected, exchange, open, wait_for, End};
use crate::tcp_link::auth::{
    self, HandshakeError, Hello, LinkKey, Role, HELLO_LEN, NONCE_LEN, PROOF_LEN,
};
use crate::tcp_link::{TcpLinkConfig, TcpLinkDrop, TcpLinkMode};

fn key(byte: u8) -> LinkKey {
    LinkKey::new(vec![byte; 32]).unwrap()
}

fn keyed(mode: TcpLinkMode, k: &LinkKey) -> TcpLinkConfig {
    let mut c = config(mode);
    c.key = Some(k.clone());
    c.handshake_timeout = Duration::from_millis(800);
    c
}

fn listen_with(k: &LinkKey) -> (End, SocketAddr) {
    let (end, local) = open(&keyed(
        TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap()),
        k,
    ));
    (end, local.unwrap())
}

fn connect_with(to: SocketAddr, k: &LinkKey) -> End {
    open(&keyed(TcpLinkMode::Connect(to), k)).0
}

fn drops(end: &End, reason: TcpLinkDrop) -> u64 {
    end.stats.snapshot().drops(reason)
}

/// A hand-made client: connects and reads the listener's hello.
fn raw_client(addr: SocketAddr) -> (TcpStream, Hello) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; HELLO_LEN];
    s.read_exact(&mut b).unwrap();
    (s, Hello::parse(&b).unwrap())
}

/// The listener closes the client's connection (the client reads EOF or a reset).
fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            // Its proof, sent before it checked ours.
            Ok(_) => {}
        }
    }
}

#[test]
fn ends_with_the_same_key_connect_and_carry_frames() {
    let k = key(1);
    let (mut a, addr) = listen_with(&k);
    let mut b = connect_with(addr, &k);
    wait_for("the connection", Duration::from_secs(5), || {
        connected(&a) && connected(&b)
    });
    exchange(&mut a, &mut b, 0);
    for end in [&a, &b] {
        let s = end.stats.snapshot();
        assert_eq!(s.drops.iter().sum::<u64>(), 0, "{s:?}");
    }
}

#[test]
fn ends_with_different_keys_refuse_each_other_and_both_count_it() {
    let (a, addr) = listen_with(&key(1));
    let b = connect_with(addr, &key(2));
    wait_for("refusals on both sides", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::AuthFailed) >= 1 && drops(&b, TcpLinkDrop::AuthFailed) >= 1
    });
    assert!(!connected(&a) && !connected(&b));
    assert_eq!(a.stats.snapshot().connects, 0);
    assert_eq!(b.stats.snapshot().connects, 0);
}

#[test]
fn a_listener_with_a_key_refuses_a_peer_without_one() {
    let (a, addr) = listen_with(&key(1));
    let (mut b, _) = open(&config(TcpLinkMode::Connect(addr)));
    // The keyless end reads the hello as a frame header with a bad magic and cuts; the end
    // with the key sees its peer leave without a hello.
    let mut batch = RxBatch::new(8);
    wait_for("refusals on both sides", Duration::from_secs(5), || {
        b.rx.receive(&mut batch);
        assert!(batch.is_empty());
        b.rx.finish();
        drops(&b, TcpLinkDrop::BadMagic) >= 1 && drops(&a, TcpLinkDrop::BadHandshake) >= 1
    });
    assert_eq!(a.stats.snapshot().connects, 0);
}

#[test]
fn a_listeners_own_proof_reflected_back_is_refused() {
    let (a, addr) = listen_with(&key(1));
    let (mut s, theirs) = raw_client(addr);
    let ours = Hello::fresh(Role::Connector, 5).unwrap();
    s.write_all(&ours.encode()).unwrap();
    let mut their_proof = [0u8; PROOF_LEN];
    s.read_exact(&mut their_proof).unwrap();
    // The listener's proof is valid, for the listener: sent back as the connector's, it fails.
    assert!(auth::verify(&key(1), &ours, &theirs, &their_proof).is_ok());
    s.write_all(&their_proof).unwrap();
    wait_for("the refusal", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::AuthFailed) == 1
    });
    assert_closed(&mut s);
    assert_eq!(a.stats.snapshot().connects, 0);
}

#[test]
fn a_listeners_own_hello_reflected_back_is_refused() {
    let (a, addr) = listen_with(&key(1));
    let (mut s, theirs) = raw_client(addr);
    s.write_all(&theirs.encode()).unwrap();
    wait_for("the refusal", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::AuthFailed) == 1
    });
    assert_closed(&mut s);
}

#[test]
fn a_proof_replayed_from_an_earlier_connection_is_refused() {
    let k = key(1);
    let (a, addr) = listen_with(&k);
    // A connection someone recorded: a valid connector proof for the listener's nonce then.
    let (mut first, theirs) = raw_client(addr);
    let recorded = Hello::fresh(Role::Connector, 5).unwrap();
    let recorded_proof = auth::prove(&k, &recorded, &theirs);
    first.write_all(&recorded.encode()).unwrap();
    first.write_all(&recorded_proof).unwrap();
    wait_for("the recorded connection", Duration::from_secs(5), || {
        connected(&a)
    });
    // Replayed on a new connection: the listener's nonce is new, so the proof fails.
    let (mut replay, fresh) = raw_client(addr);
    assert_ne!(fresh.nonce, theirs.nonce);
    replay.write_all(&recorded.encode()).unwrap();
    replay.write_all(&recorded_proof).unwrap();
    wait_for("the refusal", Duration::from_secs(5), || {
        drops(&a, TcpLinkDrop::AuthFailed) == 1
    });
    assert_closed(&mut replay);
    assert_eq!(
        a.stats.snapshot().connects,
        1,
        "the replay replaced nothing"
    );
}

#[test]
fn a_silent_client_times_out_while_the_real_peer_connects() {
    let k = key(1);
    let mut c = keyed(TcpLinkMode::Listen("127.0.0.1:0".parse().unwrap()), &k);
    c.handshake_timeout = Duration::from_secs(2);
    let (a, addr) = open(&c);
    let addr = addr.unwrap();
    let mut silent = TcpStream::connect(addr).unwrap();
    let b = connect_with(addr, &k);
    // The real peer is through long before the silent client's handshake time is up.
    wait_for("the real peer", Duration::from_millis(1500), || {
        connected(&a) && connected(&b)
    });
    assert_eq!(drops(&a, TcpLinkDrop::HandshakeTimeout), 0);
    wait_for(
        "the silent client's timeout",
        Duration::from_secs(5),
        || drops(&a, TcpLinkDrop::HandshakeTimeout) == 1,
    );
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_closed(&mut silent);
    assert!(connected(&a), "the live connection stays");
    assert_eq!(a.stats.snapshot().connects, 1);
}

#[test]
fn a_client_sending_garbage_is_refused_at_once_and_counted() {
    let (a, addr) = listen_with(&key(1));
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    wait_for("the refusal", Duration::from_millis(600), || {
        drops(&a, TcpLinkDrop::BadHandshake) == 1
    });
    assert_closed(&mut s);
    assert_eq!(drops(&a, TcpLinkDrop::HandshakeTimeout), 0);
}

#[test]
fn a_hello_round_trips_and_a_bad_one_is_refused() {
    let h = Hello::fresh(Role::Connector, 0xdead_beef).unwrap();
    assert_eq!(Hello::parse(&h.encode()), Ok(h));
    let mut b = h.encode();
    b[0] = b'X';
    assert!(matches!(
        Hello::parse(&b),
        Err(HandshakeError::NotAHello(_))
    ));
    for (at, value) in [(3, 9), (4, 3), (6, 1)] {
        let mut b = h.encode();
        b[at] = value;
        assert!(
            matches!(Hello::parse(&b), Err(HandshakeError::Malformed(_))),
            "byte {at}"
        );
    }
}

#[test]
fn a_hello_for_another_link_id_is_refused_as_a_wrong_link() {
    let ours = Hello::fresh(Role::Listener, 1).unwrap();
    let peer = Hello::fresh(Role::Connector, 2).unwrap();
    let e = ours.check_peer(&peer).unwrap_err();
    assert_eq!(e.drop_reason(), TcpLinkDrop::WrongLinkId);
}

#[test]
fn proofs_bind_the_role_the_nonces_and_the_key() {
    let k = key(7);
    let l = Hello::fresh(Role::Listener, 3).unwrap();
    let c = Hello::fresh(Role::Connector, 3).unwrap();
    let by_connector = auth::prove(&k, &c, &l);
    assert!(auth::verify(&k, &l, &c, &by_connector).is_ok());
    assert_eq!(
        auth::verify(&key(8), &l, &c, &by_connector),
        Err(HandshakeError::BadProof)
    );
    let by_listener = auth::prove(&k, &l, &c);
    assert_ne!(by_listener, by_connector);
    assert!(auth::verify(&k, &l, &c, &by_listener).is_err());
    let other = Hello {
        nonce: [9; NONCE_LEN],
        ..c
    };
    assert!(auth::verify(&k, &l, &other, &by_connector).is_err());
}

#[test]
fn key_files_that_are_missing_or_short_are_refused_naming_the_file_and_the_fix() {
    let dir = std::env::temp_dir().join(format!("weft-key-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let short = dir.join("short");
    std::fs::write(&short, [1u8; 31]).unwrap();
    let missing = dir.join("missing");
    for path in [&short, &missing] {
        let e = LinkKey::from_file(path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("head -c 32 /dev/urandom"), "{e}");
    }
    let good = dir.join("good");
    std::fs::write(&good, [1u8; 32]).unwrap();
    assert!(LinkKey::from_file(&good).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_handshake_fuzz_entry_accepts_nothing_forged() {
    let l = Hello {
        role: Role::Listener,
        link_id: 4,
        nonce: [0x3c; NONCE_LEN],
    };
    let c = Hello::fresh(Role::Connector, 4).unwrap();
    let forged = auth::prove(&key(0), &c, &l);
    let input = [&c.encode()[..], &forged[..]].concat();
    assert!(!crate::tcp_link::fuzz_entry::handshake(&input));
}

proptest! {
    #[test]
    fn the_handshake_fuzz_entry_never_panics(data in proptest::collection::vec(any::<u8>(), 0..120)) {
        prop_assert!(!crate::tcp_link::fuzz_entry::handshake(&data));
    }
}

#[test]
fn key_files_that_are_fifos_directories_symlinks_or_large_are_refused_at_once_without_their_size() {
    let dir = std::env::temp_dir().join(format!("weft-key-kinds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let good = dir.join("good");
    std::fs::write(&good, [1u8; 32]).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let large = dir.join("large");
    std::fs::write(&large, vec![1u8; 12_345]).unwrap();
    let started = std::time::Instant::now();
    for (path, what) in [
        (&fifo, "FIFO"),
        (&dir, "directory"),
        (&link, "symlink"),
        (&large, "larger than 4096"),
    ] {
        let e = LinkKey::from_file(path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains(what), "{e}");
        assert!(
            !e.contains("12345"),
            "the size of a file that is no key: {e}"
        );
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    std::fs::remove_dir_all(&dir).unwrap();
}
