//! Hand-over between two ports (in one process: the old one's descriptors are duplicated
//! to the new one, as SCM_RIGHTS would), with the `vhost` crate's frontend as the peer.
//!
//! The old port stays suspended until the new one is adopted, and is then released
//! ([`SuspendedPort::release`]) and dropped: a released port's drop leaves the connection
//! and the socket alone, as the old weftd's `exit` without destructors does — and unlike
//! `std::mem::forget`, which would leave its control thread parked for the rest of the
//! test run. That the drop really leaves them alone is part of what the tests pin: the
//! frontend is served after it.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use vhost::vhost_user::message::VhostUserVirtioFeatures;
use vhost::VhostBackend;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_packet::OffloadInfo;
use weft_switch::{PortTx, TxFrame};

use super::*;
use crate::memory::MemoryTableError;
use crate::server::tests::{assert_traffic, receive, socket_path, wait_for, Guest, VA};
use crate::tests::testutil::{ether_frame, readable};
use crate::vring::{RX_QUEUE, TX_QUEUE};

mod hostile;

const WAIT: Duration = Duration::from_secs(5);

/// A listening port at `path` with a frontend whose rings run, and the port's halves.
fn served_port(path: &Path) -> (VhostUserPort, crate::VhostPortRx, crate::VhostPortTx, Guest) {
    let mut port = VhostUserPort::listen(path, VhostPortConfig::default()).unwrap();
    let (rx, tx) = port.take_halves().unwrap();
    let mut guest = Guest::connect(path);
    guest.start();
    assert!(port.wait_running(WAIT));
    // The test frontend acknowledges everything offered; a real one acknowledges
    // `LOG_ALL` only while it migrates the guest.
    let log_all = VhostUserVirtioFeatures::LOG_ALL.bits();
    guest.fe.set_features(port.features() & !log_all).unwrap();
    (port, rx, tx, guest)
}

fn dir_and_name(path: &Path) -> (Arc<SocketDir>, &OsStr) {
    let dir = SocketDir::open(path.parent().unwrap()).unwrap();
    (Arc::new(dir), path.file_name().unwrap())
}

/// `snapshot` through JSON, as weftd passes it.
fn through_json(snapshot: &PortSnapshot) -> PortSnapshot {
    serde_json::from_str(&serde_json::to_string(snapshot).unwrap()).unwrap()
}

fn drain_calls(guest: &Guest) {
    for call in &guest.call {
        let _ = call.read();
    }
}

#[test]
fn a_port_handed_over_serves_the_same_frontend_with_every_frame_once_in_order() {
    let path = socket_path("handover");
    let (old, mut old_rx, mut old_tx, mut guest) = served_port(&path);
    assert_traffic(&mut guest, &mut old_rx, &mut old_tx, 1);
    // Frames the guest queues while the old workers are paused: nobody took them yet.
    let before: Vec<Vec<u8>> = (0..3).map(|i| ether_frame(1, 2, 100 + i, 10)).collect();
    for f in &before {
        guest.txq.send(&[0; 12], f, &[]);
    }
    drain_calls(&guest);

    let suspended = old.suspend(WAIT).unwrap();
    let (snapshot, fds) = suspended.snapshot().unwrap();
    // Every running ring's guest was interrupted: nothing held back is lost.
    for call in &guest.call {
        assert!(readable(call.as_raw_fd()));
    }
    let c = snapshot.connection.clone().unwrap();
    assert_eq!(c.rings[TX_QUEUE].base, 1, "one frame taken before");
    assert!(c.rings[RX_QUEUE].started && c.rings[RX_QUEUE].kick.is_some());
    assert_eq!(snapshot.listener, Some(0));
    assert_eq!(c.socket, 1);
    let (dir, name) = dir_and_name(&path);
    let mut new = VhostUserPort::adopt(
        dir,
        name,
        VhostMode::Server,
        VhostPortConfig::default(),
        through_json(&snapshot),
        fds,
    )
    .unwrap();
    // The old process's end: it lets go of nothing the frontend sees.
    suspended.release();
    drop((old_rx, old_tx));
    drop(old);
    assert!(path.exists(), "the socket stays for the new port");

    assert!(new.is_connected() && new.is_running());
    assert_eq!(new.features(), c.features);
    let (mut rx, mut tx) = new.take_halves().unwrap();
    let after: Vec<Vec<u8>> = (0..3).map(|i| ether_frame(1, 2, 200 + i, 20)).collect();
    for f in &after {
        guest.txq.send(&[0; 12], f, &[]);
    }
    let mut got = Vec::new();
    while got.len() < 6 {
        let frames = receive(&mut rx);
        assert!(!frames.is_empty(), "frames missing: {got:?}");
        got.extend(frames);
    }
    assert_eq!(got, [before, after].concat());
    assert!(receive(&mut rx).is_empty(), "nothing twice");
    // Every chain the guest gave went back to it once.
    assert_eq!(guest.txq.take_used().len(), 1 + 6);

    // Toward the guest through the new halves.
    guest.rxq.post_rx(1, 2048);
    let back = ether_frame(2, 1, 300, 7);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&back, OffloadInfo::default())]),
        1
    );
    let (id, len) = guest.rxq.take_used()[0];
    assert_eq!(&guest.rxq.read_rx(id, len)[12..], &back[..]);

    // A request asking for an acknowledgement is answered by the new port (the `vhost`
    // crate's handler knows REPLY_ACK was negotiated), on the same connection.
    let call = EventFd::new(EFD_NONBLOCK).unwrap();
    guest.fe.set_vring_call(TX_QUEUE, &call).unwrap();
    assert_eq!(new.connections(), 1);
    assert_traffic(&mut guest, &mut rx, &mut tx, 3);
}

