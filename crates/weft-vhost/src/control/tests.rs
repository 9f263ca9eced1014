//! The request handler driven directly, as a frontend would drive it through the socket:
//! real memfds for guest memory, real eventfds for kicks and calls.

use std::os::fd::{FromRawFd, IntoRawFd};

use super::*;
use crate::config::VhostPortConfig;
use crate::device::LaneShare;
use crate::rx::VhostPortRx;
use crate::tests::testutil::{ether_frame, memfd, GuestRing, GUEST_MEM};
use crate::tx::VhostPortTx;
use crate::vring::{RX_QUEUE, TX_QUEUE};
use vhost::vhost_user::message::VhostUserVirtioFeatures;
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EFD_NONBLOCK;
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

/// Where the pretend frontend has guest memory mapped.
const VA: u64 = 0x7f00_0000_0000;

struct Frontend {
    dev: Device,
    shared: Arc<DeviceShared>,
    file: File,
    rxq: GuestRing,
    txq: GuestRing,
    rx_call: EventFd,
    tx_kick: EventFd,
}

fn file_of(fd: &EventFd) -> File {
    // SAFETY: the clone's descriptor is handed to the File, its only owner.
    unsafe { File::from_raw_fd(fd.try_clone().unwrap().into_raw_fd()) }
}

fn frontend_with(config: VhostPortConfig) -> Frontend {
    let shared = DeviceShared::new(config).unwrap();
    let file = memfd(GUEST_MEM);
    let mem = GuestMemoryMmap::<()>::from_ranges_with_files([(
        GuestAddress(0),
        usize::try_from(GUEST_MEM).unwrap(),
        Some(FileOffset::new(file.try_clone().unwrap(), 0)),
    )])
    .unwrap();
    Frontend {
        dev: Device::new(Arc::clone(&shared)),
        shared,
        file,
        rxq: GuestRing::new(mem.clone(), 256, 0x1000, 0x10_0000, 0x30_0000),
        txq: GuestRing::new(mem, 256, 0x8_0000, 0x40_0000, 0x30_0000),
        rx_call: EventFd::new(EFD_NONBLOCK).unwrap(),
        tx_kick: EventFd::new(EFD_NONBLOCK).unwrap(),
    }
}

fn frontend() -> Frontend {
    frontend_with(VhostPortConfig::default())
}

impl Frontend {
    /// Everything offered but logging (which QEMU asks for only while it migrates).
    fn negotiate(&mut self) {
        let log_all = VhostUserVirtioFeatures::LOG_ALL.bits();
        let features = self.dev.get_features().unwrap() & !log_all;
        self.dev.set_features(features).unwrap();
        self.dev.set_protocol_features(0).unwrap();
    }

    fn mem_table(&mut self) -> Result<Option<Vec<u64>>> {
        let region = VhostUserMemoryRegion::new(0, GUEST_MEM, VA, 0);
        self.dev
            .set_mem_table(&[region], vec![self.file.try_clone().unwrap()], None)
    }

    fn ring_setup(&mut self, index: usize) -> Result<()> {
        self.ring_setup_at(index, 0)
    }

    fn ring_setup_at(&mut self, index: usize, base: u32) -> Result<()> {
        let ring = if index == RX_QUEUE {
            &self.rxq
        } else {
            &self.txq
        };
        let (desc, avail, used) = (ring.desc.0, ring.avail.0, ring.used.0);
        let i = u32::try_from(index).unwrap();
        self.dev.set_vring_num(i, 256)?;
        self.dev.set_vring_base(i, base)?;
        self.dev.set_vring_addr(
            i,
            VhostUserVringAddrFlags::empty(),
            VA + desc,
            VA + used,
            VA + avail,
            0,
        )?;
        let idx = u8::try_from(index).unwrap();
        let call = if index == RX_QUEUE {
            file_of(&self.rx_call)
        } else {
            file_of(&EventFd::new(EFD_NONBLOCK).unwrap())
        };
        self.dev.set_vring_call(idx, Some(call))?;
        let kick = if index == RX_QUEUE {
            file_of(&EventFd::new(EFD_NONBLOCK).unwrap())
        } else {
            file_of(&self.tx_kick)
        };
        self.dev.set_vring_kick(idx, Some(kick))?;
        self.dev.set_vring_enable(i, true)
    }

