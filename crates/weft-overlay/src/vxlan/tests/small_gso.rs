//! Ordinary frames through `UDP_SEGMENT`: how a burst is cut into runs (pure), and (as root)
//! a burst sent over loopback, received by plain UDP sockets as exactly the datagrams the raw
//! path sends, and by a weft port with GRO as the original frames.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use proptest::prelude::*;
use weft_packet::{MacAddr, OffloadInfo};
use weft_switch::{PortTx, TxFrame};

use super::sockets::{can_run, config, lo, port, receive_all};
use crate::vxlan::tx_small_gso::{run_len, runs, Route};
use crate::vxlan::tx_super::{MAX_GSO_PAYLOAD, MAX_GSO_SEGMENTS};
use crate::VxlanPort;

fn unicast(remote: u8, socket: usize, len: usize) -> Route {
    Route::Unicast {
        remote: lo(remote),
        socket,
        src_port: 50_000 + u16::try_from(socket).unwrap(),
        len,
    }
}

/// Run lengths, in order, of the cut of `routes` (segmented runs only).
fn segmented(routes: &[Route]) -> Vec<usize> {
    runs(routes, usize::MAX)
        .filter(|(_, seg)| *seg)
        .map(|(r, _)| r.len())
        .collect()
}

#[test]
fn equal_frames_to_one_remote_form_one_run() {
    let routes = vec![unicast(2, 0, 60); 10];
    assert_eq!(run_len(&routes, usize::MAX), 10);
    assert_eq!(segmented(&routes), [10]);
}

#[test]
fn a_shorter_frame_ends_a_run_as_its_last() {
    let mut routes = vec![unicast(2, 0, 60); 5];
    routes.push(unicast(2, 0, 50));
    routes.extend(vec![unicast(2, 0, 50); 3]);
    assert_eq!(run_len(&routes, usize::MAX), 6);
    assert_eq!(segmented(&routes), [6, 3]);
}

#[test]
fn a_longer_frame_starts_a_new_run() {
    let mut routes = vec![unicast(2, 0, 60); 4];
    routes.extend(vec![unicast(2, 0, 61); 4]);
    assert_eq!(segmented(&routes), [4, 4]);
}

#[test]
fn a_different_remote_or_source_port_splits_a_run() {
    let routes = [
        unicast(2, 0, 60),
        unicast(2, 0, 60),
        unicast(3, 0, 60),
        unicast(3, 0, 60),
        unicast(3, 1, 60),
        unicast(3, 1, 60),
        unicast(3, 1, 60),
    ];
    assert_eq!(segmented(&routes), [2, 2, 3]);
}

#[test]
fn a_run_stops_at_64_datagrams_and_at_the_largest_udp_payload() {
    let routes = vec![unicast(2, 0, 60); 150];
    assert_eq!(segmented(&routes), [MAX_GSO_SEGMENTS, MAX_GSO_SEGMENTS, 22]);
    // 1500-byte frames: 1508-byte datagrams, 43 of them fit 65,507 bytes.
    let routes = vec![unicast(2, 0, 1500); 50];
    let per_send = MAX_GSO_PAYLOAD / 1508;
    assert_eq!(per_send, 43);
    assert_eq!(segmented(&routes), [per_send, 50 - per_send]);
}

#[test]
fn floods_super_frames_and_refused_frames_are_never_in_a_run() {
    let flood = Route::Flood {
        socket: 0,
        src_port: 50_000,
    };
    let routes = [
        flood,
        flood,
        unicast(2, 0, 60),
        Route::Super,
        unicast(2, 0, 60),
        Route::TooBig,
        unicast(2, 0, 60),
        Route::Malformed,
    ];
    assert_eq!(run_len(&routes, usize::MAX), 0, "a flood is no run");
    assert_eq!(run_len(&routes[2..], usize::MAX), 1);
    assert!(segmented(&routes).is_empty());
    assert_eq!(runs(&routes, usize::MAX).count(), routes.len());
}

