//! The flood list while the port runs: the directory's VTEPs joining the configured remotes
//! (pure), and (as root) both halves of a running port seeing a change at their next burst:
//! a flood reaches a new VTEP, a datagram from it is taken without learning, a flood too
//! wide for one `sendmmsg` reaches every VTEP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use weft_packet::{MacAddr, OffloadInfo};
use weft_switch::{PortTx, TxFrame};

use super::sockets::{self, can_run, config, frame, lo, port, receive_all};
use crate::vxlan::flood_list::{FloodApplied, FloodList};
use crate::vxlan::stats::DecapDrop;
use crate::{OverlayError, VxlanPort, MAX_FLOOD_REMOTES};

fn vxlan(inner: &[u8]) -> Vec<u8> {
    [&[0x08, 0, 0, 0, 0, 0, 42, 0][..], inner].concat()
}

/// A VTEP address on loopback (any of 127/8 is local).
fn vtep(i: u16) -> IpAddr {
    let [hi, lo] = i.to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(127, 1, hi + 1, lo))
}

#[test]
fn directory_vteps_join_the_configured_remotes_once_and_never_the_port_itself() {
    let list = Arc::new(FloodList::new(lo(1), &[lo(2), lo(3)]));
    let applied = list
        .set_directory(&[
            lo(4),
            lo(2),
            lo(4),
            lo(1),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V4(Ipv4Addr::new(239, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::BROADCAST),
        ])
        .unwrap();
    assert_eq!(
        applied,
        FloodApplied {
            remotes: 3,
            refused: 5,
            duplicates: 2,
        }
    );
    // Configured remotes first, as given.
    assert_eq!(list.remotes(), [lo(2), lo(3), lo(4)]);
    // An empty directory leaves the configured remotes.
    list.set_directory(&[]).unwrap();
    assert_eq!(list.remotes(), [lo(2), lo(3)]);
}

#[test]
fn a_flood_list_past_its_bound_is_refused_and_the_old_one_stays() {
    let list = Arc::new(FloodList::new(lo(1), &[lo(2)]));
    list.set_directory(&[lo(3)]).unwrap();
    let many: Vec<IpAddr> = (0..u16::try_from(MAX_FLOOD_REMOTES).unwrap())
        .map(vtep)
        .collect();
    let err = list.set_directory(&many).unwrap_err();
    assert!(matches!(
        err,
        OverlayError::FloodListFull { remotes, max: MAX_FLOOD_REMOTES }
            if remotes == MAX_FLOOD_REMOTES + 1
    ));
    assert_eq!(list.remotes(), [lo(2), lo(3)]);
    // Exactly the bound fits.
    let applied = list.set_directory(&many[1..]).unwrap();
    assert_eq!(applied.remotes, MAX_FLOOD_REMOTES);
}

#[test]
fn a_half_s_copy_changes_only_when_it_refreshes_and_the_receive_copy_is_sorted() {
    let list = Arc::new(FloodList::new(lo(1), &[lo(9)]));
    let mut tx = list.follow(false);
    let mut rx = list.follow(true);
    assert!(!tx.refresh() && !rx.refresh());
    list.set_directory(&[lo(5), lo(3)]).unwrap();
    // Until its next burst a half keeps what it had.
    assert_eq!(tx.remotes(), [lo(9)]);
    assert!(tx.refresh() && rx.refresh());
    assert_eq!(tx.remotes(), [lo(9), lo(3), lo(5)]);
    assert_eq!(rx.remotes(), [lo(3), lo(5), lo(9)]);
    assert!(!tx.refresh(), "nothing new: no copy");
}

/// A plain UDP socket in a remote's place, quiet after 300 ms.
fn listener(ip: IpAddr, port: u16) -> UdpSocket {
    let s = sockets::listener(ip, port);
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s
}

/// The inner frames `s` receives until it has been quiet for its timeout.
fn drain(s: &UdpSocket) -> Vec<Vec<u8>> {
    let mut buf = [0u8; 2048];
    let mut got = Vec::new();
    while let Ok(n) = s.recv(&mut buf) {
        got.push(buf[8..n].to_vec());
    }
    got
}

#[test]
fn after_set_directory_remotes_a_flood_reaches_the_new_vtep_and_its_datagrams_are_taken() {
    if !can_run(
        "after_set_directory_remotes_a_flood_reaches_the_new_vtep_and_its_datagrams_are_taken",
    ) {
        return;
    }
    let (local, p) = (port(30), port(31));
    let port = VxlanPort::open(&config(lo(1), local, p).remote(lo(2))).unwrap();
    let handle = port.remote_fdb();
    let (mut rx, mut tx, stats) = port.split();
    let (r2, r3) = (listener(lo(2), p), listener(lo(3), p));
    let from3 = UdpSocket::bind(SocketAddr::new(lo(3), 0)).unwrap();
    let to = SocketAddr::new(lo(1), local);
    let bcast = frame([0xff; 6], 1);
    let flood = |tx: &mut crate::VxlanTx| {
        assert_eq!(
            tx.transmit(&[TxFrame::whole(&bcast, OffloadInfo::default())]),
            1
        );
    };

    // Before: the configured remote only, and lo(3)'s datagrams are dropped.
    flood(&mut tx);
    assert_eq!((drain(&r2).len(), drain(&r3).len()), (1, 0));
    let reply = frame([2, 0, 0, 0, 0, 1], 2);
    from3.send_to(&vxlan(&reply), to).unwrap();
    assert!(receive_all(&mut rx, 1).is_empty());
    assert_eq!(stats.snapshot().drops(DecapDrop::UnknownRemote), 1);

    // The directory adds lo(3) (its own address and a configured remote left out).
    let applied = handle
        .set_directory_remotes(&[lo(3), lo(1), lo(2)])
        .unwrap();
    assert_eq!(
        (applied.remotes, applied.refused, applied.duplicates),
        (2, 1, 1)
    );
    assert_eq!(handle.flood_remotes(), [lo(2), lo(3)]);
    flood(&mut tx);
    assert_eq!(
        (drain(&r2), drain(&r3)),
        (vec![bcast.clone()], vec![bcast.clone()])
    );
    from3.send_to(&vxlan(&reply), to).unwrap();
    assert_eq!(receive_all(&mut rx, 1), vec![reply.clone()]);
    let s = stats.snapshot();
    assert_eq!((s.drops(DecapDrop::UnknownRemote), s.learned), (1, 0));

    // And removes it again.
    handle.set_directory_remotes(&[]).unwrap();
    flood(&mut tx);
    assert_eq!((drain(&r2).len(), drain(&r3).len()), (1, 0));
    from3.send_to(&vxlan(&reply), to).unwrap();
    assert!(receive_all(&mut rx, 1).is_empty());
    assert_eq!(stats.snapshot().drops(DecapDrop::UnknownRemote), 2);
}

#[test]
fn a_directory_mac_entry_steers_unicast_to_its_vtep() {
    if !can_run("a_directory_mac_entry_steers_unicast_to_its_vtep") {
        return;
    }
    let p = port(32);
    let port = VxlanPort::open(&config(lo(1), port(33), p).remote(lo(2)).remote(lo(3))).unwrap();
    let handle = port.remote_fdb();
    let (_rx, mut tx, _stats) = port.split();
    let (r2, r3) = (listener(lo(2), p), listener(lo(3), p));
    let dst = MacAddr([2, 0, 0, 0, 0, 7]);
    let applied = handle.apply_directory(&[(dst, Some(lo(3)))]);
    assert_eq!(applied.added, 1);
    let unicast = frame(dst.octets(), 3);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&unicast, OffloadInfo::default())]),
        1
    );
    assert_eq!((drain(&r2).len(), drain(&r3)), (0, vec![unicast]));
}