    fn start(&mut self) {
        self.negotiate();
        self.mem_table().unwrap();
        self.ring_setup(RX_QUEUE).unwrap();
        self.ring_setup(TX_QUEUE).unwrap();
    }

    fn halves(&self) -> (VhostPortRx, VhostPortTx) {
        (
            VhostPortRx::new(Arc::clone(&self.shared), LaneShare::WHOLE).unwrap(),
            VhostPortTx::new(Arc::clone(&self.shared), LaneShare::WHOLE),
        )
    }

    fn serving(&self, index: usize) -> bool {
        self.shared.vrings[index].lock().serving()
    }
}

fn receive(rx: &mut VhostPortRx) -> Vec<Vec<u8>> {
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    let out = batch
        .descs()
        .iter()
        .map(|d| rx.frame(d.handle).to_vec())
        .collect();
    rx.finish();
    out
}

#[test]
fn a_full_setup_runs_both_rings_and_carries_frames_both_ways() {
    let mut fe = frontend();
    fe.start();
    assert!(fe.serving(RX_QUEUE) && fe.serving(TX_QUEUE));
    let (mut rx, mut tx) = fe.halves();
    assert!(tx.caps().tso4, "offloads negotiated");
    let out = ether_frame(1, 2, 300, 1);
    fe.txq.send(&[0; 12], &out, &[]);
    assert_eq!(receive(&mut rx), vec![out]);
    fe.rxq.post_rx(4, 2048);
    let back = ether_frame(2, 1, 200, 2);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&back, OffloadInfo::default())]),
        1
    );
    let (id, len) = fe.rxq.take_used()[0];
    assert_eq!(&fe.rxq.read_rx(id, len)[12..], &back[..]);
    assert_eq!(fe.rx_call.read().unwrap(), 1);
}

#[test]
fn features_outside_the_offer_are_refused() {
    let mut fe = frontend_with(VhostPortConfig {
        offloads: false,
        ..VhostPortConfig::default()
    });
    let offered = fe.dev.get_features().unwrap();
    assert!(
        fe.dev.set_features(offered | 1 << 0).is_err(),
        "CSUM not offered"
    );
    assert!(fe.dev.set_features(1 << 63).is_err());
    assert!(fe.dev.set_features(offered).is_ok());
    assert_eq!(fe.shared.features().0, offered);
}

#[test]
fn protocol_features_outside_the_offer_are_refused() {
    let mut fe = frontend();
    let reply_ack = VhostUserProtocolFeatures::REPLY_ACK.bits();
    assert!(fe.dev.set_protocol_features(reply_ack).is_ok());
    assert!(fe
        .dev
        .set_protocol_features(VhostUserProtocolFeatures::MQ.bits())
        .is_err());
    assert!(fe
        .dev
        .set_protocol_features(VhostUserProtocolFeatures::CONFIG.bits())
        .is_err());
}

/// `NET_SET_MTU` (QEMU `host_mtu`): taken once the `MTU` protocol feature is negotiated and
/// within what the port carries; anything else refused and counted.
#[test]
fn the_guests_mtu_is_taken_once_negotiated_and_within_the_ports_mtu() {
    let mut fe = frontend_with(VhostPortConfig {
        mtu: 9000,
        ..VhostPortConfig::default()
    });
    assert!(fe
        .dev
        .get_protocol_features()
        .unwrap()
        .contains(VhostUserProtocolFeatures::MTU));
    assert!(fe.dev.set_guest_mtu(1500).is_err(), "not negotiated");
    fe.dev
        .set_protocol_features(VhostUserProtocolFeatures::MTU.bits())
        .unwrap();
    assert!(fe.dev.set_guest_mtu(67).is_err());
    assert!(fe.dev.set_guest_mtu(9001).is_err());
    assert!(fe.dev.set_guest_mtu(u64::MAX).is_err());
    assert_eq!(fe.shared.guest_mtu.load(Ordering::Relaxed), 0);
    fe.dev.set_guest_mtu(1450).unwrap();
    assert_eq!(fe.shared.guest_mtu.load(Ordering::Relaxed), 1450);
    assert_eq!(fe.shared.mtu_refusals.load(Ordering::Relaxed), 4);
}

