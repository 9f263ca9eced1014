//! The port over its real socket, with the `vhost` crate's frontend as the peer.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicUsize;

use super::*;
use crate::tests::testutil::{ether_frame, memfd, GuestRing, GUEST_MEM};
use crate::vring::{RX_QUEUE, TX_QUEUE};
use vhost::vhost_user::message::{VhostUserHeaderFlag, VhostUserProtocolFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use weft_packet::OffloadInfo;
use weft_switch::{PortRx, PortTx, RxBatch, TxFrame};

pub(crate) const VA: u64 = 0x7f00_0000_0000;

pub(crate) fn socket_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("weft-vhost-{}-{tag}-{n}.sock", std::process::id()))
}

/// A frontend process in miniature: its memory, its two rings, its socket.
pub(crate) struct Guest {
    pub(crate) fe: Frontend,
    pub(crate) file: std::fs::File,
    pub(crate) rxq: GuestRing,
    pub(crate) txq: GuestRing,
    pub(crate) call: [EventFd; 2],
    pub(crate) kick: [EventFd; 2],
}

impl Guest {
    pub(crate) fn connect(path: &Path) -> Guest {
        Guest::with(Frontend::connect(path, 2).unwrap())
    }

    /// A frontend that accepted `stream` (weft in client mode connected to it).
    pub(crate) fn from_stream(stream: UnixStream) -> Guest {
        Guest::with(Frontend::from_stream(stream, 2))
    }

    fn with(fe: Frontend) -> Guest {
        let file = memfd(GUEST_MEM);
        let mem = GuestMemoryMmap::<()>::from_ranges_with_files([(
            GuestAddress(0),
            usize::try_from(GUEST_MEM).unwrap(),
            Some(FileOffset::new(file.try_clone().unwrap(), 0)),
        )])
        .unwrap();
        let efd = || EventFd::new(EFD_NONBLOCK).unwrap();
        Guest {
            fe,
            file,
            rxq: GuestRing::new(mem.clone(), 256, 0x1000, 0x10_0000, 0x30_0000),
            txq: GuestRing::new(mem, 256, 0x8_0000, 0x40_0000, 0x30_0000),
            call: [efd(), efd()],
            kick: [efd(), efd()],
        }
    }

    /// Negotiates everything offered, with acknowledged requests.
    pub(crate) fn negotiate(&mut self) {
        self.fe.set_owner().unwrap();
        let features = self.fe.get_features().unwrap();
        self.fe.set_features(features).unwrap();
        let protocol = self.fe.get_protocol_features().unwrap();
        assert!(protocol.contains(VhostUserProtocolFeatures::REPLY_ACK));
        self.fe.set_protocol_features(protocol).unwrap();
        self.fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    }

    pub(crate) fn mem_table(&mut self) -> vhost::Result<()> {
        let region = VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: GUEST_MEM,
            userspace_addr: VA,
            mmap_offset: 0,
            mmap_handle: self.file.as_raw_fd(),
        };
        self.fe.set_mem_table(&[region]).map(|_| ())
    }

    pub(crate) fn ring(&mut self, index: usize) -> vhost::Result<()> {
        let ring = if index == RX_QUEUE {
            &self.rxq
        } else {
            &self.txq
        };
        let config = VringConfigData {
            queue_max_size: 256,
            queue_size: 256,
            flags: 0,
            desc_table_addr: VA + ring.desc.0,
            used_ring_addr: VA + ring.used.0,
            avail_ring_addr: VA + ring.avail.0,
            log_addr: None,
        };
        self.fe.set_vring_num(index, 256)?;
        self.fe.set_vring_base(index, 0)?;
        self.fe.set_vring_addr(index, &config)?;
        self.fe.set_vring_call(index, &self.call[index])?;
        self.fe.set_vring_kick(index, &self.kick[index])?;
        self.fe.set_vring_enable(index, true)
    }

    pub(crate) fn start(&mut self) {
        self.negotiate();
        self.mem_table().unwrap();
        self.ring(RX_QUEUE).unwrap();
        self.ring(TX_QUEUE).unwrap();
    }
}