#[test]
fn a_segment_size_the_kernel_refused_is_not_tried_again() {
    let routes = vec![unicast(2, 0, 100); 4];
    // max_segment 108: datagrams of 108 bytes (8 + 100) are out, shorter ones in.
    assert_eq!(run_len(&routes, 108), 0);
    assert_eq!(run_len(&routes, 109), 4);
}

fn route_strategy() -> impl Strategy<Value = Route> {
    prop_oneof![
        6 => (2u8..4, 0usize..2, prop_oneof![Just(60usize), Just(59), Just(1500), 14usize..2000])
            .prop_map(|(r, s, l)| unicast(r, s, l)),
        1 => Just(Route::Flood {
            socket: 0,
            src_port: 50_000
        }),
        1 => Just(Route::Super),
        1 => Just(Route::TooBig),
    ]
}

proptest! {
    /// The runs cover the burst exactly once, in order; each segmented run shares a remote
    /// and socket, has equal datagrams but a shorter last, fits one send, and could not have
    /// taken the next frame.
    #[test]
    fn runs_partition_the_burst_in_order(routes in prop::collection::vec(route_strategy(), 0..300)) {
        let mut at = 0;
        for (range, seg) in runs(&routes, usize::MAX) {
            prop_assert_eq!(range.start, at);
            prop_assert!(!range.is_empty());
            at = range.end;
            if !seg {
                prop_assert_eq!(range.len(), 1);
                continue;
            }
            prop_assert!(range.len() >= 2 && range.len() <= MAX_GSO_SEGMENTS);
            let key = |r: &Route| match *r {
                Route::Unicast { remote, socket, len, .. } => Some((remote, socket, len + 8)),
                _ => None,
            };
            let (remote, socket, segment) = key(&routes[range.start]).unwrap();
            let mut bytes = 0;
            for (i, r) in routes[range.clone()].iter().enumerate() {
                let (rm, so, len) = key(r).unwrap();
                prop_assert_eq!((rm, so), (remote, socket));
                prop_assert!(len == segment || (len < segment && i + 1 == range.len()));
                bytes += len;
            }
            prop_assert!(bytes <= MAX_GSO_PAYLOAD);
            if let Some(next) = routes.get(range.end).and_then(key) {
                let last = key(&routes[range.end - 1]).unwrap().2;
                prop_assert!(
                    (next.0, next.1) != (remote, socket)
                        || next.2 > segment
                        || last < segment
                        || range.len() == MAX_GSO_SEGMENTS
                        || bytes + next.2 > MAX_GSO_PAYLOAD,
                    "the run stopped early at {}", range.end
                );
            }
        }
        prop_assert_eq!(at, routes.len());
    }
}

/// An Ethernet/IPv4/UDP frame to `dst` with `payload_len` bytes, each `fill`.
fn frame(dst: MacAddr, payload_len: usize, fill: u8) -> Vec<u8> {
    let mut out = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], dst.octets())
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(5000, 6000)
        .write(&mut out, &vec![fill; payload_len])
        .unwrap();
    out
}

/// The VXLAN header every datagram of these tests starts with (VNI 42).
const VNI_42: [u8; 8] = [0x08, 0, 0, 0, 0, 0, 42, 0];

/// The frames of `frames` addressed to B, in order.
fn to_b(frames: &[Vec<u8>]) -> impl Iterator<Item = &Vec<u8>> {
    frames.iter().filter(|f| f[..6] == TO_B.octets())
}

const TO_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);
const TO_C: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xc]);

/// 100 equal 64 B frames to B, a shorter one to B, then frames alternating between C and B
/// (runs of one: the raw path). The head of every frame is split from its body, as the
/// switch hands rewritten frames.
fn burst() -> Vec<Vec<u8>> {
    let mut frames: Vec<Vec<u8>> = (0..100u8).map(|i| frame(TO_B, 18, i)).collect();
    frames.push(frame(TO_B, 10, 100));
    for i in 0..6u8 {
        let to = if i % 2 == 0 { TO_C } else { TO_B };
        frames.push(frame(to, 18, 200 + i));
    }
    frames
}

fn as_tx(frames: &[Vec<u8>]) -> Vec<TxFrame<'_>> {
    frames
        .iter()
        .map(|f| TxFrame::with_head(&f[..14], &f[14..], OffloadInfo::default()))
        .collect()
}