#[test]
fn queue_sizes_must_be_powers_of_two_within_the_limit() {
    let mut fe = frontend();
    for bad in [0u32, 3, 100, 2048, 32_768, 65_536, u32::MAX] {
        assert!(fe.dev.set_vring_num(0, bad).is_err(), "{bad}");
    }
    for good in [1u32, 2, 256, 1024] {
        assert!(fe.dev.set_vring_num(0, good).is_ok(), "{good}");
    }
}

#[test]
fn queue_indexes_outside_one_pair_are_refused() {
    let mut fe = frontend();
    for index in [2u32, 3, 255, u32::MAX] {
        assert!(fe.dev.set_vring_num(index, 256).is_err());
        assert!(fe.dev.set_vring_base(index, 0).is_err());
        assert!(fe.dev.get_vring_base(index).is_err());
        assert!(fe.dev.set_vring_enable(index, true).is_err());
        assert!(fe
            .dev
            .set_vring_addr(index, VhostUserVringAddrFlags::empty(), 0, 0, 0, 0)
            .is_err());
    }
    for index in [2u8, 200, 255] {
        assert!(fe.dev.set_vring_kick(index, None).is_err());
        assert!(fe.dev.set_vring_call(index, None).is_err());
        assert!(fe.dev.set_vring_err(index, None).is_err());
    }
}

#[test]
fn ring_base_above_sixteen_bits_is_refused() {
    let mut fe = frontend();
    assert!(fe.dev.set_vring_base(0, 65_536).is_err());
    assert!(fe.dev.set_vring_base(0, 65_535).is_ok());
    assert_eq!({ fe.dev.get_vring_base(0).unwrap().num }, 65_535);
}

#[test]
fn a_ring_cannot_start_before_the_memory_table() {
    let mut fe = frontend();
    fe.negotiate();
    assert!(fe.ring_setup(TX_QUEUE).is_err());
    assert!(!fe.serving(TX_QUEUE));
}

#[test]
fn a_ring_outside_the_memory_table_is_refused() {
    let mut fe = frontend();
    fe.negotiate();
    fe.mem_table().unwrap();
    fe.dev.set_vring_num(1, 256).unwrap();
    // The used ring ends past the region.
    fe.dev
        .set_vring_addr(
            1,
            VhostUserVringAddrFlags::empty(),
            VA,
            VA + GUEST_MEM - 8,
            VA + 0x2000,
            0,
        )
        .unwrap();
    assert!(fe.dev.set_vring_kick(1, None).is_err());
    // Not in the table at all.
    fe.dev
        .set_vring_addr(
            1,
            VhostUserVringAddrFlags::empty(),
            0x1000,
            0x2000,
            0x3000,
            0,
        )
        .unwrap();
    assert!(fe.dev.set_vring_kick(1, None).is_err());
    assert!(!fe.serving(TX_QUEUE));
}

#[test]
fn a_misaligned_ring_is_refused() {
    let mut fe = frontend();
    fe.negotiate();
    fe.mem_table().unwrap();
    fe.dev.set_vring_num(1, 256).unwrap();
    fe.dev
        .set_vring_addr(
            1,
            VhostUserVringAddrFlags::empty(),
            VA + 0x1008,
            VA + 0x4000,
            VA + 0x3000,
            0,
        )
        .unwrap();
    assert!(fe.dev.set_vring_kick(1, None).is_err());
}

