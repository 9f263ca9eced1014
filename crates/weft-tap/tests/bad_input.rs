//! Hostile frames on a TAP queue (crafted virtio-net headers the kernel itself would never
//! write, from a descriptor another process handed over) and frames the kernel refuses on
//! transmit: dropped, counted by reason, and the switch keeps forwarding.

mod common;

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;

use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::OffloadInfo;
use weft_switch::memory_port::memory_port;
use weft_switch::{PortCaps, PortOptions, PortTx, Switch, SwitchConfig, Timestamp, TxFrame};
use weft_tap::{Offloads, PortDrop, Tap, TapOptions, TapQueue};

fn frame(len: usize, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; len];
    // Broadcast from a unicast source, IPv4 EtherType.
    f[..12].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn datagram(header: [u8; 12], frame: &[u8]) -> Vec<u8> {
    let mut d = header.to_vec();
    d.extend_from_slice(frame);
    d
}

#[test]
fn crafted_frames_on_a_tap_queue_are_dropped_by_reason_and_forwarding_goes_on() {
    let (ours, peer) = UnixDatagram::pair().unwrap();
    let queue = TapQueue::from_fd(OwnedFd::from(ours), Offloads::ALL.caps(1500), 64).unwrap();
    let (rx, tx, stats) = queue.split();
    let mut switch = Switch::new("bad", SwitchConfig::default()).unwrap();
    let tap = switch
        .add_port(
            "tap",
            Some(Box::new(rx)),
            Box::new(tx),
            PortOptions::default(),
        )
        .unwrap();
    let (mrx, mtx, sink) = memory_port(PortCaps::plain(1500), 64);
    switch
        .add_port(
            "sink",
            Some(Box::new(mrx)),
            Box::new(mtx),
            PortOptions::default(),
        )
        .unwrap();

    // Larger than the MTU, no GSO.
    peer.send(&datagram([0; 12], &frame(1515, 1))).unwrap();
    // GSO asked for without a partial checksum.
    let mut no_csum = [0u8; 12];
    no_csum[1] = gso_type::TCPV4;
    no_csum[4..6].copy_from_slice(&1448u16.to_le_bytes());
    peer.send(&datagram(no_csum, &frame(3000, 2))).unwrap();
    // A checksum field outside the frame.
    let mut outside = [0u8; 12];
    outside[0] = flags::NEEDS_CSUM;
    outside[6..8].copy_from_slice(&34u16.to_le_bytes());
    outside[8..10].copy_from_slice(&4000u16.to_le_bytes());
    peer.send(&datagram(outside, &frame(100, 3))).unwrap();
    // An unknown GSO type.
    let mut unknown = [0u8; 12];
    unknown[0] = flags::NEEDS_CSUM;
    unknown[1] = 9;
    peer.send(&datagram(unknown, &frame(100, 4))).unwrap();
    // Truncated: shorter than the header, and a header with half an Ethernet header.
    peer.send(&[0u8; 5]).unwrap();
    peer.send(&datagram([0; 12], &[0xff; 7])).unwrap();
    // A good frame behind them all.
    peer.send(&datagram([0; 12], &frame(64, 5))).unwrap();

    let mut received = 0;
    for i in 0..4 {
        received += switch.poll(tap, Timestamp::from_millis(i));
    }
    assert_eq!(received, 1);
    let sent = sink.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, frame(64, 5));
    let s = stats.snapshot();
    assert_eq!(s.drops(PortDrop::Oversize), 1);
    assert_eq!(s.drops(PortDrop::BadVnetHeader), 3);
    assert_eq!(s.drops(PortDrop::Truncated), 2);
    assert_eq!(s.rx_frames, 1);
}

#[test]
fn a_real_tap_refuses_malformed_frames_on_transmit_and_the_port_counts_them() {
    if !common::lab::can_run(
        "a_real_tap_refuses_malformed_frames_on_transmit_and_the_port_counts_them",
    ) {
        return;
    }
    let _serial = common::lab::serial();
    let ns = common::lab::Netns::new("b");
    let name = common::lab::unique("bad");
    let tap = Tap::open(&TapOptions::new(&name).netns(ns.path())).unwrap();
    let (_rx, mut tx, stats) = tap.into_queues().remove(0).split();
    let good = frame(64, 6);
    // Shorter than an Ethernet header; and a header length beyond the frame.
    let short = [0xffu8; 10];
    let long_hdr = OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        gso: weft_packet::GsoKind::TcpV4,
        gso_size: 1448,
        hdr_len: 4000,
        ..OffloadInfo::default()
    };
    let frames = [
        TxFrame::whole(&short, OffloadInfo::default()),
        TxFrame::whole(&good, long_hdr),
        TxFrame::whole(&good, OffloadInfo::default()),
    ];
    assert_eq!(
        tx.transmit(&frames),
        3,
        "refused frames are consumed, not retried"
    );
    let s = stats.snapshot();
    assert_eq!(s.drops(PortDrop::TxError), 2);
    assert_eq!(s.tx_frames, 1);
}

#[test]
fn a_tap_descriptor_without_virtio_net_headers_is_refused() {
    if !common::lab::can_run("a_tap_descriptor_without_virtio_net_headers_is_refused") {
        return;
    }
    let _serial = common::lab::serial();
    let tun = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .unwrap();
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = common::lab::unique("plain");
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = libc::c_char::from_ne_bytes([s]);
    }
    req.ifr_ifru.ifru_flags = libc::c_short::try_from(libc::IFF_TAP | libc::IFF_NO_PI).unwrap();
    // SAFETY: TUNSETIFF reads and writes one ifreq, which `req` is.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&tun),
            libc::TUNSETIFF,
            &mut req,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    let refused = TapQueue::from_fd(OwnedFd::from(tun), Offloads::ALL.caps(1500), 8);
    assert!(
        matches!(refused, Err(weft_tap::PortError::BadOption(_))),
        "{refused:?}"
    );
}
