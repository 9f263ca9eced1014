//! A TAP of several queues split over lanes, its queues played by datagram socket pairs
//! (one frame per read and write, as a TAP queue moves them; no root needed).

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;

use weft_packet::OffloadInfo;
use weft_switch::{PortDevice, PortHalves, PortRx, RxBatch, TxFrame};

use crate::offloads::Offloads;
use crate::stats::PortDrop;
use crate::tap::TapQueue;
use crate::tap_device;
use crate::vnet::tx_header;

/// A device of `queues` queues and the far end of each.
fn device(queues: usize) -> (crate::TapDevice, Vec<UnixDatagram>) {
    let mut ours = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..queues {
        let (a, b) = UnixDatagram::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        ours.push(TapQueue::from_fd(OwnedFd::from(a), Offloads::NONE.caps(1500), 8).unwrap());
        peers.push(b);
    }
    (tap_device(ours, 1500, Offloads::NONE), peers)
}

/// A frame whose last byte says which queue it was sent on.
fn frame(tag: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[59] = tag;
    f
}

fn send(peer: &UnixDatagram, tag: u8) {
    let mut buf = tx_header(&OffloadInfo::default()).to_vec();
    buf.extend_from_slice(&frame(tag));
    peer.send(&buf).unwrap();
}

/// The tags of every frame one receive gives.
fn receive(rx: &mut dyn PortRx, room: usize) -> Vec<u8> {
    let mut batch = RxBatch::new(room);
    rx.receive(&mut batch);
    let tags = batch
        .descs()
        .iter()
        .map(|d| rx.frame(d.handle).head.last().copied().unwrap_or(0))
        .collect();
    rx.finish();
    tags
}

/// Whether the half's readiness descriptor says there is something to read.
fn readable(rx: &dyn PortRx) -> bool {
    let fd = rx.readiness_fd().unwrap();
    let mut poll = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: `poll` is one valid pollfd, alive for the duration of the call.
    #[allow(unsafe_code)]
    let n = unsafe { libc::poll(poll.as_mut_ptr(), 1, 0) };
    n == 1
}

fn lanes(device: &mut crate::TapDevice, lanes: usize) -> Vec<PortHalves> {
    device.take_lanes(lanes).unwrap()
}

#[test]
fn each_lane_receives_the_queues_that_fall_to_it_and_wakes_for_any_of_them() {
    let (mut dev, peers) = device(4);
    let mut halves = lanes(&mut dev, 2);
    assert_eq!(halves.len(), 2);
    for (q, peer) in peers.iter().enumerate() {
        send(peer, u8::try_from(q).unwrap());
    }
    let mut got: Vec<Vec<u8>> = Vec::new();
    for half in &mut halves {
        let rx = half.rx.as_deref_mut().unwrap();
        assert!(readable(rx));
        let mut tags = receive(rx, 8);
        tags.sort_unstable();
        got.push(tags);
        assert!(!readable(rx), "read to the end: nothing left to wake for");
    }
    assert_eq!(got, [vec![0, 2], vec![1, 3]]);
    // A frame on queue 3 wakes lane 1, not lane 0.
    send(&peers[3], 3);
    assert!(!readable(halves[0].rx.as_deref().unwrap()));
    assert!(readable(halves[1].rx.as_deref().unwrap()));
}

#[test]
fn each_lane_transmits_on_its_own_queue() {
    let (mut dev, peers) = device(2);
    let mut halves = lanes(&mut dev, 2);
    for (lane, half) in halves.iter_mut().enumerate() {
        let body = frame(u8::try_from(lane).unwrap());
        let sent = half
            .tx
            .transmit(&[TxFrame::whole(&body, OffloadInfo::default())]);
        assert_eq!(sent, 1);
    }
    let mut buf = [0u8; 128];
    for (q, peer) in peers.iter().enumerate() {
        let n = peer.recv(&mut buf).unwrap();
        assert_eq!(usize::from(buf[n - 1]), q, "lane {q} wrote to queue {q}");
        assert!(peer.recv(&mut buf).is_err(), "one frame per queue");
    }
}

#[test]
fn with_fewer_queues_than_lanes_the_extra_lanes_share_a_queue_to_send_and_receive_nothing() {
    let (mut dev, peers) = device(2);
    let mut halves = lanes(&mut dev, 3);
    assert_eq!(halves.len(), 3);
    assert!(halves[0].rx.is_some() && halves[1].rx.is_some());
    assert!(halves[2].rx.is_none());
    let body = frame(9);
    let sent = halves[2]
        .tx
        .transmit(&[TxFrame::whole(&body, OffloadInfo::default())]);
    assert_eq!(sent, 1);
    let mut buf = [0u8; 128];
    let n = peers[0].recv(&mut buf).unwrap();
    assert_eq!(buf[n - 1], 9, "lane 2 sends through queue 2 % 2 = 0");
    assert!(peers[1].recv(&mut buf).is_err());
}

#[test]
fn a_lane_starts_each_batch_at_its_next_queue_so_none_is_starved() {
    let (mut dev, peers) = device(2);
    let mut halves = lanes(&mut dev, 1);
    let rx = halves[0].rx.as_deref_mut().unwrap();
    for _ in 0..3 {
        send(&peers[0], 0);
        send(&peers[1], 1);
    }
    // Room for one frame a batch: the queues take turns.
    let firsts: Vec<u8> = (0..4).map(|_| receive(rx, 1)[0]).collect();
    assert_eq!(firsts, [0, 1, 0, 1]);
}

#[test]
fn a_one_queue_tap_gives_one_pair_whatever_the_lanes() {
    let (mut dev, peers) = device(1);
    let mut halves = lanes(&mut dev, 4);
    assert_eq!(
        halves.len(),
        1,
        "the daemon puts it on the port's home lane"
    );
    let rx = halves[0].rx.as_deref_mut().unwrap();
    send(&peers[0], 5);
    assert!(readable(rx));
    assert_eq!(receive(rx, 4), [5]);
    assert!(matches!(
        dev.take_lanes(4),
        Err(weft_switch::DeviceError::AlreadySplit)
    ));
}

#[test]
fn counters_add_up_every_queue() {
    let (mut dev, peers) = device(3);
    let mut halves = lanes(&mut dev, 3);
    // A datagram shorter than a virtio-net header and an Ethernet header, on queue 2.
    peers[2].send(&[0u8; 4]).unwrap();
    send(&peers[0], 0);
    for half in &mut halves {
        receive(half.rx.as_deref_mut().unwrap(), 8);
    }
    let mut drops = Vec::new();
    dev.visit_counters(&mut |c| drops.push((c.name.to_string(), c.value)));
    let truncated = PortDrop::Truncated.name().to_string();
    assert!(drops.contains(&(truncated, 1)), "{drops:?}");
    let totals = dev.totals();
    assert_eq!(totals.rx_frames, 1);
    assert_eq!(totals.total_drops(), 1);
    assert_eq!(dev.queues(), 3);
}