#[test]
fn kick_and_call_descriptors_must_be_eventfds() {
    let mut fe = frontend();
    fe.negotiate();
    fe.mem_table().unwrap();
    let not_eventfd = || memfd(16);
    assert!(fe.dev.set_vring_call(0, Some(not_eventfd())).is_err());
    assert!(fe.dev.set_vring_err(0, Some(not_eventfd())).is_err());
    fe.dev.set_vring_num(1, 256).unwrap();
    let (d, a, u) = (fe.txq.desc.0, fe.txq.avail.0, fe.txq.used.0);
    fe.dev
        .set_vring_addr(
            1,
            VhostUserVringAddrFlags::empty(),
            VA + d,
            VA + u,
            VA + a,
            0,
        )
        .unwrap();
    assert!(fe.dev.set_vring_kick(1, Some(not_eventfd())).is_err());
    assert!(!fe.serving(TX_QUEUE));
}

#[test]
fn ring_parameters_cannot_change_while_it_runs() {
    let mut fe = frontend();
    fe.start();
    assert!(fe.dev.set_vring_num(1, 128).is_err());
    assert!(fe.dev.set_vring_base(1, 5).is_err());
    assert!(fe
        .dev
        .set_vring_addr(1, VhostUserVringAddrFlags::empty(), VA, VA, VA, 0)
        .is_err());
    let features = fe.dev.get_features().unwrap();
    assert!(fe.dev.set_features(features & !(1 << 15)).is_err());
    assert!(fe.serving(TX_QUEUE));
}

#[test]
fn get_vring_base_stops_the_ring_and_tells_where_to_resume() {
    let mut fe = frontend();
    fe.start();
    let (mut rx, _tx) = fe.halves();
    for i in 0..3 {
        fe.txq.send(&[0; 12], &ether_frame(1, 2, 60, i), &[]);
    }
    assert_eq!(receive(&mut rx).len(), 3);
    let state = fe.dev.get_vring_base(1).unwrap();
    assert_eq!({ state.num }, 3);
    assert!(!fe.serving(TX_QUEUE));
    fe.txq.send(&[0; 12], &ether_frame(1, 2, 60, 9), &[]);
    assert!(receive(&mut rx).is_empty(), "a stopped ring is not read");
    // Restart where it stopped: the frame queued meanwhile comes out.
    fe.dev.set_vring_base(1, 3).unwrap();
    fe.dev
        .set_vring_kick(1, Some(file_of(&fe.tx_kick)))
        .unwrap();
    assert!(fe.serving(TX_QUEUE));
    assert_eq!(receive(&mut rx), vec![ether_frame(1, 2, 60, 9)]);
}

#[test]
fn rings_start_enabled_unless_the_frontend_disabled_them() {
    let mut fe = frontend();
    fe.negotiate();
    fe.mem_table().unwrap();
    let (d, a, u) = (fe.txq.desc.0, fe.txq.avail.0, fe.txq.used.0);
    let setup = |fe: &mut Frontend| {
        fe.dev.set_vring_num(1, 256).unwrap();
        fe.dev
            .set_vring_addr(
                1,
                VhostUserVringAddrFlags::empty(),
                VA + d,
                VA + u,
                VA + a,
                0,
            )
            .unwrap();
        fe.dev.set_vring_kick(1, None).unwrap();
    };
    setup(&mut fe);
    assert!(
        fe.serving(TX_QUEUE),
        "QEMU 7.2 never gets its enable through"
    );
    fe.dev.set_vring_enable(1, false).unwrap();
    assert!(!fe.serving(TX_QUEUE));
    fe.dev.set_vring_enable(1, true).unwrap();
    assert!(fe.serving(TX_QUEUE));
    // Disabled before the start: it starts disabled.
    fe.dev.get_vring_base(1).unwrap();
    fe.dev.set_vring_enable(1, false).unwrap();
    setup(&mut fe);
    assert!(!fe.serving(TX_QUEUE));
}

