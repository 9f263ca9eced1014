//! Malformed chains and headers, through the port's halves: each one counted, none
//! panics, and a broken queue leaves the other queue and the process alone.

use crate::config::VhostPortConfig;
use crate::counters::{FrameDrop, QueueFault};
use crate::tests::testutil::net_header as header;
use crate::tests::testutil::{all_features, ether_frame, Rig, GUEST_MEM, INDIRECT, NEXT, WRITE};
use crate::vring::TX_QUEUE;
use vm_memory::{Bytes, GuestAddress};
use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::{OffloadInfo, VirtioNetHeaderError as H};
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

const SIZE: u16 = 256;

fn rig() -> (Rig, crate::rx::VhostPortRx, crate::tx::VhostPortTx) {
    let config = VhostPortConfig::default();
    Rig::new(config, all_features(&config), SIZE)
}

fn receive(rx: &mut crate::rx::VhostPortRx) -> usize {
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    let n = batch.len();
    rx.finish();
    n
}

/// A buffer holding a zero header and a valid 60-byte frame; its address.
fn good_buffer(rig: &mut Rig) -> u64 {
    let mut bytes = vec![0u8; 12];
    bytes.extend(ether_frame(1, 2, 60, 0));
    let addr = rig.txq.alloc(72);
    rig.txq.mem.write_slice(&bytes, GuestAddress(addr)).unwrap();
    addr
}

/// Runs one receive over a transmit queue holding only the chain at `head`, and checks
/// that it faults the queue with `fault`, and that the other queue still works.
fn assert_faults(
    rig: &mut Rig,
    rx: &mut crate::rx::VhostPortRx,
    tx: &mut crate::tx::VhostPortTx,
    fault: QueueFault,
) {
    assert_eq!(receive(rx), 0);
    assert_eq!(rig.fault_from_guest(), Some(fault));
    assert_eq!(rig.stats_from_guest().faulted(fault), 1);
    // Broken: nothing more is taken, even good chains.
    let good = good_buffer(rig);
    rig.txq.add_chain(&[(good, 72, false)]);
    assert_eq!(receive(rx), 0);
    // The guest's receive queue is untouched.
    rig.rxq.post_rx(1, 2048);
    let f = ether_frame(2, 1, 60, 1);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&f, OffloadInfo::default())]),
        1
    );
    assert_eq!(rig.fault_to_guest(), None);
}

#[test]
fn descriptor_loop_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = good_buffer(&mut rig);
    rig.txq.set_desc(0, a, 8, NEXT, 1);
    rig.txq.set_desc(1, a + 8, 8, NEXT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::ChainTooLong);
}

#[test]
fn self_loop_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = good_buffer(&mut rig);
    rig.txq.set_desc(5, a, 72, NEXT, 5);
    rig.txq.publish(5);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::ChainTooLong);
}

#[test]
fn next_index_out_of_range_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = good_buffer(&mut rig);
    rig.txq.set_desc(0, a, 12, NEXT, SIZE + 3);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::NextIndexOutOfRange);
}

#[test]
fn head_index_out_of_range_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.publish(SIZE);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::HeadIndexOutOfRange);
}

#[test]
fn buffer_outside_guest_memory_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.add_chain(&[(GUEST_MEM + 0x1000, 72, false)]);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::AddressOutOfRange);
}

#[test]
fn buffer_straddling_the_end_of_guest_memory_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.add_chain(&[(GUEST_MEM - 16, 72, false)]);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::AddressOutOfRange);
}

#[test]
fn buffer_wrapping_the_address_space_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.add_chain(&[(u64::MAX - 15, 72, false)]);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::AddressOutOfRange);
}

#[test]
fn writable_buffer_in_a_transmit_chain_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = good_buffer(&mut rig);
    rig.txq.add_chain(&[(a, 72, true)]);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::WrongDirection);
}

#[test]
fn available_index_running_ahead_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.set_avail_idx(SIZE + 1);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::AvailIndexOutOfRange);
}