/// A plain UDP socket (no GRO) at `ip`:`port`, with room for a whole burst.
fn listener(ip: IpAddr, port: u16) -> UdpSocket {
    let s = UdpSocket::bind(SocketAddr::new(ip, port)).unwrap();
    crate::vxlan::udp_offload::size_buffer(&s, true, 1 << 20);
    s
}

/// Every datagram `socket` receives until it has been quiet for 300 ms: (source, payload).
fn drain(socket: &UdpSocket) -> Vec<(SocketAddr, Vec<u8>)> {
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while let Ok((n, from)) = socket.recv_from(&mut buf) {
        got.push((from, buf[..n].to_vec()));
    }
    got
}

#[test]
fn a_burst_of_equal_small_frames_leaves_in_two_segmented_sends_as_the_raw_paths_datagrams() {
    if !can_run(
        "a_burst_of_equal_small_frames_leaves_in_two_segmented_sends_as_the_raw_paths_datagrams",
    ) {
        return;
    }
    let p = port(42);
    let listen = |ip: IpAddr| listener(ip, p);
    let (at_b, at_c) = (listen(lo(2)), listen(lo(3)));
    let c = config(lo(1), port(43), p)
        .static_mac(TO_B, lo(2))
        .static_mac(TO_C, lo(3));
    let (_rx, mut tx, stats) = VxlanPort::open(&c).unwrap().split();
    let frames = burst();
    let sent = as_tx(&frames);

    assert_eq!(tx.transmit(&sent), frames.len());
    let s = stats.snapshot();
    let segmented = (drain(&at_b), drain(&at_c));
    assert_eq!(
        (s.tx_small_gso_sends, s.tx_small_gso_datagrams),
        (2, 101),
        "64 + 37 frames to B in two sends, the alternating ones raw: {s:?}"
    );
    assert_eq!((s.tx_frames, s.tx_datagrams, s.tx_errors), (107, 107, 0));

    // The same burst on the raw path only (as after the kernel refused UDP_SEGMENT).
    tx.gso_refused = true;
    assert_eq!(tx.transmit(&sent), frames.len());
    let raw = (drain(&at_b), drain(&at_c));
    let s2 = stats.snapshot();
    assert_eq!(s2.tx_small_gso_sends, 2, "no segmented send once refused");
    assert!(s2.tx_raw_sends > s.tx_raw_sends);

    assert_eq!(segmented.0.len(), 104, "every datagram to B");
    assert_eq!(segmented.1.len(), 3, "every datagram to C");
    assert_eq!(segmented, raw, "the same datagrams, sources and order");
    let (ports_b, payloads_b): (Vec<_>, Vec<_>) = segmented.0.into_iter().unzip();
    let want_b: Vec<Vec<u8>> = to_b(&frames).map(|f| [&VNI_42[..], f].concat()).collect();
    assert_eq!(
        payloads_b, want_b,
        "VXLAN header + the frame, in burst order"
    );
    assert!(ports_b.iter().all(|a| *a == ports_b[0] && a.ip() == lo(1)));
}

#[test]
fn a_segmented_burst_reaches_a_weft_port_with_gro_as_the_original_frames_in_order() {
    if !can_run("a_segmented_burst_reaches_a_weft_port_with_gro_as_the_original_frames_in_order") {
        return;
    }
    let (pa, pb) = (port(44), port(45));
    // Nobody listens at C's address: its frames just split B's runs.
    let ca = config(lo(1), pa, pb)
        .static_mac(TO_B, lo(2))
        .static_mac(TO_C, lo(3));
    let cb = config(lo(2), pb, pa).remote(lo(1));
    let (_arx, mut atx, astats) = VxlanPort::open(&ca).unwrap().split();
    let (mut brx, _btx, bstats) = VxlanPort::open(&cb).unwrap().split();
    let frames = burst();
    assert_eq!(atx.transmit(&as_tx(&frames)), frames.len());
    let to_b: Vec<Vec<u8>> = to_b(&frames).cloned().collect();
    let got = receive_all(&mut brx, to_b.len());
    assert_eq!(got, to_b, "every frame, whole and in order");
    let (a, b) = (astats.snapshot(), bstats.snapshot());
    assert_eq!(a.tx_small_gso_sends, 2, "{a:?}");
    assert!(
        b.rx_coalesced >= 2,
        "loopback keeps each segmented send whole; B cuts it apart: {b:?}"
    );
    assert_eq!((b.rx_frames, b.total_drops()), (104, 0), "{b:?}");
}