#[test]
fn without_protocol_features_rings_run_once_kicked() {
    let mut fe = frontend();
    let features =
        fe.dev.get_features().unwrap() & !VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
    fe.dev.set_features(features).unwrap();
    fe.mem_table().unwrap();
    fe.dev.set_vring_num(1, 256).unwrap();
    let (d, a, u) = (fe.txq.desc.0, fe.txq.avail.0, fe.txq.used.0);
    fe.dev
        .set_vring_addr(
            1,
            VhostUserVringAddrFlags::empty(),
            VA + d,
            VA + u,
            VA + a,
            0,
        )
        .unwrap();
    fe.dev.set_vring_kick(1, None).unwrap();
    assert!(fe.serving(TX_QUEUE));
}

#[test]
fn a_new_memory_table_moves_running_rings_to_it() {
    let mut fe = frontend();
    fe.start();
    let (mut rx, _tx) = fe.halves();
    fe.mem_table().unwrap();
    fe.txq.send(&[0; 12], &ether_frame(1, 2, 60, 1), &[]);
    assert_eq!(receive(&mut rx).len(), 1);
    // A table that no longer covers the rings breaks them.
    let small = VhostUserMemoryRegion::new(0x100_0000, 0x1000, VA + GUEST_MEM, 0);
    fe.dev
        .set_mem_table(&[small], vec![memfd(0x1000)], None)
        .unwrap();
    assert!(!fe.serving(TX_QUEUE));
}

#[test]
fn reset_stops_every_ring_and_caps_fall_back_to_plain() {
    let mut fe = frontend();
    fe.start();
    assert!(fe.shared.caps().tso4);
    fe.dev.reset();
    assert!(!fe.serving(RX_QUEUE) && !fe.serving(TX_QUEUE));
    assert_eq!(fe.shared.caps(), weft_switch::PortCaps::plain(1500));
    // And it can start again from scratch.
    fe.start();
    assert!(fe.serving(RX_QUEUE) && fe.serving(TX_QUEUE));
}

#[test]
fn unsupported_requests_are_refused() {
    let mut fe = frontend();
    assert!(fe
        .dev
        .get_config(0, 4, VhostUserConfigFlags::empty())
        .is_err());
    assert!(fe
        .dev
        .set_config(0, &[0; 4], VhostUserConfigFlags::empty())
        .is_err());
    assert!(fe.dev.get_max_mem_slots().is_err());
    assert!(fe.dev.check_device_state().is_err());
    assert_eq!(fe.dev.get_queue_num().unwrap(), 1);
}

/// Descriptors of this process that are `memfd:<name>` or eventfds holding `count`.
fn open_fds_like(name: &str, count: u64) -> usize {
    let needle = format!("memfd:{name}");
    let count_line = format!("eventfd-count: {count:>16x}");
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(std::result::Result::ok)
        .filter(|e| {
            let link = std::fs::read_link(e.path()).unwrap_or_default();
            if link.to_string_lossy().contains(&needle) {
                return true;
            }
            let info = format!("/proc/self/fdinfo/{}", e.file_name().to_string_lossy());
            std::fs::read_to_string(info)
                .map(|s| s.lines().any(|l| l.replace('\t', " ") == count_line))
                .unwrap_or(false)
        })
        .count()
}

