//! TCP segmentation offload both ways: 64 KB super-frames pass whole, with their virtio-net
//! header's GSO fields.

use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::OffloadInfo;
use weft_switch::{PortTx as _, TxFrame};

use super::{features, guest_memory, header_of, MockRig};
use crate::tests::testutil::{net_header, tcp4_frame, tcp4_offload};

/// Ethernet, IPv4 and TCP headers.
const HEADERS: usize = 54;
const MSS: u16 = 1448;

/// A TCP/IPv4 super-frame whose IPv4 packet is the largest there is (65 535 bytes), as a
/// driver asking for checksum completion hands it over.
pub(super) fn tcp4_super_frame() -> Vec<u8> {
    let f = tcp4_frame(65_535 - 40);
    assert_eq!(f.len(), 14 + 65_535);
    assert_eq!(&f[16..18], &[0xff, 0xff], "IPv4 total length");
    f
}

/// The offload state of [`tcp4_super_frame`].
fn tso4_info() -> OffloadInfo {
    tcp4_offload(Some(MSS))
}

/// The virtio-net header a driver sends [`tcp4_super_frame`] behind.
pub(super) fn tso4_header() -> [u8; 12] {
    let hdr_len = u16::try_from(HEADERS).unwrap();
    net_header(flags::NEEDS_CSUM, gso_type::TCPV4, hdr_len, MSS, 34, 16)
}

#[test]
fn a_mock_driver_tso_super_frame_reaches_the_switch_whole_with_its_offload() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, features(&[], &[]));
    let f = tcp4_super_frame();
    // The header alone, the frame's headers alone, the payload in 8 KiB buffers.
    let split: Vec<usize> = [12, HEADERS].into_iter().chain([8192; 7]).collect();
    let head = rig.txq.send(&tso4_header(), &f, &split);
    let got = rig.receive();
    assert_eq!(got.len(), 1);
    assert!(got[0].0 == f, "the super-frame changed on its way");
    assert_eq!(got[0].1, tso4_info());
    assert_eq!(rig.txq.used(), vec![(u32::from(head), 0)]);
    let s = rig.stats_from_guest();
    assert_eq!((s.frames, s.bytes), (1, f.len() as u64));
    assert_eq!((s.total_drops(), s.total_faults()), (0, 0));
}

#[test]
fn a_tso_super_frame_reaches_a_mock_driver_unsegmented_with_its_gso_header() {
    let mem = guest_memory();
    let mut rig = MockRig::new(&mem, features(&[], &[]));
    assert!(rig.tx.caps().tso4);
    let posted = rig.rxq.post_each(20, 4096);
    let f = tcp4_super_frame();
    assert_eq!(rig.tx.transmit(&[TxFrame::whole(&f, tso4_info())]), 1);
    let used = rig.rxq.used();
    // 12 + 65 549 bytes: sixteen whole buffers and 25 bytes of a seventeenth.
    let expected: Vec<(u32, u32)> = posted[..17]
        .iter()
        .map(|h| u32::from(*h))
        .zip([4096; 16].into_iter().chain([25]))
        .collect();
    assert_eq!(used, expected);
    let got = rig.rxq.read_used(&used);
    let h = header_of(&got);
    assert_eq!(h.flags(), flags::NEEDS_CSUM);
    assert_eq!(h.gso_type(), gso_type::TCPV4);
    assert_eq!(
        (h.hdr_len(), h.gso_size(), h.csum_start(), h.csum_offset()),
        (54, MSS, 34, 16)
    );
    assert_eq!(h.num_buffers(), Some(17));
    assert!(got[12..] == f[..], "the super-frame changed on its way");
    let s = rig.stats_to_guest();
    assert_eq!((s.frames, s.software_offloads, s.total_drops()), (1, 0, 0));
}
