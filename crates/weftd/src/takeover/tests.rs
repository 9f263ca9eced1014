//! The running weftd's side of a hand-over against a scripted new weftd: refusals, a new
//! weftd that gives up or dies, and the new side's checks of what it receives. (A hand-over
//! that succeeds ends the process: the end-to-end tests run those.)

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_control::state::{State, SwitchSettings, SwitchState};
use weft_control::{Request, Response};

use super::channel::HandoverChannel;
use super::give::{self, Served};
use super::protocol::{Answer, Hello, Listeners, Offer, PortOffer, Verdict, PROTOCOL};
use super::take::{self, TakeError};
use crate::config::WorkersConfig;
use crate::control::pool::WorkerPool;
use crate::control::{Controller, DevicePaths};
use crate::devices::VhostPolicy;

struct Old {
    dir: tempfile::TempDir,
    controller: Arc<Mutex<Controller>>,
    _control: UnixListener,
}

impl Old {
    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("takeover.sock")
    }

    /// Whether the workers run jobs (a held worker does not).
    fn workers_answer(&self) -> bool {
        let mut c = crate::control::lock(&self.controller);
        let mut session = crate::control::Session::default();
        matches!(
            c.handle(Request::Stats { switch: None }, &mut session),
            Ok(Response::Stats { .. })
        )
    }

    fn channel(&self) -> HandoverChannel {
        let stream = UnixStream::connect(self.socket()).unwrap();
        HandoverChannel::new(stream, Duration::from_secs(10)).unwrap()
    }
}

/// A running weftd's controller (switch br0, no ports) serving hand-overs.
fn old() -> Old {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("vhost")).unwrap();
    let sockets =
        crate::socket_dirs::SocketDirs::open(&dir.path().join("vhost"), &[], &[]).unwrap();
    let pool = WorkerPool::start(&WorkersConfig::default()).unwrap();
    let state = State {
        version: 1,
        switches: vec![SwitchState {
            name: "br0".into(),
            settings: SwitchSettings::default(),
            ports: Vec::new(),
            static_macs: Vec::new(),
            rules: Vec::new(),
            on_demand: false,
        }],
    };
    let paths = DevicePaths::new(dir.path().join("state.json"), VhostPolicy::new(sockets));
    let (c, _) = Controller::start(pool, paths, state, true).unwrap();
    let controller = Arc::new(Mutex::new(c));
    let lock = std::fs::File::create(dir.path().join("weftd.lock")).unwrap();
    let control = UnixListener::bind(dir.path().join("weftd.sock")).unwrap();
    let dup = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().unwrap();
    let served = Served {
        lock: OwnedFd::from(lock),
        control: dup(control.as_fd()),
        stdio: [
            dup(std::io::stdout().as_fd()),
            dup(std::io::stderr().as_fd()),
        ],
        control_tcp: None,
        metrics: None,
    };
    give::spawn(
        &dir.path().join("takeover.sock"),
        Arc::clone(&controller),
        served,
    )
    .unwrap();
    Old {
        dir,
        controller,
        _control: control,
    }
}

fn hello(protocol: u32) -> Hello {
    Hello {
        protocol,
        version: "9.9.9".into(),
    }
}

#[test]
fn a_new_weftd_of_another_protocol_is_refused_and_the_old_one_carries_on() {
    let old = old();
    let mut ch = old.channel();
    ch.send(&hello(PROTOCOL + 1), &[]).unwrap();
    let (answer, fds) = ch.recv::<Answer>().unwrap();
    assert!(fds.is_empty());
    let Answer::Refuse { reason } = answer else {
        panic!("offered to a binary of another protocol: {answer:?}")
    };
    assert!(
        reason.contains(&format!("protocol {PROTOCOL}")) && reason.contains("restart"),
        "{reason}"
    );
    assert!(old.workers_answer());
}