fn named_memfd(name: &str, len: u64) -> File {
    let cname = std::ffi::CString::new(name).unwrap();
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor owned by nobody else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

#[test]
fn file_descriptors_are_closed_whether_requests_succeed_or_fail() {
    const MAGIC: u64 = 0x5eed_f00d_0042;
    let tagged = || {
        let e = EventFd::new(EFD_NONBLOCK).unwrap();
        e.write(MAGIC).unwrap();
        // SAFETY: the EventFd gives its descriptor to the File.
        unsafe { File::from_raw_fd(e.into_raw_fd()) }
    };
    {
        let mut fe = frontend();
        fe.negotiate();
        // Refused memory tables: short file, overlap, fd count.
        let r = VhostUserMemoryRegion::new(0, 0x10_0000, VA, 0);
        assert!(fe
            .dev
            .set_mem_table(&[r], vec![named_memfd("weft-leak", 0x1000)], None)
            .is_err());
        assert!(fe
            .dev
            .set_mem_table(
                &[r, r],
                vec![
                    named_memfd("weft-leak", 0x10_0000),
                    named_memfd("weft-leak", 0x10_0000)
                ],
                None
            )
            .is_err());
        // Accepted, then replaced.
        assert!(fe
            .dev
            .set_mem_table(&[r], vec![named_memfd("weft-leak", 0x10_0000)], None)
            .is_ok());
        assert!(fe
            .dev
            .set_mem_table(&[r], vec![named_memfd("weft-leak", 0x10_0000)], None)
            .is_ok());
        // Eventfds: accepted, replaced, refused (bad index), error descriptors.
        fe.dev.set_vring_call(0, Some(tagged())).unwrap();
        fe.dev.set_vring_call(0, Some(tagged())).unwrap();
        assert!(fe.dev.set_vring_call(9, Some(tagged())).is_err());
        fe.dev.set_vring_err(0, Some(tagged())).unwrap();
        assert!(
            fe.dev.set_vring_kick(0, Some(tagged())).is_err(),
            "no ring size yet"
        );
        assert!(
            open_fds_like("weft-leak", MAGIC) > 0,
            "the live ones are held"
        );
        fe.dev.reset();
    }
    assert_eq!(open_fds_like("weft-leak", MAGIC), 0);
}

/// The guest queued three frames; the backend finished the first and died (kill -9) with
/// the other two in flight. A new backend process then gets the whole setup again, with
/// `tx_base` as the transmit ring's base. Returns what the new backend receives.
fn frames_after_a_backend_restart(tx_base: u32) -> Vec<Vec<u8>> {
    let mut fe = frontend();
    fe.start();
    let (mut rx, _tx) = fe.halves();
    fe.txq.send(&[0; 12], &ether_frame(1, 2, 60, 1), &[]);
    assert_eq!(receive(&mut rx).len(), 1);
    fe.txq.send(&[0; 12], &ether_frame(1, 2, 60, 2), &[]);
    fe.txq.send(&[0; 12], &ether_frame(1, 2, 60, 3), &[]);
    let mut batch = RxBatch::new(64);
    rx.receive(&mut batch);
    assert_eq!(batch.descs().len(), 2);
    // The backend dies: nothing of it runs again, nothing is returned to the used ring.
    std::mem::forget(rx);
    let shared = DeviceShared::new(VhostPortConfig::default()).unwrap();
    fe.dev = Device::new(Arc::clone(&shared));
    fe.shared = shared;
    fe.negotiate();
    fe.mem_table().unwrap();
    fe.ring_setup_at(RX_QUEUE, 0).unwrap();
    fe.ring_setup_at(TX_QUEUE, tx_base).unwrap();
    let (mut rx, _tx) = fe.halves();
    receive(&mut rx)
}

#[test]
fn after_a_backend_restart_chains_in_flight_are_processed_again() {
    // QEMU could not ask the dead backend where it stopped: it sends the used index (1).
    let again = vec![ether_frame(1, 2, 60, 2), ether_frame(1, 2, 60, 3)];
    assert_eq!(frames_after_a_backend_restart(1), again);
    // A frontend that sends its own last available index (3) instead would lose the two
    // chains for good: the ring resumes from the used index all the same.
    assert_eq!(frames_after_a_backend_restart(3), again);
}

fn two_pairs() -> Frontend {
    frontend_with(VhostPortConfig {
        queue_pairs: 2,
        ..VhostPortConfig::default()
    })
}

#[test]
fn several_pairs_offer_multiqueue_and_answer_the_pair_count() {
    use virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_MQ;
    let mut fe = two_pairs();
    assert!(Features(fe.dev.get_features().unwrap()).has(VIRTIO_NET_F_MQ));
    let protocol = fe.dev.get_protocol_features().unwrap();
    assert!(protocol.contains(VhostUserProtocolFeatures::MQ));
    assert!(fe
        .dev
        .set_protocol_features(
            (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK).bits()
        )
        .is_ok());
    assert_eq!(fe.dev.get_queue_num().unwrap(), 2);
    assert_eq!(frontend().dev.get_queue_num().unwrap(), 1);
}

#[test]
fn queue_indexes_outside_the_ports_pairs_are_refused() {
    let mut fe = frontend_with(VhostPortConfig {
        queue_pairs: 3,
        ..VhostPortConfig::default()
    });
    for index in [6u32, 7, 32, u32::MAX] {
        assert!(fe.dev.set_vring_num(index, 256).is_err());
        assert!(fe.dev.set_vring_base(index, 0).is_err());
        assert!(fe.dev.get_vring_base(index).is_err());
        assert!(fe.dev.set_vring_enable(index, true).is_err());
    }
    for index in [6u8, 255] {
        assert!(fe.dev.set_vring_kick(index, None).is_err());
        assert!(fe.dev.set_vring_call(index, None).is_err());
    }
    for index in [2u32, 5] {
        assert!(fe.dev.set_vring_num(index, 256).is_ok());
        assert!(fe.dev.set_vring_enable(index, false).is_ok());
    }
}

/// Sets up ring `index` over `ring` through the handler.
fn setup_other_ring(fe: &mut Frontend, index: u8, ring: &GuestRing, kick: &EventFd) {
    let i = u32::from(index);
    fe.dev.set_vring_num(i, 256).unwrap();
    fe.dev.set_vring_base(i, 0).unwrap();
    fe.dev
        .set_vring_addr(
            i,
            VhostUserVringAddrFlags::empty(),
            VA + ring.desc.0,
            VA + ring.used.0,
            VA + ring.avail.0,
            0,
        )
        .unwrap();
    let call = file_of(&EventFd::new(EFD_NONBLOCK).unwrap());
    fe.dev.set_vring_call(index, Some(call)).unwrap();
    fe.dev.set_vring_kick(index, Some(file_of(kick))).unwrap();
}

#[test]
fn the_second_pair_carries_frames_and_stops_being_used_when_disabled() {
    let mut fe = two_pairs();
    fe.start();
    let mem = fe.rxq.mem.clone();
    let rxq1 = GuestRing::new(mem.clone(), 256, 0x70_0000, 0x71_0000, 0x7_0000);
    let mut txq1 = GuestRing::new(mem, 256, 0x70_8000, 0x78_0000, 0x7_0000);
    let kick1 = EventFd::new(EFD_NONBLOCK).unwrap();
    setup_other_ring(&mut fe, 2, &rxq1, &EventFd::new(EFD_NONBLOCK).unwrap());
    setup_other_ring(&mut fe, 3, &txq1, &kick1);
    assert!(fe.serving(2) && fe.serving(3));
    let (mut rx, mut tx) = fe.halves();
    let out = ether_frame(1, 2, 300, 1);
    txq1.send(&[0; 12], &out, &[]);
    assert_eq!(receive(&mut rx), vec![out]);
    // Pair 1 disabled: everything goes to pair 0's receive queue.
    fe.dev.set_vring_enable(2, false).unwrap();
    fe.rxq.post_rx(64, 2048);
    let frames: Vec<Vec<u8>> = (0..32u8).map(|i| ether_frame(i, 1, 100, i)).collect();
    let tx_frames: Vec<TxFrame<'_>> = frames
        .iter()
        .map(|f| TxFrame::whole(f, OffloadInfo::default()))
        .collect();
    assert_eq!(tx.transmit(&tx_frames), 32);
    assert_eq!(fe.rxq.take_used().len(), 32);
    assert_eq!(fe.shared.vrings[2].counters.snapshot().frames, 0);
}

mod logging;