#[test]
fn a_port_suspended_then_resumed_serves_on_and_answers_what_came_meanwhile() {
    let path = socket_path("resume");
    let (port, mut rx, mut tx, mut guest) = served_port(&path);
    let suspended = port.suspend(WAIT).unwrap();
    assert!(matches!(
        port.suspend(Duration::from_millis(10)),
        Err(VhostError::Handover(HandoverError::AlreadySuspended))
    ));
    let (snapshot, fds) = suspended.snapshot().unwrap();
    assert!(snapshot.connection.is_some());
    drop(fds);
    let call = EventFd::new(EFD_NONBLOCK).unwrap();
    std::thread::scope(|s| {
        // A request sent while parked waits; it is answered once the port resumes.
        let request = s.spawn(|| guest.fe.set_vring_call(TX_QUEUE, &call));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!request.is_finished(), "answered while suspended");
        suspended.resume();
        request.join().unwrap().unwrap();
    });
    assert!(port.is_connected() && port.is_running());
    assert_traffic(&mut guest, &mut rx, &mut tx, 4);
    // Suspending again works, and dropping the suspension resumes too.
    drop(port.suspend(WAIT).unwrap());
    assert_traffic(&mut guest, &mut rx, &mut tx, 5);
}

#[test]
fn a_frontend_halfway_through_a_message_makes_suspend_fail_and_the_port_serves_on() {
    let path = socket_path("halfway");
    let port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let mut raw = UnixStream::connect(&path).unwrap();
    wait_for("the connection", || port.is_connected());
    // GET_FEATURES, cut after 6 of its 12 header bytes.
    let mut header = Vec::new();
    for word in [1u32, 1, 0] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    raw.write_all(&header[..6]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(matches!(
        port.suspend(Duration::from_millis(200)),
        Err(VhostError::Handover(HandoverError::SuspendTimeout(_)))
    ));
    raw.write_all(&header[6..]).unwrap();
    let mut reply = [0u8; 20];
    raw.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..4], &1u32.to_le_bytes(), "GET_FEATURES answered");
    // Between messages now: it parks.
    drop(port.suspend(WAIT).unwrap());
}

#[test]
fn an_adopted_server_port_serves_the_next_frontend_on_its_socket_and_removes_it_when_dropped() {
    let path = socket_path("adopted-next");
    let (old, old_rx, old_tx, guest) = served_port(&path);
    let suspended = old.suspend(WAIT).unwrap();
    let (snapshot, fds) = suspended.snapshot().unwrap();
    let (dir, name) = dir_and_name(&path);
    let mut new = VhostUserPort::adopt(
        dir,
        name,
        VhostMode::Server,
        VhostPortConfig::default(),
        snapshot,
        fds,
    )
    .unwrap();
    suspended.release();
    drop((old_rx, old_tx, old));
    let (mut rx, mut tx) = new.take_halves().unwrap();
    drop(guest);
    wait_for("the frontend to go", || !new.is_connected());
    let mut next = Guest::connect(&path);
    next.start();
    assert!(new.wait_running(WAIT));
    assert_traffic(&mut next, &mut rx, &mut tx, 6);
    assert_eq!(new.connections(), 2);
    drop(new);
    assert!(
        !path.exists(),
        "the adopted socket is removed with the port"
    );
}

