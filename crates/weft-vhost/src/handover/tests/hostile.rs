//! Snapshots a buggy or different binary could send: each refused with a typed error,
//! nothing panics, every descriptor passed is closed, and the old port serves on.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::*;

/// Duplicates of `fds` at descriptor numbers from `min` (above what the tests around
/// open, so that a number found closed afterwards was not reused meanwhile), and those
/// numbers.
fn high_dups(fds: &[OwnedFd], min: RawFd) -> (Vec<OwnedFd>, Vec<RawFd>) {
    fds.iter()
        .map(|fd| {
            // SAFETY: F_DUPFD_CLOEXEC on a valid descriptor returns a new one, owned by the
            // OwnedFd alone.
            let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
            assert!(n >= min, "{}", std::io::Error::last_os_error());
            // SAFETY: `n` was just made and has no other owner.
            (unsafe { OwnedFd::from_raw_fd(n) }, n)
        })
        .unzip()
}

fn is_open(n: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor table.
    unsafe { libc::fcntl(n, libc::F_GETFD) >= 0 }
}

/// Adopts `snapshot` with duplicates of `fds` (at numbers from 700 + 24 × `slot`) and
/// returns why it was refused, after checking every descriptor passed is closed.
fn refusal(
    path: &Path,
    mode: VhostMode,
    config: VhostPortConfig,
    snapshot: PortSnapshot,
    fds: &[OwnedFd],
    slot: i32,
) -> HandoverError {
    let (dir, name) = dir_and_name(path);
    let (passed, numbers) = high_dups(fds, 700 + 24 * slot);
    let result = VhostUserPort::adopt(dir, name, mode, config, snapshot, passed);
    for n in numbers {
        assert!(!is_open(n), "descriptor {n} left open");
    }
    match result {
        Err(VhostError::Handover(e)) => e,
        Err(other) => panic!("not a hand-over error: {other}"),
        Ok(_) => panic!("a hostile snapshot was adopted"),
    }
}

#[test]
fn hostile_snapshots_are_refused_with_typed_errors_and_no_descriptor_left_open() {
    let path = socket_path("hostile");
    let (port, mut rx, mut tx, mut guest) = served_port(&path);
    let suspended = port.suspend(WAIT).unwrap();
    let (good, fds) = suspended.snapshot().unwrap();
    let conn = good.connection.clone().unwrap();
    let config = VhostPortConfig::default();
    let server = VhostMode::Server;
    let edit = |f: &dyn Fn(&mut PortSnapshot, &mut ConnectionSnapshot)| {
        let mut s = good.clone();
        let mut c = conn.clone();
        f(&mut s, &mut c);
        s.connection = Some(c);
        s
    };

    let e = refusal(&path, server, config, edit(&|s, _| s.version = 2), &fds, 0);
    assert!(
        matches!(
            e,
            HandoverError::Version {
                found: 2,
                expected: 1
            }
        ),
        "{e}"
    );

    let s = edit(&|_, c| c.rings[RX_QUEUE].call = Some(99));
    let e = refusal(&path, server, config, s, &fds, 1);
    assert!(matches!(e, HandoverError::FdIndex { index: 99, .. }), "{e}");

    let s = edit(&|_, c| c.rings[TX_QUEUE].call = c.rings[RX_QUEUE].call);
    let e = refusal(&path, server, config, s, &fds, 2);
    assert!(
        matches!(
            e,
            HandoverError::FdReused {
                what: "call eventfd",
                ..
            }
        ),
        "{e}"
    );

    // A regular file where the connection's socket should be.
    let mut swapped: Vec<OwnedFd> = fds.iter().map(|f| f.try_clone().unwrap()).collect();
    swapped[conn.socket] = OwnedFd::from(tempfile::tempfile().unwrap());
    let e = refusal(&path, server, config, good.clone(), &swapped, 3);
    assert!(
        matches!(
            e,
            HandoverError::FdKind {
                what: "connection",
                found: "a regular file",
                ..
            }
        ),
        "{e}"
    );

    // An eventfd where the listener should be.
    let mut swapped: Vec<OwnedFd> = fds.iter().map(|f| f.try_clone().unwrap()).collect();
    swapped[0] = fds[conn.rings[RX_QUEUE].call.unwrap()].try_clone().unwrap();
    let e = refusal(&path, server, config, good.clone(), &swapped, 4);
    assert!(
        matches!(
            e,
            HandoverError::FdKind {
                what: "listening socket",
                ..
            }
        ),
        "{e}"
    );

    // A descriptor passed that the snapshot does not name.
    let mut extra: Vec<OwnedFd> = fds.iter().map(|f| f.try_clone().unwrap()).collect();
    extra.push(fds[0].try_clone().unwrap());
    let e = refusal(&path, server, config, good.clone(), &extra, 5);
    assert!(matches!(e, HandoverError::FdUnused(7)), "{e}");

    let s = edit(&|_, c| c.memory.as_mut().unwrap()[0].size = 2 << 40);
    let e = refusal(&path, server, config, s, &fds, 6);
    assert!(
        matches!(e, HandoverError::Memory(MemoryTableError::TooLarge { .. })),
        "{e}"
    );

    let s = edit(&|_, c| c.rings[TX_QUEUE].size = Some(3));
    let e = refusal(&path, server, config, s, &fds, 7);
    assert!(
        matches!(&e, HandoverError::Refused { request, .. } if request == "SET_VRING_NUM (tx0)"),
        "{e}"
    );

    let s = edit(&|_, c| {
        let addrs = c.rings[TX_QUEUE].addrs.as_mut().unwrap();
        addrs.desc = VA + crate::tests::testutil::GUEST_MEM + 0x1000;
    });
    let e = refusal(&path, server, config, s, &fds, 8);
    assert!(
        matches!(&e, HandoverError::Refused { request, reason }
            if request == "SET_VRING_KICK (tx0)" && reason.contains("outside the memory")),
        "{e}"
    );

    // The guest's used ring says the data path stopped elsewhere.
    let s = edit(&|_, c| c.rings[TX_QUEUE].base += 1);
    let e = refusal(&path, server, config, s, &fds, 9);
    assert!(
        matches!(e, HandoverError::UsedIndex { queue: "tx0", .. }),
        "{e}"
    );

    let s = edit(&|_, c| c.rings[TX_QUEUE].started = false);
    let e = refusal(&path, server, config, s, &fds, 10);
    assert!(matches!(e, HandoverError::Inconsistent(_)), "{e}");

    // A snapshot of another kind of port than the one configured here.
    let e = refusal(&path, VhostMode::Client, config, good.clone(), &fds, 11);
    assert!(
        matches!(
            e,
            HandoverError::Mode {
                expected: "client",
                ..
            }
        ),
        "{e}"
    );
    let pairs = VhostPortConfig {
        queue_pairs: 2,
        ..config
    };
    let e = refusal(&path, server, pairs, good.clone(), &fds, 12);
    assert!(
        matches!(
            e,
            HandoverError::QueueCount {
                expected: 4,
                found: 2
            }
        ),
        "{e}"
    );
    let plain = VhostPortConfig {
        offloads: false,
        ..config
    };
    let e = refusal(&path, server, plain, good.clone(), &fds, 13);
    assert!(
        matches!(&e, HandoverError::Refused { request, .. } if request == "SET_FEATURES"),
        "{e}"
    );

    // The old port never noticed.
    drop(fds);
    suspended.resume();
    assert_traffic(&mut guest, &mut rx, &mut tx, 11);
    assert!(path.exists());
}
