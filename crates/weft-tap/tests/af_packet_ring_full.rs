//! An AF_PACKET port's receive ring overflowing for real: a veth between two namespaces, a
//! sender on one end and a port with a two-block ring, not read during the flood, on the
//! other. Needs root (prints SKIP otherwise).

mod common;

use std::time::{Duration, Instant};

use common::lab::{self, Netns};
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};
use weft_tap::{AfPacket, AfPacketOptions, AfPacketRx, AfPacketTx, Offloads, PortDrop, PortStats};

/// IEEE 802 local experimental EtherType: nothing in the kernel answers or forwards it.
const TEST_ETHERTYPE: [u8; 2] = [0x88, 0xb5];
/// Large enough that the two 128 KiB blocks hold only a couple of hundred frames.
const FRAME_LEN: usize = 1000;
/// Frames per flood: many times what the ring holds.
const FLOOD: u32 = 2000;

fn test_frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; FRAME_LEN];
    f[..6].fill(0xff);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x77, 0x01]);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE);
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Sends frames `seqs` and returns how many the kernel took (the sender's `tx_frames` grew
/// by that much; a frame refused, e.g. `ENOBUFS` from a full backlog, is not among them).
fn send(tx: &mut AfPacketTx, tx_stats: &PortStats, seqs: std::ops::Range<u32>) -> u64 {
    let before = tx_stats.snapshot().tx_frames;
    let frames: Vec<Vec<u8>> = seqs.map(test_frame).collect();
    for chunk in frames.chunks(64) {
        let burst: Vec<TxFrame<'_>> = chunk
            .iter()
            .map(|f| TxFrame::whole(f, OffloadInfo::default()))
            .collect();
        let mut done = 0;
        let deadline = Instant::now() + Duration::from_secs(2);
        while done < burst.len() && Instant::now() < deadline {
            let n = tx.transmit(&burst[done..]);
            done += n;
            if n == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    // The kernel delivers to the packet socket in softirq context; let it finish.
    std::thread::sleep(Duration::from_millis(100));
    tx_stats.snapshot().tx_frames - before
}

/// Receives until nothing came for 200 ms (blocks retire after 1 ms); returns the sequence
/// numbers of the test frames and how many other frames came.
fn drain(rx: &mut AfPacketRx) -> (Vec<u32>, usize) {
    let mut batch = RxBatch::new(64);
    let (mut seqs, mut foreign) = (Vec::new(), 0);
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(200) {
        batch.clear();
        rx.receive(&mut batch);
        for d in batch.descs() {
            let f = rx.frame(d.handle).head;
            match f.get(14..18) {
                Some(s) if f.len() == FRAME_LEN && f[12..14] == TEST_ETHERTYPE => {
                    seqs.push(u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
                }
                _ => foreign += 1,
            }
        }
        if !batch.is_empty() {
            quiet_since = Instant::now();
        }
        rx.finish();
        std::thread::sleep(Duration::from_millis(1));
    }
    (seqs, foreign)
}

/// A namespace with IPv6 off before any interface exists in it, so the kernel sends
/// nothing on its own there (no neighbour discovery, no MLD): only the test's frames cross.
fn quiet_netns(tag: &str) -> Netns {
    let ns = Netns::new(tag);
    lab::run_ok(
        ns.cmd("sysctl").args([
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]),
        Duration::from_secs(10),
    );
    ns
}

#[test]
fn frames_a_full_receive_ring_lost_are_counted_as_ring_full() {
    if !lab::can_run("frames_a_full_receive_ring_lost_are_counted_as_ring_full") {
        return;
    }
    let _serial = lab::serial();
    let side = quiet_netns("s");
    let peer = quiet_netns("p");
    let (outer, inner) = (lab::unique("ro"), lab::unique("ri"));
    side.ip(&[
        "link", "add", &outer, "type", "veth", "peer", "name", &inner,
    ]);
    side.ip(&["link", "set", &inner, "netns", &peer.name]);

    let port = AfPacket::open(&AfPacketOptions {
        block_count: 2,
        ..AfPacketOptions::new(&outer).netns(side.path())
    })
    .unwrap_or_else(|e| panic!("AF_PACKET on {outer}: {e}"));
    let (mut rx, _rx_port_tx, stats) = port.split();
    let sender = AfPacket::open(
        &AfPacketOptions::new(&inner)
            .netns(peer.path())
            .offloads(Offloads::NONE),
    )
    .unwrap_or_else(|e| panic!("AF_PACKET on {inner}: {e}"));
    let (_sender_rx, mut tx, tx_stats) = sender.split();

    // Why equality holds: a frame sendmmsg accepted went through the veth (no qdisc) into the
    // peer's backlog, a drop there being reported to the sender as ENOBUFS instead; from the
    // backlog the kernel offers it to packet sockets before anything else may drop it, and
    // the port's socket then either puts it in the ring or counts it in `tp_drops`. With
    // nothing else on the wire, every frame sent is received or counted: no slack.
    let (mut sent, mut received, mut next) = (0u64, 0u64, 0u32);
    for round in 1..=2 {
        let taken = send(&mut tx, &tx_stats, next..next + FLOOD);
        let (seqs, foreign) = drain(&mut rx);
        assert_eq!(foreign, 0, "round {round}: only the test's frames crossed");
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1])
                && seqs.iter().all(|s| (next..next + FLOOD).contains(s)),
            "round {round}: each frame at most once, in order: {seqs:?}"
        );
        let got = u64::try_from(seqs.len()).unwrap_or(u64::MAX);
        assert!(
            got > 0 && got < taken,
            "round {round}: the ring held some of the {taken} frames, not all ({got})"
        );
        sent += taken;
        received += got;
        next += FLOOD;
        let snap = stats.snapshot();
        let ring_full = snap.drops(PortDrop::RingFull);
        println!("round {round}: sent {sent}, received {received}, ring_full {ring_full} (totals)");
        assert_eq!(snap.rx_frames, received, "round {round}");
        assert_eq!(
            received + ring_full,
            sent,
            "round {round}: every frame sent was received or counted as a ring drop, over \
             both rounds (the kernel resets its counter on each read: the port adds)"
        );
        assert_eq!(
            snap.total_drops(),
            ring_full,
            "round {round}: no other drop"
        );
    }

    // Fewer frames than the ring holds, into a drained ring: the same account, with few or no
    // drops (not none for certain: in about one run of 30 this kernel, 6.18, dropped one frame
    // here, counted as ever). Counting frames the kernel saw rather than dropped would fail.
    let before = stats.snapshot().drops(PortDrop::RingFull);
    let taken = send(&mut tx, &tx_stats, next..next + 50);
    let (seqs, foreign) = drain(&mut rx);
    let got = u64::try_from(seqs.len()).unwrap_or(u64::MAX);
    let ring_full = stats.snapshot().drops(PortDrop::RingFull) - before;
    assert_eq!((taken, foreign), (50, 0));
    assert_eq!(
        got + ring_full,
        taken,
        "received {got}, ring_full {ring_full}"
    );
    assert!(
        ring_full < 10,
        "a drained ring holds most of 50 frames: {ring_full} lost"
    );
}
