//! Live migration through the request handler: the dirty log (`SET_LOG_BASE`, `LOG_ALL`,
//! `VHOST_VRING_F_LOG`) turned on and off and replaced while the rings run, refused when
//! bad, and `SEND_RARP` announcing the guest from the port.

use std::os::unix::fs::FileExt;

use vm_memory::Bytes;
use weft_packet::MacAddr;

use super::*;
use crate::memory::{marked_pages, max_log_bytes, LogRefusal, LOG_PAGE};
use virtio_queue::desc::split::Descriptor;

/// One bit per page of the test guest's memory.
const LOG_BYTES: u64 = GUEST_MEM / LOG_PAGE / 8;

/// The pages marked in the log file `log`.
fn marked(log: &File) -> Vec<u64> {
    let mut bytes = vec![0u8; usize::try_from(LOG_BYTES).unwrap()];
    log.read_exact_at(&mut bytes, 0).unwrap();
    marked_pages(&bytes)
}

fn clear(log: &File) {
    log.write_all_at(&vec![0u8; usize::try_from(LOG_BYTES).unwrap()], 0)
        .unwrap();
}

fn log_request(size: u64, offset: u64) -> VhostUserLog {
    VhostUserLog {
        mmap_size: size,
        mmap_offset: offset,
    }
}

impl Frontend {
    /// What QEMU does when a migration starts: the log, `LOG_ALL`, then each ring's
    /// addresses again with `VHOST_VRING_F_LOG` and its used ring's guest address.
    fn start_logging(&mut self, log: &File) {
        self.dev
            .set_log_base(&log_request(LOG_BYTES, 0), log.try_clone().unwrap())
            .unwrap();
        self.set_log_all(true).unwrap();
        for index in [RX_QUEUE, TX_QUEUE] {
            self.ring_addr(index, VhostUserVringAddrFlags::VHOST_VRING_F_LOG, 0)
                .unwrap();
        }
    }

    fn set_log_all(&mut self, on: bool) -> Result<()> {
        let log_all = VhostUserVirtioFeatures::LOG_ALL.bits();
        let features = self.shared.features().0 & !log_all;
        self.dev
            .set_features(if on { features | log_all } else { features })
    }

    /// Sets ring `index`'s addresses as `ring_setup` did, moved by `shift` bytes, with
    /// `flags` (and the used ring's guest address as its log address).
    fn ring_addr(
        &mut self,
        index: usize,
        flags: VhostUserVringAddrFlags,
        shift: u64,
    ) -> Result<()> {
        let ring = if index == RX_QUEUE {
            &self.rxq
        } else {
            &self.txq
        };
        let (desc, avail, used) = (ring.desc.0, ring.avail.0, ring.used.0);
        self.dev.set_vring_addr(
            u32::try_from(index).unwrap(),
            flags,
            VA + desc + shift,
            VA + used,
            VA + avail,
            used,
        )
    }

    /// The page of the receive buffer the port used for chain `id`.
    fn rx_buffer_page(&self, id: u32) -> u64 {
        let d: Descriptor = self
            .rxq
            .mem
            .read_obj(self.rxq.desc.unchecked_add(u64::from(id) * 16))
            .unwrap();
        d.addr().0 / LOG_PAGE
    }

    fn pages_logged(&self) -> u64 {
        self.shared
            .log_counters
            .pages
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn transmit_one(fe: &mut Frontend, tx: &mut VhostPortTx, seed: u8) -> u32 {
    let back = ether_frame(2, 1, 200, seed);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&back, OffloadInfo::default())]),
        1
    );
    fe.rxq.take_used()[0].0
}

