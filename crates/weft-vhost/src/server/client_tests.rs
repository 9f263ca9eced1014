//! Client mode: the port connects to a frontend's socket, and keeps reconnecting as the
//! frontend comes and goes. The frontend here is the `vhost` crate's, on a listener the
//! test controls.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;

use super::tests::{assert_traffic, socket_path, wait_for, Guest};
use super::*;
use std::os::unix::net::UnixStream;
use vhost::VhostBackend;

/// Accepts the port's next connection, waiting at most `timeout`.
fn accept_within(listener: &UnixListener, timeout: Duration) -> Option<UnixStream> {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return Some(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Accepts the port's next connection and sets everything up over it, as QEMU would.
fn next_frontend(listener: &UnixListener, port: &VhostUserPort, what: &str) -> Guest {
    let stream = accept_within(listener, Duration::from_secs(2)).expect(what);
    let mut guest = Guest::from_stream(stream);
    guest.start();
    assert!(
        port.wait_running(Duration::from_secs(5)),
        "{what}: rings not running"
    );
    guest
}

#[test]
fn a_client_port_connects_to_a_frontend_that_appears_late_and_reconnects_after_each_drop() {
    let path = socket_path("client");
    let mut port = VhostUserPort::connect(&path, VhostPortConfig::default()).unwrap();
    assert_eq!(port.mode(), VhostMode::Client);
    let (mut rx, mut tx) = port.take_halves().unwrap();
    // No socket yet: the port keeps trying, with nothing connected.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!port.is_connected());
    assert_eq!(port.connections(), 0);

    // The frontend appears: the port connects within one capped backoff.
    let listener = UnixListener::bind(&path).unwrap();
    let mut guest = next_frontend(&listener, &port, "the port connects");
    assert_traffic(&mut guest, &mut rx, &mut tx, 1);

    // The frontend drops the connection but keeps listening: the port reconnects at once,
    // and the same halves carry the new connection's frames.
    drop(guest);
    let mut guest = next_frontend(&listener, &port, "the port reconnects");
    assert_traffic(&mut guest, &mut rx, &mut tx, 2);

    // The frontend goes away entirely (a QEMU restart), then listens again on the same path.
    drop(listener);
    std::fs::remove_file(&path).unwrap();
    drop(guest);
    wait_for("the disconnect", || !port.is_connected());
    assert!(!port.is_running());
    std::thread::sleep(Duration::from_millis(1500));
    let listener = UnixListener::bind(&path).unwrap();
    let mut guest = next_frontend(
        &listener,
        &port,
        "the port reconnects to the new socket within the 1 s backoff cap",
    );
    assert_traffic(&mut guest, &mut rx, &mut tx, 3);
    assert_eq!(port.connections(), 3);
    drop(port);
    assert!(
        path.exists(),
        "a client port leaves the frontend's socket alone"
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_frontend_that_accepts_and_closes_at_once_is_retried_with_backoff() {
    let path = socket_path("flap");
    let listener = UnixListener::bind(&path).unwrap();
    let port = VhostUserPort::connect(&path, VhostPortConfig::default()).unwrap();
    let started = Instant::now();
    let mut accepted = 0;
    while started.elapsed() < Duration::from_millis(700) {
        if let Some(s) = accept_within(&listener, Duration::from_millis(100)) {
            accepted += 1;
            drop(s);
        }
    }
    // Waits of 50, 100, 200, 400 ms between short-lived connections: about five attempts
    // in 700 ms, not hundreds.
    assert!(
        (2..=8).contains(&accepted),
        "{accepted} connections in 700 ms"
    );
    assert_eq!(port.connections(), accepted);
    drop(port);
    std::fs::remove_file(&path).unwrap();
}

/// Dropping `port` takes well under one backoff step.
fn assert_drops_promptly(port: VhostUserPort) {
    let started = Instant::now();
    drop(port);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(200), "drop took {took:?}");
}

#[test]
fn dropping_a_client_port_is_prompt_while_it_backs_off_or_serves() {
    let path = socket_path("client-drop");
    let port = VhostUserPort::connect(&path, VhostPortConfig::default()).unwrap();
    // Long enough for the backoff to reach its 1 s cap.
    std::thread::sleep(Duration::from_millis(1600));
    assert_drops_promptly(port);

    let listener = UnixListener::bind(&path).unwrap();
    let port = VhostUserPort::connect(&path, VhostPortConfig::default()).unwrap();
    let guest = next_frontend(&listener, &port, "the port connects");
    assert_drops_promptly(port);
    assert!(guest.fe.get_features().is_err(), "the connection is cut");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn open_picks_listen_or_connect_by_mode() {
    let path = socket_path("open");
    let server = VhostUserPort::open(&path, VhostMode::Server, VhostPortConfig::default()).unwrap();
    assert_eq!(server.mode(), VhostMode::Server);
    assert!(path.exists(), "a server port creates its socket");
    // Any process listening on the path is connected to, here another port's socket.
    let client = VhostUserPort::open(&path, VhostMode::Client, VhostPortConfig::default()).unwrap();
    wait_for("the client to connect", || server.is_connected());
    assert_eq!(client.mode(), VhostMode::Client);
    drop(client);
    drop(server);
    assert!(!path.exists());
}

#[test]
fn a_frontend_that_never_accepts_does_not_hold_up_dropping_the_port() {
    use nix::sys::socket::{
        bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
    };
    let path = socket_path("full");
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(fd.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
    listen(&fd, Backlog::new(0).unwrap()).unwrap();
    // Fill the backlog: a blocking connect would now wait until the frontend accepts.
    let _queued = UnixStream::connect(&path).unwrap();
    let port = VhostUserPort::connect(&path, VhostPortConfig::default()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!port.is_connected());
    assert_drops_promptly(port);
    std::fs::remove_file(&path).unwrap();
}