#[test]
fn a_port_without_a_frontend_hands_over_its_listener_alone() {
    let path = socket_path("idle");
    let old = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let suspended = old.suspend(WAIT).unwrap();
    let (snapshot, fds) = suspended.snapshot().unwrap();
    assert_eq!(
        (snapshot.listener, snapshot.connection.is_none()),
        (Some(0), true)
    );
    assert_eq!(fds.len(), 1);
    let (dir, name) = dir_and_name(&path);
    let mut new = VhostUserPort::adopt(
        dir,
        name,
        VhostMode::Server,
        VhostPortConfig::default(),
        snapshot,
        fds,
    )
    .unwrap();
    suspended.release();
    drop(old);
    let (mut rx, mut tx) = new.take_halves().unwrap();
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(new.wait_running(WAIT));
    assert_traffic(&mut guest, &mut rx, &mut tx, 8);
}

#[test]
fn a_snapshot_is_refused_while_a_live_migration_logs_and_taken_once_it_ends() {
    let path = socket_path("logging");
    let (port, mut rx, mut tx, mut guest) = served_port(&path);
    let features = port.features();
    let log_all = VhostUserVirtioFeatures::LOG_ALL.bits();
    guest.fe.set_features(features | log_all).unwrap();
    let suspended = port.suspend(WAIT).unwrap();
    assert!(matches!(
        suspended.snapshot(),
        Err(VhostError::Handover(HandoverError::Logging))
    ));
    suspended.resume();
    assert_traffic(&mut guest, &mut rx, &mut tx, 9);
    guest.fe.set_features(features).unwrap();
    let suspended = port.suspend(WAIT).unwrap();
    assert!(suspended.snapshot().is_ok());
}

#[test]
fn a_snapshot_is_refused_while_a_batch_holds_chains() {
    let path = socket_path("in-flight");
    let (port, mut rx, _tx, mut guest) = served_port(&path);
    guest.txq.send(&[0; 12], &ether_frame(1, 2, 100, 1), &[]);
    let mut batch = weft_switch::RxBatch::new(64);
    weft_switch::PortRx::receive(&mut rx, &mut batch);
    assert_eq!(batch.descs().len(), 1);
    // Not finished: the chain is lent to the batch.
    let suspended = port.suspend(WAIT).unwrap();
    assert!(matches!(
        suspended.snapshot(),
        Err(VhostError::Handover(HandoverError::InFlight {
            count: 1,
            ..
        }))
    ));
    weft_switch::PortRx::finish(&mut rx);
    let (snapshot, _fds) = suspended.snapshot().unwrap();
    assert_eq!(snapshot.connection.unwrap().rings[TX_QUEUE].base, 1);
}

/// The port's next connection to `listener` (the frontend's socket), within `WAIT`.
fn accept(listener: &UnixListener) -> UnixStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the port did not connect"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_adopted_client_port_serves_the_frontend_and_reconnects_to_it_afterwards() {
    let path = socket_path("client-handover");
    let listener = UnixListener::bind(&path).unwrap();
    let mut old = VhostUserPort::connect(&path, VhostPortConfig::default()).unwrap();
    let (old_rx, old_tx) = old.take_halves().unwrap();
    let mut guest = Guest::from_stream(accept(&listener));
    guest.start();
    assert!(old.wait_running(WAIT));
    let log_all = VhostUserVirtioFeatures::LOG_ALL.bits();
    guest.fe.set_features(old.features() & !log_all).unwrap();
    let suspended = old.suspend(WAIT).unwrap();
    let (snapshot, fds) = suspended.snapshot().unwrap();
    assert_eq!(snapshot.listener, None);
    let (dir, name) = dir_and_name(&path);
    let mut new = VhostUserPort::adopt(
        dir,
        name,
        VhostMode::Client,
        VhostPortConfig::default(),
        through_json(&snapshot),
        fds,
    )
    .unwrap();
    suspended.release();
    drop((old_rx, old_tx, old));
    let (mut rx, mut tx) = new.take_halves().unwrap();
    assert_traffic(&mut guest, &mut rx, &mut tx, 12);
    // The frontend drops the connection: the adopted port connects again, to the same path.
    drop(guest);
    let mut guest = Guest::from_stream(accept(&listener));
    guest.start();
    assert!(new.wait_running(WAIT));
    assert_traffic(&mut guest, &mut rx, &mut tx, 13);
    assert_eq!(new.connections(), 2);
    drop(new);
    assert!(
        path.exists(),
        "a client port never removes the frontend's socket"
    );
}
