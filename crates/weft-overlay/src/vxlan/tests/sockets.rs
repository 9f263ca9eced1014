//! Ports on loopback addresses (needs root for the raw sending socket; prints SKIP otherwise).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use weft_packet::{MacAddr, OffloadInfo, Vni};
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

use crate::vxlan::encap::{flow_hash, source_port};
use crate::vxlan::stats::DecapDrop;
use crate::{VxlanConfig, VxlanPort, VxlanRx};

pub(super) fn can_run(test: &str) -> bool {
    if !nix::unistd::geteuid().is_root() {
        println!("SKIP {test}: needs root (raw socket)");
        return false;
    }
    true
}

/// A UDP port unique to this process and test (offsets below 64, each used by one test
/// only: the tests of this crate run in parallel and bind the same loopback addresses).
pub(super) fn port(offset: u16) -> u16 {
    assert!(offset < 64);
    let pid = u16::try_from(std::process::id() % 700).unwrap();
    20_000 + pid * 64 + offset
}

pub(super) fn lo(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

pub(super) fn frame(dst: [u8; 6], sport: u16) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(sport, 80)
        .write(&mut out, b"payload")
        .unwrap();
    out
}

pub(super) fn config(local: IpAddr, local_port: u16, remote_port: u16) -> VxlanConfig {
    let mut c = VxlanConfig::new(SocketAddr::new(local, local_port), Vni::new(42).unwrap());
    c.remote_port = remote_port;
    c
}

pub(super) fn listener(ip: IpAddr, port: u16) -> UdpSocket {
    let s = UdpSocket::bind(SocketAddr::new(ip, port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

pub(super) fn receive_all(rx: &mut VxlanRx, want: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let mut batch = RxBatch::new(64);
        rx.receive(&mut batch);
        got.extend(batch.descs().iter().map(|d| rx.frame(d.handle).to_vec()));
        rx.finish();
        std::thread::sleep(Duration::from_millis(5));
    }
    got
}

#[test]
fn a_frame_crosses_between_two_ports_and_the_source_port_is_the_flow_hash() {
    if !can_run("a_frame_crosses_between_two_ports_and_the_source_port_is_the_flow_hash") {
        return;
    }
    let (pa, pb) = (port(0), port(1));
    let mut without_offload = config(lo(1), pa, pb).remote(lo(2));
    without_offload.offload = false;
    let a = VxlanPort::open(&without_offload).unwrap();
    let b = VxlanPort::open(&config(lo(2), pb, pa).remote(lo(1))).unwrap();
    let (_arx, mut atx, astats) = a.split();
    let (mut brx, _btx, bstats) = b.split();
    let frames: Vec<Vec<u8>> = (0..8)
        .map(|i| frame([2, 0, 0, 0, 0, 2], 1000 + i))
        .collect();
    // The first frame's head is rewritten (scatter/gather of head + body).
    let tx: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::with_head(&f[..12], &f[12..], OffloadInfo::default()))
        .collect();
    assert_eq!(atx.transmit(&tx), 8);
    let got = receive_all(&mut brx, 8);
    assert_eq!(got, frames);
    assert_eq!(astats.snapshot().tx_datagrams, 8);
    assert_eq!(bstats.snapshot().rx_frames, 8);
    assert_eq!(bstats.snapshot().total_drops(), 0);

    // What went on the wire: a plain listener in B's place sees the flow-hashed port.
    drop(brx);
    let wire = listener(lo(2), pb);
    assert_eq!(atx.transmit(&tx[..1]), 1);
    let mut buf = [0u8; 2048];
    let (n, from) = wire.recv_from(&mut buf).unwrap();
    assert_eq!(from.ip(), lo(1));
    assert_eq!(from.port(), source_port(flow_hash(&frames[0])));
    assert_eq!(&buf[..8], &[0x08, 0, 0, 0, 0, 0, 42, 0]);
    assert_eq!(&buf[8..n], &frames[0][..]);
}

#[test]
fn broadcast_is_replicated_to_every_remote_and_known_unicast_goes_to_one() {
    if !can_run("broadcast_is_replicated_to_every_remote_and_known_unicast_goes_to_one") {
        return;
    }
    let p = port(2);
    let known = MacAddr([2, 0, 0, 0, 0, 3]);
    let a = VxlanPort::open(
        &config(lo(1), port(3), p)
            .remote(lo(2))
            .remote(lo(3))
            .static_mac(known, lo(3)),
    )
    .unwrap();
    let (_rx, mut tx, stats) = a.split();
    let (r2, r3) = (listener(lo(2), p), listener(lo(3), p));
    let bcast = frame([0xff; 6], 1);
    let unicast = frame(known.octets(), 2);
    let frames = [
        TxFrame::whole(&bcast, OffloadInfo::default()),
        TxFrame::whole(&unicast, OffloadInfo::default()),
    ];
    assert_eq!(tx.transmit(&frames), 2);
    let mut buf = [0u8; 2048];
    let (n, _) = r2.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[8..n], &bcast[..]);
    r2.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(
        r2.recv_from(&mut buf).is_err(),
        "unicast went to one remote"
    );
    let mut at3 = Vec::new();
    for _ in 0..2 {
        let (n, _) = r3.recv_from(&mut buf).unwrap();
        at3.push(buf[8..n].to_vec());
    }
    at3.sort();
    let mut want = vec![bcast.clone(), unicast.clone()];
    want.sort();
    assert_eq!(at3, want);
    let s = stats.snapshot();
    assert_eq!((s.tx_frames, s.tx_datagrams), (2, 3));
}