/// `frame` as a sender with checksum offload hands it: the UDP checksum field holding only
/// the pseudo-header sum, to be completed.
fn partial(frame: &[u8]) -> (Vec<u8>, OffloadInfo) {
    let mut out = frame.to_vec();
    let udp_len = u16::from_be_bytes([out[38], out[39]]);
    let pseudo = weft_packet::checksum::pseudo_header_v4(
        [10, 0, 0, 1].into(),
        [10, 0, 0, 2].into(),
        17,
        udp_len,
    );
    out[40..42].copy_from_slice(&pseudo.to_be_bytes());
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 6,
        ..OffloadInfo::default()
    };
    (out, info)
}

#[test]
fn frames_with_partial_checksums_go_in_runs_with_their_checksums_completed() {
    if !can_run("frames_with_partial_checksums_go_in_runs_with_their_checksums_completed") {
        return;
    }
    let p = port(46);
    let at_b = listener(lo(2), p);
    let c = config(lo(1), port(47), p)
        .static_mac(TO_B, lo(2))
        .static_mac(TO_C, lo(3));
    let (_rx, mut tx, stats) = VxlanPort::open(&c).unwrap().split();
    let frames = burst();
    let partials: Vec<(Vec<u8>, OffloadInfo)> = frames.iter().map(|f| partial(f)).collect();
    assert_ne!(partials[0].0, frames[0], "the checksum is left to the port");
    let sent: Vec<TxFrame<'_>> = partials
        .iter()
        .map(|(f, info)| TxFrame::with_head(&f[..14], &f[14..], *info))
        .collect();
    assert_eq!(tx.transmit(&sent), frames.len());
    let s = stats.snapshot();
    assert_eq!(
        (s.tx_small_gso_sends, s.tx_small_gso_datagrams),
        (2, 101),
        "{s:?}"
    );
    let got: Vec<Vec<u8>> = drain(&at_b).into_iter().map(|(_, d)| d).collect();
    let want: Vec<Vec<u8>> = to_b(&frames).map(|f| [&VNI_42[..], f].concat()).collect();
    assert_eq!(
        got, want,
        "the frames with their checksums completed, in order"
    );
}

#[test]
fn with_one_remote_unknown_unicast_goes_in_runs_and_with_two_it_is_replicated_raw() {
    if !can_run("with_one_remote_unknown_unicast_goes_in_runs_and_with_two_it_is_replicated_raw") {
        return;
    }
    let p = port(48);
    let listen = |ip: IpAddr| listener(ip, p);
    let (at_b, at_c) = (listen(lo(2)), listen(lo(3)));
    let frames: Vec<Vec<u8>> = (0..70u8).map(|i| frame(TO_B, 18, i)).collect();
    let sent = as_tx(&frames);

    let one = config(lo(1), port(49), p).remote(lo(2));
    let (_rx, mut tx, stats) = VxlanPort::open(&one).unwrap().split();
    assert_eq!(tx.transmit(&sent), frames.len());
    let s = stats.snapshot();
    assert_eq!(
        (s.tx_small_gso_sends, s.tx_small_gso_datagrams),
        (2, 70),
        "{s:?}"
    );
    assert_eq!(drain(&at_b).len(), 70);

    let two = config(lo(1), port(50), p).remote(lo(2)).remote(lo(3));
    let (_rx, mut tx, stats) = VxlanPort::open(&two).unwrap().split();
    assert_eq!(tx.transmit(&sent), frames.len());
    let s = stats.snapshot();
    assert_eq!((s.tx_small_gso_sends, s.tx_datagrams), (0, 140), "{s:?}");
    assert_eq!((drain(&at_b).len(), drain(&at_c).len()), (70, 70));
}
