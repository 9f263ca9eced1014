//! The TAP halves over a datagram socket pair: the same reads and writes, no root needed.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;

use weft_packet::{GsoKind, OffloadInfo};
use weft_switch::{FrameHandle, PortRx, PortTx, RxBatch, TxFrame};

use super::*;
use crate::stats::PortDrop;
use crate::vnet::tx_header;

fn pair(caps: PortCaps, rx_frames: usize) -> (TapRx, TapTx, Arc<PortStats>, UnixDatagram) {
    let (ours, peer) = UnixDatagram::pair().unwrap();
    peer.set_nonblocking(true).unwrap();
    let queue = TapQueue::from_fd(OwnedFd::from(ours), caps, rx_frames).unwrap();
    let (rx, tx, stats) = queue.split();
    (rx, tx, stats, peer)
}

fn frame(len: usize, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn send(peer: &UnixDatagram, offload: &OffloadInfo, frame: &[u8]) {
    let mut buf = tx_header(offload).to_vec();
    buf.extend_from_slice(frame);
    peer.send(&buf).unwrap();
}

#[test]
fn received_frames_come_out_without_their_header() {
    let (mut rx, _tx, stats, peer) = pair(Offloads::ALL.caps(1500), 8);
    send(&peer, &OffloadInfo::default(), &frame(60, 1));
    send(&peer, &OffloadInfo::default(), &frame(1514, 2));
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 2);
    assert_eq!(rx.frame(batch.descs()[0].handle).head, &frame(60, 1)[..]);
    assert_eq!(rx.frame(batch.descs()[1].handle).head, &frame(1514, 2)[..]);
    assert!(rx.frame(FrameHandle(7)).is_empty());
    rx.finish();
    assert!(rx.frame(batch.descs()[0].handle).is_empty());
    assert_eq!(stats.snapshot().rx_frames, 2);
}

#[test]
fn offload_state_is_read_from_the_header() {
    let (mut rx, _tx, stats, peer) = pair(Offloads::ALL.caps(1500), 8);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        gso: GsoKind::TcpV4,
        gso_size: 1448,
        hdr_len: 54,
        ..OffloadInfo::default()
    };
    send(&peer, &info, &frame(30_000, 3));
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.descs()[0].offload, info);
    let s = stats.snapshot();
    assert_eq!((s.rx_gso_frames, s.rx_csum_partial), (1, 1));
}

#[test]
fn bad_frames_are_dropped_and_counted_by_reason() {
    let (mut rx, _tx, stats, peer) = pair(Offloads::ALL.caps(1500), 8);
    // Truncated: shorter than header + Ethernet header; and an empty datagram.
    peer.send(&[0u8; 8]).unwrap();
    peer.send(&[]).unwrap();
    // Larger than the MTU without GSO.
    send(&peer, &OffloadInfo::default(), &frame(3000, 4));
    // GSO without a partial checksum: inconsistent.
    let mut bad = tx_header(&OffloadInfo::default());
    bad[1] = weft_packet::virtio_net::gso_type::TCPV4;
    bad[4..6].copy_from_slice(&1448u16.to_le_bytes());
    let mut buf = bad.to_vec();
    buf.extend_from_slice(&frame(3000, 5));
    peer.send(&buf).unwrap();
    // And a good one behind them.
    send(&peer, &OffloadInfo::default(), &frame(100, 6));
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1);
    assert_eq!(rx.frame(batch.descs()[0].handle).head, &frame(100, 6)[..]);
    let s = stats.snapshot();
    assert_eq!(s.drops(PortDrop::Truncated), 2);
    assert_eq!(s.drops(PortDrop::Oversize), 1);
    assert_eq!(s.drops(PortDrop::BadVnetHeader), 1);
    assert_eq!(s.rx_frames, 1);
}

#[test]
fn receive_stops_at_its_buffer_count_and_resumes_after_finish() {
    let (mut rx, _tx, _stats, peer) = pair(Offloads::ALL.caps(1500), 2);
    for i in 0..5u8 {
        send(&peer, &OffloadInfo::default(), &frame(64, i));
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let mut batch = RxBatch::new(8);
        rx.receive(&mut batch);
        assert!(batch.len() <= 2);
        for d in batch.descs() {
            seen.push(rx.frame(d.handle).head[20]);
        }
        rx.finish();
    }
    assert_eq!(seen, vec![0, 1, 2, 3, 4]);
}

#[test]
fn receive_respects_the_room_left_in_the_batch() {
    let (mut rx, _tx, _stats, peer) = pair(Offloads::ALL.caps(1500), 8);
    for i in 0..3u8 {
        send(&peer, &OffloadInfo::default(), &frame(64, i));
    }
    let mut batch = RxBatch::new(1);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1);
}

#[test]
fn transmit_writes_header_head_and_body() {
    let (_rx, mut tx, stats, peer) = pair(Offloads::ALL.caps(1500), 1);
    let body = frame(200, 7);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 38,
        csum_offset: 16,
        ..OffloadInfo::default()
    };
    let head = [9u8; 16];
    let frames = [
        TxFrame::with_head(&head, &body[12..], info),
        TxFrame::whole(&body, OffloadInfo::default()),
    ];
    assert_eq!(tx.transmit(&frames), 2);
    let mut buf = vec![0u8; 4096];
    let n = peer.recv(&mut buf).unwrap();
    assert_eq!(&buf[..12], &tx_header(&info));
    assert_eq!(&buf[12..28], &head);
    assert_eq!(&buf[28..n], &body[12..]);
    let n = peer.recv(&mut buf).unwrap();
    assert_eq!(&buf[..12], &[0u8; 12]);
    assert_eq!(&buf[12..n], &body[..]);
    let s = stats.snapshot();
    assert_eq!((s.tx_frames, s.tx_csum_partial), (2, 1));
}

#[test]
fn transmit_returns_the_frames_taken_before_the_queue_filled() {
    let (_rx, mut tx, stats, _peer) = pair(Offloads::ALL.caps(1500), 1);
    let body = frame(1000, 8);
    let frames = vec![TxFrame::whole(&body, OffloadInfo::default()); 4096];
    let accepted = tx.transmit(&frames);
    assert!(accepted > 0 && accepted < frames.len(), "{accepted}");
    assert_eq!(stats.snapshot().tx_frames, accepted as u64);
    assert_eq!(stats.snapshot().total_drops(), 0);
}

#[test]
fn frames_the_kernel_refuses_are_counted_and_skipped() {
    let (_rx, mut tx, stats, peer) = pair(Offloads::ALL.caps(1500), 1);
    drop(peer);
    let body = frame(100, 9);
    let frames = [TxFrame::whole(&body, OffloadInfo::default()); 3];
    assert_eq!(tx.transmit(&frames), 3);
    assert_eq!(stats.snapshot().drops(PortDrop::TxError), 3);
}

#[test]
fn the_queue_descriptor_is_the_readiness_descriptor() {
    let (rx, tx, _stats, _peer) = pair(Offloads::NONE.caps(9000), 1);
    assert!(rx.readiness_fd().is_some());
    assert_eq!(tx.caps(), Offloads::NONE.caps(9000));
}

#[test]
fn options_out_of_range_are_refused() {
    let bad = [
        TapOptions::new("").queues(1),
        TapOptions::new("ok").queues(0),
        TapOptions::new("ok").queues(MAX_QUEUES + 1),
        TapOptions {
            rx_frames: 0,
            ..TapOptions::new("ok")
        },
    ];
    for o in bad {
        assert!(Tap::open(&o).is_err(), "{o:?}");
    }
}