/// Asks for the hand-over and reads the offer and its ports.
fn take_offer(ch: &mut HandoverChannel) -> (Offer, usize) {
    ch.send(&hello(PROTOCOL), &[]).unwrap();
    let (answer, fds) = ch.recv::<Answer>().unwrap();
    let Answer::Offer(offer) = answer else {
        panic!("refused: {answer:?}")
    };
    assert_eq!(fds.len(), offer.listeners.fd_count());
    for _ in 0..offer.ports {
        ch.recv::<PortOffer>().unwrap();
    }
    let fd_count = fds.len();
    (*offer, fd_count)
}

#[test]
fn an_abandoned_hand_over_lets_the_old_weftd_carry_on_and_offer_again() {
    let old = old();
    let mut ch = old.channel();
    let (offer, fds) = take_offer(&mut ch);
    assert_eq!(offer.state.switches.len(), 1);
    assert_eq!(offer.pid, std::process::id());
    assert_eq!(fds, 4, "lock, control socket, stdout, stderr");
    ch.send(
        &Verdict::Abandon {
            reason: "testing".into(),
        },
        &[],
    )
    .unwrap();
    // The old weftd resumes: its workers run jobs again, and it hands over again.
    let answered = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        old.workers_answer()
    });
    assert!(answered, "the workers stayed held");
    let mut again = old.channel();
    take_offer(&mut again);
}

#[test]
fn a_new_weftd_that_dies_mid_hand_over_lets_the_old_one_carry_on() {
    let old = old();
    let mut ch = old.channel();
    take_offer(&mut ch);
    drop(ch);
    let answered = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        old.workers_answer()
    });
    assert!(
        answered,
        "the workers stayed held after the new weftd went away"
    );
}

#[test]
fn the_new_side_refuses_an_offer_with_descriptors_missing_or_a_foreign_lock() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("takeover.sock");
    let lock_path = dir.path().join("weftd.lock");
    std::fs::write(&lock_path, b"").unwrap();
    let listener = UnixListener::bind(&socket).unwrap();
    let offer = |listeners| {
        Answer::Offer(Box::new(Offer {
            version: "0".into(),
            pid: 1,
            state: State {
                version: 1,
                switches: Vec::new(),
            },
            listeners,
            ports: 0,
            fdb: Vec::new(),
            notify_socket: None,
        }))
    };
    let plain = Listeners {
        control_tcp: false,
        metrics: false,
    };
    let other_file = tempfile::tempfile().unwrap();
    let control = UnixListener::bind(dir.path().join("c.sock")).unwrap();
    let cases: Vec<(Answer, Vec<OwnedFd>, &str)> = vec![
        (offer(plain), Vec::new(), "descriptors came with the offer"),
        (
            offer(plain),
            vec![
                OwnedFd::from(other_file),
                control.as_fd().try_clone_to_owned().unwrap(),
                std::io::stdout().as_fd().try_clone_to_owned().unwrap(),
                std::io::stderr().as_fd().try_clone_to_owned().unwrap(),
            ],
            "another runtime directory",
        ),
        (
            offer(plain),
            vec![
                OwnedFd::from(std::fs::File::open(&lock_path).unwrap()),
                std::io::stdout().as_fd().try_clone_to_owned().unwrap(),
                std::io::stdout().as_fd().try_clone_to_owned().unwrap(),
                std::io::stderr().as_fd().try_clone_to_owned().unwrap(),
            ],
            "not a listening socket",
        ),
    ];
    for (answer, fds, expected) in cases {
        let server = std::thread::scope(|s| {
            let old = s.spawn(|| {
                let (stream, _) = listener.accept().unwrap();
                let mut ch = HandoverChannel::new(stream, Duration::from_secs(5)).unwrap();
                let (_hello, _) = ch.recv::<Hello>().unwrap();
                let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
                ch.send(&answer, &borrowed).unwrap();
            });
            let got = take::receive(&socket, &lock_path);
            old.join().unwrap();
            got
        });
        match server {
            Err(TakeError::Malformed(m)) => assert!(m.contains(expected), "{m}"),
            other => panic!("expected a refusal naming {expected:?}: {other:?}"),
        }
    }
}
