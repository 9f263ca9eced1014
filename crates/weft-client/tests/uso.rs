//! UDP segmentation offload through weft's vhost-user ports: three weft-client endpoints on
//! one switch run by a weft worker. A client that negotiated `HOST_USO` sends UDP/IPv4 and
//! UDP/IPv6 super-frames; one that negotiated `GUEST_USO4/6` receives each whole, as sent;
//! one that declined USO receives the datagrams the switch cut them into, each valid.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use weft_client::{ClientConfig, GsoKind, OffloadInfo, RecvBatch, TxFrame, WaitMode, WeftClient};
use weft_packet::{checksum, complete_checksum};
use weft_runtime::WorkerConfig;
use weft_vhost::VhostPortConfig;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];
const V4: (Ipv4Addr, Ipv4Addr) = (Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 2));
const V6: (Ipv6Addr, Ipv6Addr) = (
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
);
const DATAGRAM: u16 = 1400;
const PAYLOAD: usize = 20_000;
const WAIT: Duration = Duration::from_secs(5);

/// An Ethernet frame carrying one UDP super-frame of `payload` to `dst`, described as a
/// virtio driver describes it: the checksum field holds the pseudo-header sum.
fn udp_superframe(ipv6: bool, dst: [u8; 6], payload: &[u8]) -> (Vec<u8>, OffloadInfo) {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&MAC_A);
    let udp_len = u16::try_from(8 + payload.len()).unwrap();
    let pseudo = if ipv6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&V6.0.octets());
        f.extend_from_slice(&V6.1.octets());
        checksum::pseudo_header_v6(V6.0, V6.1, 17, u32::from(udp_len))
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&V4.0.octets());
        ip[16..20].copy_from_slice(&V4.1.octets());
        let sum = checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        checksum::pseudo_header_v4(V4.0, V4.1, 17, udp_len)
    };
    let l4 = f.len();
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&pseudo.to_be_bytes());
    f.extend_from_slice(payload);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: u16::try_from(l4).unwrap(),
        csum_offset: 6,
        gso: GsoKind::UdpL4,
        gso_size: DATAGRAM,
        hdr_len: u16::try_from(l4 + 8).unwrap(),
        ..OffloadInfo::default()
    };
    (f, info)
}

/// A small frame from `src`, so that the switch learns where it is.
fn hello(src: [u8; 6]) -> Vec<u8> {
    let mut f = MAC_A.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xb5]);
    f.resize(60, 0);
    f
}

/// Every frame `client` receives until nothing more comes for a while.
fn drain(client: &mut WeftClient, quiet: Duration) -> Vec<(Vec<u8>, OffloadInfo)> {
    let mut batch = RecvBatch::with_capacity(64, 1 << 20);
    let mut got = Vec::new();
    let mut wait = WAIT;
    while client
        .recv_wait(&mut batch, 64, wait, WaitMode::Block)
        .unwrap()
        > 0
    {
        got.extend(batch.iter().map(|f| (f.bytes.to_vec(), f.offload)));
        wait = quiet;
    }
    got
}

/// The UDP datagram of a received frame, its checksum completed and checked; its payload.
fn checked_payload(frame: &mut [u8], info: &OffloadInfo, ipv6: bool) -> Vec<u8> {
    complete_checksum(frame, info).unwrap();
    let l4 = if ipv6 { 14 + 40 } else { 14 + 20 };
    let udp = &frame[l4..];
    let len = u16::try_from(udp.len()).unwrap();
    assert_eq!(u16::from_be_bytes([udp[4], udp[5]]), len, "UDP length");
    let pseudo = if ipv6 {
        checksum::pseudo_header_v6(V6.0, V6.1, 17, u32::from(len))
    } else {
        assert!(checksum::is_valid(&frame[14..34]), "IPv4 header checksum");
        checksum::pseudo_header_v4(V4.0, V4.1, 17, len)
    };
    assert_eq!(
        checksum::combine(pseudo, checksum::sum(udp)),
        0xffff,
        "UDP checksum"
    );
    udp[8..].to_vec()
}

#[test]
fn udp_super_frames_reach_a_uso_guest_whole_and_others_as_valid_datagrams() {
    let rig = common::Rig::new(
        "uso",
        3,
        VhostPortConfig::default(),
        WorkerConfig::default(),
    );
    let connect = |i: usize, uso: bool| {
        WeftClient::connect(
            &rig.sockets[i],
            ClientConfig {
                uso,
                ..ClientConfig::default()
            },
        )
        .unwrap()
    };
    let mut a = connect(0, true);
    let mut b = connect(1, true);
    let mut c = connect(2, false);
    rig.wait_running();
    assert!(a
        .negotiated()
        .may_send(&udp_superframe(false, MAC_B, &[0; 10]).1));
    assert!(b.negotiated().rx_uso());
    assert!(!c.negotiated().rx_uso());
    for (client, mac) in [(&mut b, MAC_B), (&mut c, MAC_C)] {
        assert_eq!(
            client.send_batch(&[TxFrame::plain(&hello(mac))]).unwrap(),
            1
        );
    }
    // MAC_A is unknown yet: each hello was flooded to the two other clients.
    assert_eq!(drain(&mut a, Duration::from_millis(200)).len(), 2);
    assert_eq!(drain(&mut b, Duration::from_millis(200)).len(), 1);
    assert_eq!(drain(&mut c, Duration::from_millis(200)).len(), 1);

    let payload: Vec<u8> = (0..PAYLOAD)
        .map(|i| u8::try_from(i * 7 % 251).unwrap())
        .collect();
    for ipv6 in [false, true] {
        let (to_b, info) = udp_superframe(ipv6, MAC_B, &payload);
        let (to_c, _) = udp_superframe(ipv6, MAC_C, &payload);
        let frames = [
            TxFrame {
                bytes: &to_b,
                offload: info,
            },
            TxFrame {
                bytes: &to_c,
                offload: info,
            },
        ];
        assert_eq!(a.send_batch(&frames).unwrap(), 2);

        // B took USO: one frame, as sent, still a super-frame.
        let got = drain(&mut b, Duration::from_millis(200));
        assert_eq!(got.len(), 1, "ipv6 {ipv6}");
        let (bytes, offload) = &got[0];
        assert_eq!(bytes, &to_b);
        assert_eq!((offload.gso, offload.gso_size), (GsoKind::UdpL4, DATAGRAM));
        let mut whole = bytes.clone();
        let mut one = *offload;
        one.gso = GsoKind::None;
        assert_eq!(checked_payload(&mut whole, &one, ipv6), payload);

        // C did not: the datagrams, each valid, the payload in order.
        let got = drain(&mut c, Duration::from_millis(200));
        assert_eq!(
            got.len(),
            PAYLOAD.div_ceil(usize::from(DATAGRAM)),
            "ipv6 {ipv6}"
        );
        let mut joined = Vec::new();
        for (mut bytes, offload) in got {
            assert_eq!(offload.gso, GsoKind::None);
            joined.extend(checked_payload(&mut bytes, &offload, ipv6));
        }
        assert_eq!(joined, payload);
    }
    assert_eq!(rig.switch_drops(), 0);
}