#[test]
fn hostile_datagrams_are_counted_by_reason_and_good_ones_pass() {
    if !can_run("hostile_datagrams_are_counted_by_reason_and_good_ones_pass") {
        return;
    }
    let p = port(4);
    let mut c = config(lo(2), p, p).remote(lo(1));
    c.mtu_from_underlay = false;
    c.strict_reserved = true;
    let (mut rx, _tx, stats) = VxlanPort::open(&c).unwrap().split();
    let peer = UdpSocket::bind(SocketAddr::new(lo(1), 0)).unwrap();
    let stranger = UdpSocket::bind(SocketAddr::new(lo(4), 0)).unwrap();
    let good_inner = frame([2, 0, 0, 0, 0, 2], 9);
    let with = |hdr: [u8; 8], inner: &[u8]| [&hdr[..], inner].concat();
    let ok_hdr = [0x08, 0, 0, 0, 0, 0, 42, 0];
    let to = SocketAddr::new(lo(2), p);
    let sends: Vec<(Vec<u8>, DecapDrop)> = vec![
        (vec![0x08, 0, 0], DecapDrop::Truncated),
        (
            with([0, 0, 0, 0, 0, 0, 42, 0], &good_inner),
            DecapDrop::BadFlags,
        ),
        (
            with([0x08, 1, 0, 0, 0, 0, 42, 0], &good_inner),
            DecapDrop::ReservedBits,
        ),
        (
            with([0x08, 0, 0, 0, 0, 0, 43, 0], &good_inner),
            DecapDrop::UnknownVni,
        ),
        (with(ok_hdr, &good_inner[..10]), DecapDrop::InnerTooShort),
        (with(ok_hdr, &vec![2u8; 3000]), DecapDrop::InnerTooBig),
        (with(ok_hdr, &[0xffu8; 60]), DecapDrop::InnerBadSource),
    ];
    for (d, _) in &sends {
        peer.send_to(d, to).unwrap();
    }
    stranger.send_to(&with(ok_hdr, &good_inner), to).unwrap();
    peer.send_to(&with(ok_hdr, &good_inner), to).unwrap();
    let got = receive_all(&mut rx, 1);
    assert_eq!(got, vec![good_inner]);
    let s = stats.snapshot();
    for (_, reason) in &sends {
        assert_eq!(s.drops(*reason), 1, "{reason:?}");
    }
    assert_eq!(s.drops(DecapDrop::UnknownRemote), 1);
    assert_eq!(s.total_drops(), 8);
}

