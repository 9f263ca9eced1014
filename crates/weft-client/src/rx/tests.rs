//! The receive path against a backend in miniature that writes the used ring by hand,
//! well and badly.

use std::sync::atomic::Ordering;

use proptest::prelude::*;
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_net::{VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_MRG_RXBUF};
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;

use super::*;
use crate::config::bit;
use crate::ring::RingLayout;

const SIZE: u16 = 16;
const BUF: u32 = 2048;
const BUFFERS: u64 = 0x2000;

struct Backend {
    mem: SharedMemory,
    layout: RingLayout,
    used_idx: u16,
}

impl Backend {
    /// Writes a used element for descriptor `id`, its buffer holding `bytes`.
    fn fill(&mut self, id: u32, len: u32, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.mem
                .write(bytes, BUFFERS + u64::from(id) * u64::from(BUF))
                .unwrap();
        }
        let at = self.layout.used + 4 + 8 * u64::from(self.used_idx % SIZE);
        self.mem.store_u32(at, id).unwrap();
        self.mem.store_u32(at + 4, len).unwrap();
        self.used_idx = self.used_idx.wrapping_add(1);
    }
    fn publish(&self) {
        self.mem
            .store_u16(self.layout.used + 2, self.used_idx, Ordering::Release)
            .unwrap();
    }
    fn avail_idx(&self) -> u16 {
        self.mem
            .load_u16(self.layout.avail + 2, Ordering::Acquire)
            .unwrap()
    }
}

fn setup(features: u64) -> (Backend, RxQueue) {
    let layout = RingLayout::new(0, SIZE);
    let mem =
        SharedMemory::new(usize::try_from(BUFFERS).unwrap() + usize::from(SIZE) * 2048).unwrap();
    let rx = RxQueue::new(
        &mem,
        DriverRing::new(layout, true),
        Notifier::new().unwrap(),
        BUFFERS,
        BUF,
        Negotiated(features),
        1500,
    )
    .unwrap();
    (
        Backend {
            mem,
            layout,
            used_idx: 0,
        },
        rx,
    )
}

fn mergeable() -> u64 {
    bit(VIRTIO_F_VERSION_1)
        | bit(VIRTIO_NET_F_MRG_RXBUF)
        | bit(VIRTIO_RING_F_EVENT_IDX)
        | bit(VIRTIO_NET_F_GUEST_CSUM)
}

fn header(num_buffers: u16) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[10..12].copy_from_slice(&num_buffers.to_le_bytes());
    h
}

#[test]
fn all_buffers_are_posted_at_setup() {
    let (be, _rx) = setup(mergeable());
    assert_eq!(be.avail_idx(), SIZE);
}

#[test]
fn a_frame_spanning_buffers_is_joined_and_its_buffers_posted_again() {
    let (mut be, mut rx) = setup(mergeable());
    let frame: Vec<u8> = (0..1400u32)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    let mut first = header(2).to_vec();
    first.extend_from_slice(&frame[..1000]);
    be.fill(0, 1012, &first);
    be.fill(1, 400, &frame[1000..]);
    be.publish();
    let mut out = RecvBatch::new();
    assert_eq!(rx.recv(&be.mem, &mut out, 8).unwrap(), 1);
    let f = out.get(0).unwrap();
    assert_eq!(f.bytes, &frame[..]);
    assert_eq!(f.offload, OffloadInfo::default());
    assert_eq!(be.avail_idx(), SIZE + 2);
    assert_eq!(rx.ring.stats.total_faults(), 0);
}

#[test]
fn a_frame_whose_last_buffers_are_not_published_yet_waits_for_them() {
    let (mut be, mut rx) = setup(mergeable());
    let mut first = header(2).to_vec();
    first.extend_from_slice(&[7u8; 100]);
    be.fill(0, 112, &first);
    be.publish();
    let mut out = RecvBatch::new();
    assert_eq!(rx.recv(&be.mem, &mut out, 8).unwrap(), 0);
    assert_eq!(rx.ring.stats.total_faults(), 0);
    be.fill(1, 10, &[8u8; 10]);
    be.publish();
    assert_eq!(rx.recv(&be.mem, &mut out, 8).unwrap(), 1);
    assert_eq!(out.get(0).unwrap().bytes.len(), 110);
}

#[test]
fn hostile_used_elements_are_counted_by_reason_and_their_buffers_reused() {
    let (mut be, mut rx) = setup(mergeable());
    let mut tso = header(1);
    tso[0] = 1; // NEEDS_CSUM
    tso[1] = 1; // gso_type TCPV4, not negotiated
    tso[6..8].copy_from_slice(&34u16.to_le_bytes());
    tso[8..10].copy_from_slice(&16u16.to_le_bytes());
    tso[2..4].copy_from_slice(&54u16.to_le_bytes());
    tso[4..6].copy_from_slice(&1448u16.to_le_bytes());
    let mut bad_flags = header(1);
    bad_flags[0] = 0x80;
    be.fill(0, BUF + 1, &header(1)); // longer than the buffer
    be.fill(1, 40, &header(0)); // num_buffers 0
    be.fill(2, 40, &header(1000)); // more buffers than the ring
    be.fill(99, 40, &[]); // id out of range
    be.fill(3, 20, &header(1)); // frame of 8 bytes
    be.fill(4, 100, &tso);
    be.fill(5, 100, &bad_flags);
    be.fill(6, 12 + 64, &header(1)); // a good one after all that
    be.publish();
    let mut out = RecvBatch::new();
    assert_eq!(rx.recv(&be.mem, &mut out, 64).unwrap(), 1);
    assert_eq!(out.get(0).unwrap().bytes.len(), 64);
    let s = rx.ring.stats;
    for (fault, n) in [
        (RingFault::UsedLenTooLong, 1),
        (RingFault::BadNumBuffers, 2),
        (RingFault::UsedIdOutOfRange, 1),
        (RingFault::FrameTooShort, 1),
        (RingFault::OffloadNotNegotiated, 1),
        (RingFault::BadHeader, 1),
    ] {
        assert_eq!(s.faults_of(fault), n, "{fault:?}: {s:?}");
    }
    // Every buffer that came back, bad or good, is available again (not the bogus id).
    assert_eq!(be.avail_idx(), SIZE + 7);
}

proptest! {
    /// Whatever the backend writes in the used ring and the buffers, receiving never
    /// panics, never fails, and every element read is a frame or a counted fault.
    #[test]
    fn garbage_in_the_used_ring_never_panics(
        entries in proptest::collection::vec((0u32..24, 0u32..5000, any::<[u8; 12]>()), 0..16),
        mrg in any::<bool>(),
    ) {
        let features = if mrg { mergeable() } else { bit(VIRTIO_F_VERSION_1) };
        let (mut be, mut rx) = setup(features);
        for (id, len, hdr) in &entries {
            be.fill(*id, *len, if *id < u32::from(SIZE) { &hdr[..] } else { &[] });
        }
        be.publish();
        let mut out = RecvBatch::new();
        for _ in 0..3 {
            prop_assert!(rx.recv(&be.mem, &mut out, 64).is_ok());
            for f in out.iter() {
                prop_assert!(f.bytes.len() >= 14);
            }
        }
    }
}