#[test]
fn while_logging_every_page_the_port_writes_is_marked_and_after_none() {
    let mut fe = frontend();
    fe.start();
    let (mut rx, mut tx) = fe.halves();
    fe.rxq.post_rx(8, 2048);
    let log = memfd(4096);
    fe.start_logging(&log);
    assert_eq!(fe.shared.logging(), (true, LOG_BYTES));

    let id = transmit_one(&mut fe, &mut tx, 1);
    let pages = marked(&log);
    let used_page = fe.rxq.used.0 / LOG_PAGE;
    assert!(pages.contains(&fe.rx_buffer_page(id)), "{pages:?}");
    assert!(pages.contains(&used_page), "{pages:?}");
    // The guest's transmit buffers are only read; their used ring is written.
    clear(&log);
    let out = ether_frame(1, 2, 300, 1);
    fe.txq.send(&[0; 12], &out, &[]);
    assert_eq!(receive(&mut rx), vec![out]);
    assert_eq!(marked(&log), vec![fe.txq.used.0 / LOG_PAGE]);
    assert!(fe.pages_logged() >= 3);

    // QEMU ends logging with LOG_ALL cleared (and the rings' flags with it).
    fe.set_log_all(false).unwrap();
    assert!(!fe.shared.logging().0);
    clear(&log);
    transmit_one(&mut fe, &mut tx, 2);
    let out = ether_frame(1, 2, 300, 2);
    fe.txq.send(&[0; 12], &out, &[]);
    assert_eq!(receive(&mut rx), vec![out]);
    assert!(marked(&log).is_empty());
}

#[test]
fn a_new_log_replaces_the_old_one_on_every_ring_before_the_answer() {
    let mut fe = frontend();
    fe.start();
    let (_rx, mut tx) = fe.halves();
    fe.rxq.post_rx(8, 2048);
    let (old, new) = (memfd(4096), memfd(8192));
    fe.start_logging(&old);
    // QEMU grows the log with the guest's memory: a new one, at an offset.
    fe.dev
        .set_log_base(&log_request(LOG_BYTES, 4096), new.try_clone().unwrap())
        .unwrap();
    let id = transmit_one(&mut fe, &mut tx, 3);
    assert!(marked(&old).is_empty());
    let mut bytes = vec![0u8; usize::try_from(LOG_BYTES).unwrap()];
    new.read_exact_at(&mut bytes, 4096).unwrap();
    let page = fe.rx_buffer_page(id);
    assert_ne!(
        bytes[usize::try_from(page / 8).unwrap()] & (1 << (page % 8)),
        0
    );
}

#[test]
fn a_ring_started_while_logging_logs_from_its_first_write() {
    let mut fe = frontend();
    fe.negotiate();
    fe.mem_table().unwrap();
    let log = memfd(4096);
    fe.dev
        .set_log_base(&log_request(LOG_BYTES, 0), log.try_clone().unwrap())
        .unwrap();
    fe.set_log_all(true).unwrap();
    fe.ring_setup(RX_QUEUE).unwrap();
    fe.ring_setup(TX_QUEUE).unwrap();
    fe.ring_addr(RX_QUEUE, VhostUserVringAddrFlags::VHOST_VRING_F_LOG, 0)
        .unwrap();
    let (_rx, mut tx) = fe.halves();
    fe.rxq.post_rx(4, 2048);
    let id = transmit_one(&mut fe, &mut tx, 4);
    let pages = marked(&log);
    assert!(pages.contains(&fe.rx_buffer_page(id)), "{pages:?}");
    assert!(pages.contains(&(fe.rxq.used.0 / LOG_PAGE)), "{pages:?}");
}

#[test]
fn logging_may_start_and_stop_while_rings_run_but_nothing_else_may_change() {
    let mut fe = frontend();
    fe.start();
    assert!(fe.set_log_all(true).is_ok());
    assert!(fe.set_log_all(false).is_ok());
    let csum = 1u64 << virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_CSUM;
    let features = fe.shared.features().0;
    assert!(fe.dev.set_features(features & !csum).is_err());
    // The log flag on a running ring, its addresses unchanged: taken; moved: refused.
    let log = || VhostUserVringAddrFlags::VHOST_VRING_F_LOG;
    assert!(fe.ring_addr(TX_QUEUE, log(), 0).is_ok());
    assert!(fe
        .ring_addr(TX_QUEUE, VhostUserVringAddrFlags::empty(), 0)
        .is_ok());
    assert!(fe.ring_addr(TX_QUEUE, log(), 0x1000).is_err());
    assert!(fe.serving(TX_QUEUE));
}