#[test]
fn with_learning_a_new_endpoint_is_accepted_and_its_mac_learned() {
    if !can_run("with_learning_a_new_endpoint_is_accepted_and_its_mac_learned") {
        return;
    }
    let p = port(5);
    let mut c = config(lo(2), p, port(6));
    c.learning = true;
    let (mut rx, mut tx, stats) = VxlanPort::open(&c).unwrap().split();
    let stranger = UdpSocket::bind(SocketAddr::new(lo(5), port(6))).unwrap();
    stranger
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let inner = frame([2, 0, 0, 0, 0, 2], 9);
    stranger
        .send_to(
            &[&[0x08, 0, 0, 0, 0, 0, 42, 0][..], &inner].concat(),
            SocketAddr::new(lo(2), p),
        )
        .unwrap();
    assert_eq!(receive_all(&mut rx, 1), vec![inner]);
    assert_eq!(stats.snapshot().learned, 1);
    // With no remotes configured, the learned MAC is still reachable.
    let reply = frame([2, 0, 0, 0, 0, 1], 10);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&reply, OffloadInfo::default())]),
        1
    );
    let mut buf = [0u8; 2048];
    let (n, _) = stranger.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[8..n], &reply[..]);
}

#[test]
fn frames_with_nowhere_to_go_or_no_header_are_consumed_and_counted() {
    if !can_run("frames_with_nowhere_to_go_or_no_header_are_consumed_and_counted") {
        return;
    }
    let (_rx, mut tx, stats) = VxlanPort::open(&config(lo(1), port(7), port(7)))
        .unwrap()
        .split();
    let bcast = frame([0xff; 6], 1);
    let frames = [
        TxFrame::whole(&bcast, OffloadInfo::default()),
        TxFrame::whole(&[1, 2, 3], OffloadInfo::default()),
    ];
    assert_eq!(tx.transmit(&frames), 2, "consumed, not refused");
    let s = stats.snapshot();
    assert_eq!((s.tx_no_remote, s.tx_errors), (1, 1));
    assert_eq!((s.tx_frames, s.tx_datagrams), (0, 0));
}

#[test]
fn caps_offer_tso_only_with_offloads_and_always_partial_checksums() {
    if !can_run("caps_offer_tso_only_with_offloads_and_always_partial_checksums") {
        return;
    }
    let mut c = config(lo(1), port(8), port(8));
    c.mtu = 1450;
    c.mtu_from_underlay = false;
    c.answer_too_big = false;
    c.offload = false;
    let (_rx, tx, _) = VxlanPort::open(&c).unwrap().split();
    let caps = tx.caps();
    assert_eq!((caps.mtu, caps.max_frame_len), (1450, 1472));
    assert!(caps.partial_csum && !caps.tso4 && !caps.tso6 && !caps.uso);
    c.offload = true;
    c.local.set_port(port(11));
    let (_rx, tx, _) = VxlanPort::open(&c).unwrap().split();
    let caps = tx.caps();
    assert_eq!((caps.mtu, caps.max_frame_len), (1450, 1472));
    assert!(caps.tso4 && caps.tso6 && caps.partial_csum && caps.uso);
    assert_eq!(caps.max_gso_frame_len, crate::MAX_SUPER_FRAME);
}

/// Port A (127.0.0.1, port offset `a`) sending to port B (127.0.0.2, offset `b`), both of
/// inner MTU 1450: A's transmit half and B's receive half, with their counters.
fn sender_and_receiver(
    a: u16,
    b: u16,
) -> (
    crate::VxlanTx,
    std::sync::Arc<crate::OverlayStats>,
    VxlanRx,
    std::sync::Arc<crate::OverlayStats>,
) {
    let (pa, pb) = (port(a), port(b));
    let mut ca = config(lo(1), pa, pb).remote(lo(2));
    ca.mtu = 1450;
    let mut cb = config(lo(2), pb, pa).remote(lo(1));
    cb.mtu = 1450;
    let (_arx, atx, astats) = VxlanPort::open(&ca).unwrap().split();
    let (brx, _btx, bstats) = VxlanPort::open(&cb).unwrap().split();
    (atx, astats, brx, bstats)
}