/// Writes an indirect table of `descs` `(addr, len, flags, next)` into guest memory.
fn indirect_table(rig: &mut Rig, descs: &[(u64, u32, u16, u16)]) -> u64 {
    let at = rig.txq.alloc(16 * descs.len() as u64);
    for (i, (addr, len, flags, next)) in descs.iter().enumerate() {
        let d = virtio_queue::desc::split::Descriptor::new(*addr, *len, *flags, *next);
        rig.txq
            .mem
            .write_obj(d, GuestAddress(at + 16 * i as u64))
            .unwrap();
    }
    at
}

#[test]
fn a_valid_indirect_chain_is_read() {
    let (mut rig, mut rx, _tx) = rig();
    let a = good_buffer(&mut rig);
    let table = indirect_table(&mut rig, &[(a, 12, NEXT, 1), (a + 12, 60, 0, 0)]);
    rig.txq.set_desc(0, table, 32, INDIRECT, 0);
    rig.txq.publish(0);
    assert_eq!(receive(&mut rx), 1);
    assert_eq!(rig.fault_from_guest(), None);
}

#[test]
fn nested_indirect_table_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let inner = indirect_table(&mut rig, &[(0x10, 72, 0, 0)]);
    let outer = indirect_table(&mut rig, &[(inner, 16, INDIRECT, 0)]);
    rig.txq.set_desc(0, outer, 16, INDIRECT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::BadIndirectTable);
}

#[test]
fn indirect_table_of_partial_descriptors_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = good_buffer(&mut rig);
    let table = indirect_table(&mut rig, &[(a, 72, 0, 0), (0, 0, 0, 0)]);
    rig.txq.set_desc(0, table, 20, INDIRECT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::BadIndirectTable);
}

#[test]
fn empty_indirect_table_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.set_desc(0, 0x2000, 0, INDIRECT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::BadIndirectTable);
}

#[test]
fn indirect_table_outside_guest_memory_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    rig.txq.set_desc(0, GUEST_MEM + 0x100, 32, INDIRECT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::DescriptorUnreadable);
}

#[test]
fn indirect_table_running_past_the_end_of_guest_memory_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    // Its first descriptor is a whole frame, but the table's second one lies outside memory.
    let a = good_buffer(&mut rig);
    let at = GUEST_MEM - 16;
    rig.txq
        .mem
        .write_obj(
            virtio_queue::desc::split::Descriptor::new(a, 72, 0, 0),
            GuestAddress(at),
        )
        .unwrap();
    rig.txq.set_desc(0, at, 32, INDIRECT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::BadIndirectTable);
}

#[test]
fn indirect_loop_faults_the_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = good_buffer(&mut rig);
    let table = indirect_table(&mut rig, &[(a, 8, NEXT, 1), (a + 8, 8, NEXT, 0)]);
    rig.txq.set_desc(0, table, 32, INDIRECT, 0);
    rig.txq.publish(0);
    assert_faults(&mut rig, &mut rx, &mut tx, QueueFault::ChainTooLong);
}

/// Sends one chain and checks it is dropped for `reason` while the queue goes on.
fn assert_dropped(rig: &mut Rig, rx: &mut crate::rx::VhostPortRx, reason: FrameDrop) {
    assert_eq!(receive(rx), 0);
    assert_eq!(rig.stats_from_guest().dropped(reason), 1, "{reason:?}");
    assert_eq!(rig.fault_from_guest(), None);
    assert_eq!(
        rig.txq.take_used().len(),
        1,
        "the chain goes back to the guest"
    );
    // The queue goes on.
    rig.txq.send(&[0; 12], &ether_frame(1, 2, 60, 0), &[]);
    assert_eq!(receive(rx), 1);
}

#[test]
fn zero_length_descriptor_drops_the_frame() {
    let (mut rig, mut rx, _tx) = rig();
    let a = good_buffer(&mut rig);
    rig.txq
        .add_chain(&[(a, 12, false), (a, 0, false), (a + 12, 60, false)]);
    assert_dropped(&mut rig, &mut rx, FrameDrop::ZeroLengthDescriptor);
}

