//! A frontend that shrinks the file behind its memory while the port has it mapped: the
//! SIGBUS that follows breaks that port's rings, not the process.

use super::tests::{assert_traffic, socket_path, wait_for, Guest};
use super::*;
use crate::counters::QueueFault;
use crate::tests::testutil::ether_frame;
use crate::vring::{RX_QUEUE, TX_QUEUE};
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

#[test]
fn a_frontend_shrinking_its_memory_breaks_only_its_own_rings() {
    let path = socket_path("shrink");
    let beside_path = socket_path("shrink-beside");
    let mut port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let (mut rx, mut tx) = port.take_halves().unwrap();
    let mut beside = VhostUserPort::listen(&beside_path, VhostPortConfig::default()).unwrap();
    let (mut beside_rx, mut beside_tx) = beside.take_halves().unwrap();
    let mut good = Guest::connect(&beside_path);
    good.start();
    assert!(beside.wait_running(Duration::from_secs(5)));
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    let first = ether_frame(1, 2, 100, 1);
    guest.txq.send(&[0; 12], &first, &[]);
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1);
    assert_eq!(rx.frame(batch.descs()[0].handle).to_vec(), first[..]);
    rx.finish();

    // A frame and receive buffers made available, then the memory cut away under them.
    // The receive ring's index reads zero now, where the port expects it (it took no
    // buffer yet): only the memory check can tell that ring is broken.
    guest.txq.send(&[0; 12], &ether_frame(1, 2, 100, 9), &[]);
    guest.rxq.post_rx(4, 2048);
    guest.file.set_len(0).unwrap();
    // The guest's own mapping is gone too: nothing below touches it.

    batch.clear();
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 0, "the frame's memory is gone");
    rx.finish();
    let back = ether_frame(2, 1, 300, 9);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&back, OffloadInfo::default())]),
        0
    );
    let status = port.queue_status();
    assert_eq!(status[TX_QUEUE].fault, Some(QueueFault::MemoryTruncated));
    assert_eq!(status[RX_QUEUE].fault, Some(QueueFault::MemoryTruncated));
    let stats = port.stats();
    let truncated = QueueFault::MemoryTruncated.index();
    assert_eq!(stats.from_guest.faults[truncated], 1);
    assert_eq!(stats.to_guest.faults[truncated], 1);
    // A broken ring is not read again: no second fault.
    rx.receive(&mut batch);
    rx.finish();
    assert_eq!(port.stats().from_guest.faults[truncated], 1);

    // The port beside carries traffic throughout.
    assert_traffic(&mut good, &mut beside_rx, &mut beside_tx, 2);
    assert!(beside.queue_status().iter().all(|q| q.fault.is_none()));

    // The frontend goes; the next one is served on fresh memory.
    drop(guest);
    wait_for("the disconnect", || !port.is_connected());
    let mut next = Guest::connect(&path);
    next.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    assert_traffic(&mut next, &mut rx, &mut tx, 3);
}