#[test]
fn a_udp_super_frame_crosses_in_one_segmented_send_and_is_merged_back_on_receive() {
    if !can_run("a_udp_super_frame_crosses_in_one_segmented_send_and_is_merged_back_on_receive") {
        return;
    }
    let (mut atx, astats, mut brx, bstats) = sender_and_receiver(26, 27);
    // 30 datagrams of 1200 bytes and a last one of 300, as a QUIC sender's USO write.
    let data: Vec<u8> = (0..36_300)
        .map(|i| u8::try_from(i % 197).unwrap())
        .collect();
    let (frame, info) = super::offload::udp_super_frame(false, &data, 1200);
    assert_eq!(atx.transmit(&[TxFrame::whole(&frame, info)]), 1);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut datagrams = Vec::new();
    let mut out = vec![0u8; 2048];
    while datagrams.len() < 31 && Instant::now() < deadline {
        let mut batch = RxBatch::new(64);
        brx.receive(&mut batch);
        for d in batch.descs() {
            // A merged super-frame is cut as its destination would cut it.
            let mut cut =
                weft_packet::gso::Segmenter::new(brx.frame(d.handle).head, &d.offload, 1514)
                    .unwrap();
            while let Some(n) = cut.next_segment(&mut out) {
                let inner = &out[..n.unwrap()];
                let h = etherparse::PacketHeaders::from_ethernet_slice(inner).unwrap();
                let Some(etherparse::NetHeaders::Ipv4(ip, _)) = &h.net else {
                    panic!("not IPv4")
                };
                let Some(etherparse::TransportHeader::Udp(udp)) = &h.transport else {
                    panic!("not UDP")
                };
                let body = h.payload.slice();
                assert_eq!(udp.checksum, udp.calc_checksum_ipv4(ip, body).unwrap());
                assert_eq!(usize::from(udp.length), 8 + body.len());
                datagrams.push(body.to_vec());
            }
        }
        brx.finish();
    }
    let want: Vec<Vec<u8>> = data.chunks(1200).map(<[u8]>::to_vec).collect();
    assert_eq!(datagrams, want, "every datagram whole, in order, none cut");
    let (a, b) = (astats.snapshot(), bstats.snapshot());
    assert_eq!(
        (a.tx_super_frames, a.tx_gso_sends, a.tx_datagrams),
        (1, 1, 31)
    );
    assert_eq!((a.tx_errors, b.total_drops()), (0, 0));
    assert!(
        b.rx_coalesced >= 1 && b.rx_merged >= 1,
        "loopback keeps the GSO buffer whole, and it is merged back: {b:?}"
    );
}