#[test]
fn chain_shorter_than_the_header_drops_the_frame() {
    let (mut rig, mut rx, _tx) = rig();
    let a = good_buffer(&mut rig);
    rig.txq.add_chain(&[(a, 4, false), (a + 4, 4, false)]);
    assert_dropped(&mut rig, &mut rx, FrameDrop::HeaderTooShort);
}

#[test]
fn frame_shorter_than_an_ethernet_header_drops() {
    let (mut rig, mut rx, _tx) = rig();
    rig.txq
        .send(&[0; 12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], &[]);
    assert_dropped(&mut rig, &mut rx, FrameDrop::FrameTooShort);
}

#[test]
fn frame_longer_than_a_super_frame_drops() {
    let (mut rig, mut rx, _tx) = rig();
    let f = ether_frame(1, 2, crate::config::MAX_FRAME_LEN + 1, 0);
    rig.txq.send(&[0; 12], &f, &[12, 40_000]);
    assert_dropped(&mut rig, &mut rx, FrameDrop::FrameTooLong);
}

#[test]
fn every_kind_of_bad_header_is_dropped_and_counted_by_reason() {
    let n = flags::NEEDS_CSUM;
    let cases: Vec<([u8; 12], usize, H)> = vec![
        (header(0x80, 0, 0, 0, 0, 0), 60, H::UnknownFlags(0x80)),
        (header(flags::RSC_INFO, 0, 0, 0, 0, 0), 60, H::RscInfo),
        (header(0, 9, 0, 0, 0, 0), 60, H::UnknownGsoType(9)),
        (
            header(n, gso_type::UDP, 42, 1000, 34, 6),
            2000,
            H::UfoUnsupported,
        ),
        (
            header(0, gso_type::ECN, 0, 0, 0, 0),
            60,
            H::EcnWithoutTcpGso,
        ),
        (
            header(0, gso_type::TCPV4, 54, 1448, 0, 0),
            2000,
            H::GsoWithoutNeedsCsum,
        ),
        (
            header(n, gso_type::TCPV4, 54, 0, 34, 16),
            2000,
            H::GsoSizeZero,
        ),
        (
            header(n, gso_type::TCPV4, 54, 65_508, 34, 16),
            2000,
            H::GsoSizeTooLarge(65_508),
        ),
        (
            header(n, gso_type::TCPV4, 54, 1, 34, 16),
            2000,
            H::TooManySegments { segments: 1946 },
        ),
        (
            header(n, 0, 0, 0, 50, 16),
            60,
            H::CsumOutOfFrame {
                csum_start: 50,
                csum_offset: 16,
                frame_len: 60,
            },
        ),
        (
            header(n, 0, 0, 0, 4, 6),
            60,
            H::CsumStartInEthernetHeader { csum_start: 4 },
        ),
        (
            header(n, gso_type::TCPV4, 54, 1448, 34, 6),
            2000,
            H::BadGsoCsumOffset { csum_offset: 6 },
        ),
        (
            header(n, gso_type::TCPV4, 3000, 1448, 34, 16),
            2000,
            H::HdrLenTooLarge {
                hdr_len: 3000,
                frame_len: 2000,
            },
        ),
    ];
    let (mut rig, mut rx, _tx) = rig();
    for (h, len, _) in &cases {
        rig.txq.send(h, &ether_frame(1, 2, *len, 0), &[]);
    }
    assert_eq!(receive(&mut rx), 0);
    let s = rig.stats_from_guest();
    for (_, _, e) in &cases {
        assert_eq!(s.dropped(FrameDrop::BadHeader(*e)), 1, "{e:?}");
    }
    assert_eq!(s.total_drops(), cases.len() as u64);
    assert_eq!(rig.txq.take_used().len(), cases.len());
    assert_eq!(rig.fault_from_guest(), None);
}