#[test]
fn bad_logs_are_refused_and_counted_by_reason() {
    let mut fe = frontend();
    fe.start();
    let limit = max_log_bytes(VhostPortConfig::default().max_guest_memory);
    let cases: [(File, u64, u64, LogRefusal); 5] = [
        (memfd(4096), 0, 0, LogRefusal::BadSize),
        (memfd(4096), limit + 1, 0, LogRefusal::BadSize),
        (memfd(4096), 4096, 8, LogRefusal::FileTooShort),
        (memfd(4096), 8, u64::MAX - 4, LogRefusal::BadSize),
        (
            File::open("/dev/null").unwrap(),
            8,
            0,
            LogRefusal::NotSharedMemory,
        ),
    ];
    for (file, size, offset, reason) in cases {
        let before = fe.shared.log_refusals.snapshot()[reason.index()];
        assert!(fe
            .dev
            .set_log_base(&log_request(size, offset), file)
            .is_err());
        let after = fe.shared.log_refusals.snapshot()[reason.index()];
        assert_eq!(after, before + 1, "{reason:?}");
    }
    // A used ring log address that would wrap.
    let i = u32::try_from(TX_QUEUE).unwrap();
    let flags = VhostUserVringAddrFlags::VHOST_VRING_F_LOG;
    assert!(fe
        .dev
        .set_vring_addr(i, flags, 0, 0, 0, u64::MAX - 8)
        .is_err());
    let refused = fe.shared.log_refusals.snapshot();
    assert_eq!(refused[LogRefusal::BadRingLog.index()], 1);
    assert!(!fe.shared.logging().0);
}

#[test]
fn set_log_fd_takes_an_eventfd_and_nothing_else() {
    let mut fe = frontend();
    assert!(fe.dev.set_log_fd(Some(file_of(&fe.rx_call))).is_ok());
    assert!(fe.dev.set_log_fd(Some(memfd(16))).is_err());
    assert!(fe.dev.set_log_fd(None).is_err());
    assert_eq!(
        fe.shared.log_refusals.snapshot()[LogRefusal::BadLogFd.index()],
        2
    );
}

#[test]
fn send_rarp_announces_the_guest_from_the_port_first_in_the_next_batch() {
    let mut fe = frontend();
    fe.start();
    let (mut rx, _tx) = fe.halves();
    let mac = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    let _ = fe.tx_kick.read();
    fe.dev.send_rarp(mac).unwrap();
    // The worker is woken (the kick it sleeps on).
    assert_eq!(fe.tx_kick.read().unwrap(), 1);
    let out = ether_frame(1, 2, 300, 1);
    fe.txq.send(&[0; 12], &out, &[]);
    let got = receive(&mut rx);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], weft_packet::arp::rarp_announcement(MacAddr(mac)));
    assert_eq!(got[1], out);
    assert_eq!(receive(&mut rx), Vec::<Vec<u8>>::new(), "announced once");
    assert_eq!(fe.shared.announcements.load(Ordering::Relaxed), 1);
    // Faster than QEMU ever asks: counted, ignored, the frontend kept.
    fe.dev.send_rarp(mac).unwrap();
    assert!(receive(&mut rx).is_empty());
    let refused = fe.shared.log_refusals.snapshot();
    assert_eq!(refused[LogRefusal::AnnounceTooFast.index()], 1);
    // Not a station's MAC.
    assert!(fe.dev.send_rarp([0x01, 0, 0x5e, 0, 0, 1]).is_err());
    assert!(fe.dev.send_rarp([0; 6]).is_err());
    let refused = fe.shared.log_refusals.snapshot();
    assert_eq!(refused[LogRefusal::BadAnnounce.index()], 2);
}

#[test]
fn stopping_a_ring_completes_its_chains_in_flight_first_and_logs_them() {
    let mut fe = frontend();
    fe.start();
    let log = memfd(4096);
    fe.start_logging(&log);
    let (mut rx, _tx) = fe.halves();
    let out = ether_frame(1, 2, 300, 1);
    fe.txq.send(&[0; 12], &out, &[]);
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1, "lent to the switch, in flight");
    clear(&log);
    // The worker finishes its batch while the frontend stops the ring (QEMU's source at
    // the switch-over).
    let worker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        rx.finish();
        rx
    });
    let base = fe
        .dev
        .get_vring_base(u32::try_from(TX_QUEUE).unwrap())
        .unwrap();
    let _rx = worker.join().unwrap();
    assert_eq!({ base.num }, 1, "resumes after the chain, not before it");
    assert_eq!(
        fe.txq.take_used().len(),
        1,
        "completed once, before the stop"
    );
    assert_eq!(marked(&log), vec![fe.txq.used.0 / LOG_PAGE]);
    let discarded = fe.shared.vrings[TX_QUEUE]
        .counters
        .snapshot()
        .discarded_in_flight;
    assert_eq!(discarded, 0);
}