#[test]
fn a_flood_to_more_vteps_than_one_sendmmsg_takes_reaches_every_one() {
    if !can_run("a_flood_to_more_vteps_than_one_sendmmsg_takes_reaches_every_one") {
        return;
    }
    // More than a chunk (256) and than the kernel's most messages per call (1024).
    const VTEPS: u16 = 1100;
    let p = port(34);
    let mut c = config(lo(1), port(35), p);
    c.offload = false;
    let port = VxlanPort::open(&c).unwrap();
    let handle = port.remote_fdb();
    let (_rx, mut tx, stats) = port.split();
    let all = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p)).unwrap();
    all.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    nix::sys::socket::setsockopt(&all, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20)).unwrap();
    let vteps: Vec<IpAddr> = (0..VTEPS).map(vtep).collect();
    handle.set_directory_remotes(&vteps).unwrap();
    let bcast = frame([0xff; 6], 4);
    let unicast = frame([2, 0, 0, 0, 0, 8], 5);
    handle.apply_directory(&[(MacAddr([2, 0, 0, 0, 0, 8]), Some(vtep(7)))]);
    let frames = [
        TxFrame::whole(&unicast, OffloadInfo::default()),
        TxFrame::whole(&bcast, OffloadInfo::default()),
        TxFrame::whole(&unicast, OffloadInfo::default()),
    ];
    assert_eq!(tx.transmit(&frames), 3);
    let got = drain(&all);
    assert_eq!(
        got.iter().filter(|f| **f == bcast).count(),
        usize::from(VTEPS)
    );
    assert_eq!(got.iter().filter(|f| **f == unicast).count(), 2);
    let s = stats.snapshot();
    assert_eq!((s.tx_frames, s.tx_datagrams), (3, u64::from(VTEPS) + 2));
}