#[test]
fn a_fault_is_cleared_when_the_frontend_restarts_the_ring() {
    let (mut rig, mut rx, _tx) = rig();
    rig.txq.publish(SIZE + 1);
    assert_eq!(receive(&mut rx), 0);
    assert!(rig.fault_from_guest().is_some());
    let vring = rig.dev.tx_vring();
    let base = vring.lock().stop(&vring.counters);
    let mem = std::sync::Arc::new(crate::memory::GuardedMemory::unguarded(rig.txq.mem.clone()));
    let mut layout = rig.txq.layout();
    layout.base = base;
    rig.dev
        .start_ring(
            TX_QUEUE,
            crate::device::RingStart {
                mem,
                layout,
                features: rig.dev.features(),
                enabled: true,
                kick: None,
                call: None,
            },
            None,
        )
        .unwrap();
    assert_eq!(rig.fault_from_guest(), None);
    rig.txq.send(&[0; 12], &ether_frame(1, 2, 60, 0), &[]);
    assert_eq!(receive(&mut rx), 1);
}

// Receive chains (the port writes into them).

fn assert_rx_faults(rig: &mut Rig, tx: &mut crate::tx::VhostPortTx, fault: QueueFault) {
    let f = ether_frame(2, 1, 4000, 1);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&f, OffloadInfo::default())]),
        0
    );
    assert_eq!(rig.fault_to_guest(), Some(fault));
    assert_eq!(rig.stats_to_guest().faulted(fault), 1);
}

#[test]
fn read_only_buffer_in_a_receive_chain_faults_that_queue() {
    let (mut rig, mut rx, mut tx) = rig();
    let a = rig.rxq.alloc(2048);
    rig.rxq.add_chain(&[(a, 2048, false)]);
    assert_rx_faults(&mut rig, &mut tx, QueueFault::WrongDirection);
    // The guest's transmit queue still works.
    rig.txq.send(&[0; 12], &ether_frame(1, 2, 60, 0), &[]);
    assert_eq!(receive(&mut rx), 1);
}

#[test]
fn receive_buffer_outside_guest_memory_faults_that_queue() {
    let (mut rig, _rx, mut tx) = rig();
    rig.rxq.add_chain(&[(GUEST_MEM - 100, 2048, true)]);
    assert_rx_faults(&mut rig, &mut tx, QueueFault::AddressOutOfRange);
}

#[test]
fn receive_chain_loop_faults_that_queue() {
    let (mut rig, _rx, mut tx) = rig();
    let a = rig.rxq.alloc(64);
    // 24 bytes per turn, looping: 256 descriptors hold less than the frame.
    rig.rxq.set_desc(0, a, 16, NEXT | WRITE, 1);
    rig.rxq.set_desc(1, a + 16, 8, NEXT | WRITE, 0);
    rig.rxq.publish(0);
    assert_rx_faults(&mut rig, &mut tx, QueueFault::ChainTooLong);
}

#[test]
fn a_header_spread_over_the_first_receive_buffers_is_written_across_them() {
    let (mut rig, _rx, mut tx) = rig();
    let a = rig.rxq.alloc(2048);
    rig.rxq
        .mem
        .write_slice(&[0xaa; 64], GuestAddress(a))
        .unwrap();
    // 8 bytes, then 3, then the rest: virtio 1.x lets a driver lay the header out any way.
    rig.rxq
        .add_chain(&[(a, 8, true), (a + 8, 3, true), (a + 11, 2000, true)]);
    let f = ether_frame(2, 1, 60, 1);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&f, OffloadInfo::default())]),
        1
    );
    let used = rig.rxq.take_used();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].1, 12 + 60);
    let got = rig.rxq.read_rx(used[0].0, used[0].1);
    // No offload, one buffer: every byte of the header written, over all three pieces.
    assert_eq!(&got[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    assert_eq!(&got[12..], &f[..]);
    assert_eq!(rig.fault_to_guest(), None);
}

#[test]
fn a_receive_chain_shorter_than_the_header_breaks_that_queue() {
    // No frame could ever use it: dropping frames and keeping it would stall the queue.
    let (mut rig, mut rx, mut tx) = rig();
    let a = rig.rxq.alloc(2048);
    rig.rxq.add_chain(&[(a, 8, true), (a + 8, 2, true)]);
    assert_rx_faults(&mut rig, &mut tx, QueueFault::ChainShorterThanHeader);
    rig.txq.send(&[0; 12], &ether_frame(1, 2, 60, 0), &[]);
    assert_eq!(receive(&mut rx), 1);
}