#[test]
fn a_tcp_super_frame_crosses_in_one_segmented_send_and_is_received_coalesced() {
    if !can_run("a_tcp_super_frame_crosses_in_one_segmented_send_and_is_received_coalesced") {
        return;
    }
    let (mut atx, astats, mut brx, bstats) = sender_and_receiver(9, 10);
    let data: Vec<u8> = (0..40_000)
        .map(|i| u8::try_from(i % 199).unwrap())
        .collect();
    let (frame, info) = super::offload::tcp_super_frame(false, &data);
    // Segmented where it lies, then (a head the switch rewrote) made contiguous first.
    assert_eq!(atx.transmit(&[TxFrame::whole(&frame, info)]), 1);
    assert_eq!(
        atx.transmit(&[TxFrame::with_head(&frame[..14], &frame[14..], info)]),
        1
    );
    // As after the route refused UDP GSO: the same datagrams, one per call.
    atx.gso_refused = true;
    assert_eq!(atx.transmit(&[TxFrame::whole(&frame, info)]), 1);
    let want = data.len().div_ceil(1398);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut joined = Vec::new();
    let mut offloads = Vec::new();
    while joined.len() < 3 * data.len() && Instant::now() < deadline {
        let mut batch = RxBatch::new(64);
        brx.receive(&mut batch);
        for d in batch.descs() {
            let h =
                etherparse::PacketHeaders::from_ethernet_slice(brx.frame(d.handle).head).unwrap();
            joined.extend_from_slice(h.payload.slice());
            offloads.push(d.offload);
        }
        brx.finish();
    }
    assert_eq!(
        joined,
        [&data[..], &data[..], &data[..]].concat(),
        "every byte arrives, in order"
    );
    let (a, b) = (astats.snapshot(), bstats.snapshot());
    assert_eq!(
        (a.tx_super_frames, a.tx_gso_sends),
        (3, 2),
        "one-per-call sends are not GSO sends: {a:?}"
    );
    assert_eq!(a.tx_datagrams, 3 * u64::try_from(want).unwrap());
    assert_eq!(a.tx_errors, 0);
    assert!(
        b.rx_coalesced >= 1,
        "loopback keeps the GSO buffer whole: {b:?}"
    );
    assert!(
        b.rx_merged >= 1,
        "and it is merged back into a super-frame: {b:?}"
    );
    assert!(offloads
        .iter()
        .any(|o| o.gso == weft_packet::GsoKind::TcpV4 && o.gso_size == 1398));
    assert_eq!(b.total_drops(), 0);
}

#[test]
fn the_inner_mtu_is_the_route_mtu_minus_the_overlay_cost() {
    if !can_run("the_inner_mtu_is_the_route_mtu_minus_the_overlay_cost") {
        return;
    }
    // Loopback's MTU is 65536: the inner MTU is capped where a 64 KB datagram ends.
    let c = config(lo(1), port(12), port(12)).remote(lo(2));
    let opened = VxlanPort::open(&c).unwrap();
    assert_eq!(opened.mtu(), 65_535 - 22 - 16 - 40);
    let (_rx, tx, _) = opened.split();
    // The caps say the real inner MTU (the switch hands oversize frames to `too_big`).
    assert_eq!(tx.caps().mtu, 65_535 - 22 - 16 - 40);
    // Without a remote there is no route to ask: the configured MTU stays.
    let lonely = VxlanPort::open(&config(lo(1), port(13), port(13))).unwrap();
    assert_eq!(lonely.mtu(), 1450);
}

#[test]
fn datagrams_the_kernel_drops_at_a_full_underlay_socket_are_counted() {
    if !can_run("datagrams_the_kernel_drops_at_a_full_underlay_socket_are_counted") {
        return;
    }
    const SENT: usize = 3000;
    let p = port(21);
    let mut c = config(lo(2), p, p).remote(lo(1));
    c.mtu_from_underlay = false;
    c.offload = false;
    c.socket_buffer = 64 << 10;
    let (mut rx, _tx, stats) = VxlanPort::open(&c).unwrap().split();
    let peer = UdpSocket::bind(SocketAddr::new(lo(1), 0)).unwrap();
    let datagram = [
        &[0x08, 0, 0, 0, 0, 0, 42, 0][..],
        &frame([2, 0, 0, 0, 0, 2], 9),
    ]
    .concat();
    let to = SocketAddr::new(lo(2), p);
    // More than the receive buffer holds, with nobody reading: the kernel drops the rest.
    for _ in 0..SENT {
        peer.send_to(&datagram, to).unwrap();
    }
    let mut got = receive_all(&mut rx, SENT).len();
    // The kernel reports its count with the next datagram it queues.
    peer.send_to(&datagram, to).unwrap();
    got += receive_all(&mut rx, 1).len();
    let s = stats.snapshot();
    assert!(s.rx_socket_overflow > 0, "the buffer overflowed: {s:?}");
    assert_eq!(
        u64::try_from(got).unwrap() + s.rx_socket_overflow,
        u64::try_from(SENT + 1).unwrap(),
        "every datagram is received or counted: {s:?}"
    );
    assert_eq!(s.total_drops(), 0);
}