pub(crate) fn receive(rx: &mut VhostPortRx) -> Vec<Vec<u8>> {
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

pub(crate) fn wait_for(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Frames pass both ways between the port's halves and `guest`.
pub(crate) fn assert_traffic(
    guest: &mut Guest,
    rx: &mut VhostPortRx,
    tx: &mut VhostPortTx,
    seed: u8,
) {
    let out = ether_frame(1, 2, 700, seed);
    guest.txq.send(&[0; 12], &out, &[]);
    assert_eq!(receive(rx), vec![out]);
    guest.rxq.post_rx(1, 2048);
    let back = ether_frame(2, 1, 300, seed);
    assert_eq!(
        tx.transmit(&[TxFrame::whole(&back, OffloadInfo::default())]),
        1
    );
    let (id, len) = guest.rxq.take_used()[0];
    assert_eq!(&guest.rxq.read_rx(id, len)[12..], &back[..]);
}

#[test]
fn a_frontend_sets_up_both_rings_over_the_socket_and_frames_flow() {
    let path = socket_path("flow");
    let mut port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let (mut rx, mut tx) = port.take_halves().unwrap();
    assert!(matches!(port.take_halves(), Err(VhostError::HalvesTaken)));
    assert!(!port.is_running());
    let generation = tx.caps_generation();
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    assert!(port.is_connected());
    assert_ne!(
        tx.caps_generation(),
        generation,
        "negotiation changed the caps"
    );
    assert!(port.caps().tso4 && port.caps().partial_csum);
    assert_eq!(port.features(), guest.fe.get_features().unwrap());
    assert_traffic(&mut guest, &mut rx, &mut tx, 1);
    let stats = port.stats();
    assert_eq!((stats.from_guest.frames, stats.to_guest.frames), (1, 1));
    // The frontend stops the transmit ring: it learns where to resume.
    assert_eq!(guest.fe.get_vring_base(TX_QUEUE).unwrap(), 1);
    assert!(!port.is_running());
}

#[test]
fn after_a_disconnect_the_port_serves_the_next_frontend() {
    let path = socket_path("reconnect");
    let mut port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let (mut rx, mut tx) = port.take_halves().unwrap();
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    assert_traffic(&mut guest, &mut rx, &mut tx, 1);
    drop(guest);
    wait_for("the disconnect", || !port.is_connected());
    assert!(!port.is_running());
    assert_eq!(port.caps(), PortCaps::plain(1500));
    // Nothing is served while no frontend is connected.
    assert!(receive(&mut rx).is_empty());
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    assert_traffic(&mut guest, &mut rx, &mut tx, 2);
}

#[test]
fn a_refused_request_drops_that_frontend_and_spares_other_ports() {
    let bad_path = socket_path("bad");
    let good_path = socket_path("good");
    let bad_port = VhostUserPort::listen(&bad_path, VhostPortConfig::default()).unwrap();
    let mut good_port = VhostUserPort::listen(&good_path, VhostPortConfig::default()).unwrap();
    let (mut rx, mut tx) = good_port.take_halves().unwrap();
    let mut good = Guest::connect(&good_path);
    good.start();
    assert!(good_port.wait_running(Duration::from_secs(5)));

    let mut bad = Guest::connect(&bad_path);
    bad.negotiate();
    bad.mem_table().unwrap();
    // A queue size that is not a power of two: refused, and the frontend dropped.
    assert!(bad.fe.set_vring_num(TX_QUEUE, 3).is_err());
    wait_for("the hostile frontend to be dropped", || {
        !bad_port.is_connected()
    });
    assert!(bad.fe.get_features().is_err(), "its connection is closed");
    assert_traffic(&mut good, &mut rx, &mut tx, 3);
    // The refusing port still takes a well-behaved frontend.
    let mut again = Guest::connect(&bad_path);
    again.start();
    assert!(bad_port.wait_running(Duration::from_secs(5)));
}

#[test]
fn dropping_the_port_disconnects_the_frontend_and_removes_the_socket() {
    let path = socket_path("drop");
    let port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    drop(port);
    assert!(!path.exists());
    assert!(guest.fe.get_features().is_err());
}

#[test]
fn a_port_replaced_on_its_path_leaves_the_new_socket_in_place() {
    // A reconfiguration opens the new port before dropping the old one on the same path:
    // the old one must not delete the socket the new one now listens on.
    let path = socket_path("replace");
    let old = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let new = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    drop(old);
    assert!(path.exists(), "the new port's socket survives the old port");
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(new.wait_running(Duration::from_secs(5)));
    drop(new);
    assert!(!path.exists());
}

#[test]
fn a_stale_socket_is_replaced_but_another_file_is_not() {
    let path = socket_path("stale");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    drop(port);
    std::fs::write(&path, b"not a socket").unwrap();
    assert!(matches!(
        VhostUserPort::listen(&path, VhostPortConfig::default()),
        Err(VhostError::SocketDir(
            crate::socket_dir::SocketDirError::NotASocket(_)
        ))
    ));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_bad_configuration_is_refused() {
    let path = socket_path("config");
    let config = VhostPortConfig {
        max_queue_size: 100,
        ..VhostPortConfig::default()
    };
    assert!(matches!(
        VhostUserPort::listen(&path, config),
        Err(VhostError::Config(_))
    ));
    assert!(!path.exists());
}
