//! Hand-overs that do not hold are refused with a typed error, never a panic.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::OwnedFd;

use super::sockets::{can_run, config, lo, port};
use crate::vxlan::handover::{BoundSocket, PendingDatagrams};
use crate::{HandoverError, OverlayError, VxlanConfig, VxlanHandover, VxlanPort};

/// A port on its own loopback address, its hand-over, then `spoil` applied to the
/// hand-over and what adopting it says.
fn adopt_spoiled(
    last: u8,
    spoil: impl FnOnce(&VxlanConfig, &mut VxlanHandover, &mut Vec<OwnedFd>),
) -> Result<VxlanPort, OverlayError> {
    let c = config(lo(last), port(62), port(63)).remote(lo(2));
    let opened = VxlanPort::open(&c).unwrap();
    let (mut h, mut fds) = opened.handover_source().handover().unwrap();
    spoil(&c, &mut h, &mut fds);
    VxlanPort::adopt(&c, h, fds)
}

fn refusal(r: Result<VxlanPort, OverlayError>) -> HandoverError {
    match r {
        Err(OverlayError::Handover(e)) => e,
        Err(e) => panic!("not a hand-over error: {e}"),
        Ok(_) => panic!("adopted"),
    }
}

#[test]
fn an_unspoiled_hand_over_is_adopted() {
    if !can_run("an_unspoiled_hand_over_is_adopted") {
        return;
    }
    assert!(adopt_spoiled(101, |_, _, _| {}).is_ok());
}

#[test]
fn a_hand_over_of_another_version_is_refused() {
    if !can_run("a_hand_over_of_another_version_is_refused") {
        return;
    }
    let e = refusal(adopt_spoiled(102, |_, h, _| h.version = 99));
    assert!(matches!(e, HandoverError::Version { found: 99, .. }), "{e}");
}

#[test]
fn descriptor_indexes_out_of_range_named_twice_or_left_over_are_refused() {
    if !can_run("descriptor_indexes_out_of_range_named_twice_or_left_over_are_refused") {
        return;
    }
    let e = refusal(adopt_spoiled(103, |_, h, _| h.receive_fd = 1000));
    assert!(
        matches!(e, HandoverError::FdIndex { index: 1000, .. }),
        "{e}"
    );
    let e = refusal(adopt_spoiled(103, |_, h, _| {
        h.bound.push(BoundSocket { fd: 0, port: 1 });
    }));
    assert!(matches!(e, HandoverError::FdReused(0)), "{e}");
    let e = refusal(adopt_spoiled(103, |_, _, fds| {
        fds.push(OwnedFd::from(std::fs::File::open("/dev/null").unwrap()));
    }));
    assert!(
        matches!(e, HandoverError::FdUnused { unused: 1, .. }),
        "{e}"
    );
}

#[test]
fn a_file_or_a_tcp_socket_in_place_of_the_udp_socket_is_refused() {
    if !can_run("a_file_or_a_tcp_socket_in_place_of_the_udp_socket_is_refused") {
        return;
    }
    let e = refusal(adopt_spoiled(104, |_, h, fds| {
        fds[h.receive_fd] = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    }));
    assert!(matches!(e, HandoverError::NotASocket { .. }), "{e}");
    let e = refusal(adopt_spoiled(104, |_, h, fds| {
        let tcp = TcpListener::bind(SocketAddr::new(lo(104), 0)).unwrap();
        fds[h.receive_fd] = OwnedFd::from(tcp);
    }));
    assert!(matches!(e, HandoverError::WrongSocket { .. }), "{e}");
    let e = refusal(adopt_spoiled(104, |_, h, fds| {
        let Some(raw) = h.raw_fd else { return };
        // The receive socket where the raw one belongs.
        fds[raw] = fds[h.receive_fd].try_clone().unwrap();
    }));
    assert!(matches!(e, HandoverError::WrongSocket { .. }), "{e}");
}

#[test]
fn sockets_bound_elsewhere_than_the_configuration_are_refused() {
    if !can_run("sockets_bound_elsewhere_than_the_configuration_are_refused") {
        return;
    }
    let e = refusal(adopt_spoiled(105, |_, h, fds| {
        let other = UdpSocket::bind(SocketAddr::new(lo(105), 0)).unwrap();
        fds[h.receive_fd] = OwnedFd::from(other);
    }));
    assert!(matches!(e, HandoverError::WrongAddress { .. }), "{e}");
    let e = refusal(adopt_spoiled(105, |_, h, _| h.bound[0].port ^= 1));
    assert!(matches!(e, HandoverError::WrongAddress { .. }), "{e}");
    // Adopted under a configuration for another address.
    let c = config(lo(106), port(62), port(63));
    let opened = VxlanPort::open(&c).unwrap();
    let (h, fds) = opened.handover_source().handover().unwrap();
    let elsewhere = config(lo(107), port(62), port(63));
    let e = refusal(VxlanPort::adopt(&elsewhere, h, fds));
    assert!(matches!(e, HandoverError::WrongAddress { .. }), "{e}");
}

#[test]
fn garbage_pending_datagrams_and_mtus_are_refused() {
    if !can_run("garbage_pending_datagrams_and_mtus_are_refused") {
        return;
    }
    let pending = |segment, len| PendingDatagrams {
        source: lo(2),
        segment,
        truncated: false,
        bytes: vec![0; len],
    };
    for (segment, len, count) in [(0, 100, 1), (100, 0, 1), (100, 1 << 20, 1), (1, 60, 10_000)] {
        let e = refusal(adopt_spoiled(108, |_, h, _| {
            h.pending = vec![pending(segment, len); count];
        }));
        assert!(matches!(e, HandoverError::BadState(_)), "{e}");
    }
    let e = refusal(adopt_spoiled(108, |_, h, _| {
        h.pending = vec![PendingDatagrams {
            source: "::1".parse().unwrap(),
            ..pending(60, 60)
        }];
    }));
    assert!(matches!(e, HandoverError::BadState(_)), "{e}");
    for mtu in [0, usize::MAX] {
        let e = refusal(adopt_spoiled(108, |_, h, _| h.mtu = mtu));
        assert!(matches!(e, HandoverError::BadState(_)), "{e}");
    }
    let e = refusal(adopt_spoiled(108, |_, h, _| {
        h.learned.push(crate::vxlan::handover::LearnedRemote {
            mac: [2, 0, 0, 0, 0, 9],
            endpoint: lo(108),
            age_ms: 0,
        });
    }));
    assert!(matches!(e, HandoverError::BadState(_)), "{e}");
}

#[test]
fn a_description_with_bytes_that_are_not_hex_does_not_parse() {
    let json = r#"{"source":"127.0.0.2","segment":1,"truncated":false,"bytes":"0g"}"#;
    assert!(serde_json::from_str::<PendingDatagrams>(json).is_err());
    let odd = json.replace("0g", "abc");
    assert!(serde_json::from_str::<PendingDatagrams>(&odd).is_err());
    let fine = json.replace("0g", "0aFf");
    let p: PendingDatagrams = serde_json::from_str(&fine).unwrap();
    assert_eq!(p.bytes, [0x0a, 0xff]);
}
