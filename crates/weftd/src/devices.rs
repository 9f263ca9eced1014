//! Port devices: what stands behind a port of a switch, opened by kind.
//!
//! [`open`] is a factory keyed by the port's kind; each kind has its module here, which turns
//! the port's settings into its driver's configuration and opens it: `tap` and `af_packet`
//! (weft-tap), `vhost_user` (weft-vhost), `vxlan` and `tcp_link` (weft-overlay). Every driver
//! gives back a [`PortDevice`]: the control plane reads MTU, status and counters through it
//! without knowing the kind, and adding a kind is one module and one arm of [`open`].
//! A port restored from the state file whose device cannot be opened is kept, marked failed,
//! behind a [`FailedPort`]: it keeps its place (its id, the rules and static FDB entries that
//! name it) and drops what the switch sends it.

mod af_packet;
mod af_xdp;
pub mod carry;
mod failed;
mod memif;
mod tap;
mod tcp_link;
mod vhost;
mod vxlan;

pub use carry::{Carried, CarryError, Keep, Leaving};
pub use failed::{kind_name, FailedPort};
pub use tap::TapMarks;

use std::os::fd::OwnedFd;
use std::sync::Arc;

use weft_control::state::PortKind;
use weft_overlay::RemoteFdbHandle;
use weft_switch::lanes::SharedTx;
use weft_switch::{PortDevice, PortHalves};

use crate::control::client_files::ClientFiles;
use crate::socket_dirs::{SocketDirs, SocketDirsError, SocketName};

/// An opened device: the halves the switch takes, and what the control plane keeps.
pub struct Device {
    /// The halves for each lane of the switch, first lane first (one with one lane). A
    /// vhost-user port gives each lane its share of the queue pairs; any other port's
    /// receive half goes to one lane ([`home_lane`]), and every lane transmits through one
    /// shared half ([`weft_switch::lanes::SharedTx`]).
    pub lanes: Vec<PortHalves>,
    /// What the control plane keeps of it.
    pub handle: DeviceHandle,
}

/// What the control plane keeps of a port's device for as long as the port exists
/// (dropping the last one closes the device: a vhost-user port's socket goes away).
#[derive(Clone)]
pub struct DeviceHandle {
    /// Its MTU, status and counters, whatever its kind.
    pub device: Arc<dyn PortDevice>,
    /// A VXLAN port's remote FDB, which `weft remote-mac` changes in place.
    pub remote_fdb: Option<RemoteFdbHandle>,
    /// What the device leaves to a weftd that takes over.
    pub keep: Keep,
    /// How this weftd got the device, when it did not open it itself.
    pub origin: Option<Origin>,
}

/// How a weftd got a device it did not open itself.
#[derive(Debug, Clone)]
pub struct Origin {
    /// What happened (`taken over from weftd 0.2.0 (pid 812)`).
    pub what: String,
    /// When.
    pub at: std::time::SystemTime,
}

impl Origin {
    /// `what` happening now.
    pub fn now(what: String) -> Origin {
        Origin {
            what,
            at: std::time::SystemTime::now(),
        }
    }

    /// As `port show` says it: what, and how long ago.
    pub fn describe(&self) -> String {
        let ago = self.at.elapsed().map(|d| d.as_secs()).unwrap_or(0);
        format!("{} {ago} s ago", self.what)
    }
}

/// Why a port's device could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A setting the device cannot use.
    #[error("{0}")]
    Settings(String),
    /// The vhost-user socket's path is not allowed.
    #[error(transparent)]
    Socket(#[from] SocketDirsError),
    /// The key file of a TCP link cannot be used.
    #[error(transparent)]
    KeyFile(#[from] weft_overlay::tcp_link::KeyFileError),
    /// A TAP or AF_PACKET port would not open.
    #[error(transparent)]
    Kernel(#[from] weft_tap::PortError),
    /// A vhost-user port would not open.
    #[error(transparent)]
    Vhost(#[from] weft_vhost::VhostError),
    /// A VXLAN port or TCP link would not open.
    #[error(transparent)]
    Overlay(#[from] weft_overlay::OverlayError),
    /// A memif port would not open.
    #[error(transparent)]
    Memif(#[from] weft_memif::MemifError),
    /// An AF_XDP port would not open.
    #[error(transparent)]
    Xdp(#[from] weft_xdp::XdpError),
    /// The device gave no halves.
    #[error(transparent)]
    Split(#[from] weft_switch::DeviceError),
    /// A device another weftd handed over is not what it says.
    #[error("the handed-over device: {0}")]
    Carry(#[from] CarryError),
}

/// A device a kind's module opened, before it is split over the lanes.
struct Opened {
    device: Box<dyn PortDevice>,
    /// How the device was got, when it was not opened afresh.
    origin: Option<Origin>,
    /// The halves, when the driver split the device itself (else `device` gives them).
    lanes: Option<Vec<PortHalves>>,
    remote_fdb: Option<RemoteFdbHandle>,
    keep: Keep,
}

impl Opened {
    /// A device with no control handle beside it.
    fn plain(device: impl PortDevice + 'static) -> Opened {
        Opened {
            device: Box::new(device),
            origin: None,
            lanes: None,
            remote_fdb: None,
            keep: Keep::Reopen,
        }
    }
}

/// Where a port is opened: what its kind's defaults depend on.
#[derive(Debug, Clone, Copy)]
pub struct OpenContext<'a> {
    /// The switch the port is on.
    pub switch: &'a str,
    /// What weftd allows a vhost-user port: where its socket may be, how much memory it
    /// may map.
    pub vhost: &'a VhostPolicy,
    /// The files the request names, read before the controller's lock was taken.
    pub files: &'a ClientFiles,
    /// Lanes of the switch (`SwitchSettings::lanes`): the halves a port is split into.
    pub lanes: usize,
    /// Which TAP devices weft created.
    pub taps: &'a TapMarks,
}

/// What weftd's configuration allows every vhost-user port.
#[derive(Debug)]
pub struct VhostPolicy {
    /// The directories its socket may be in; a socket that names no path is
    /// `<switch>-<port>.sock` in the first (`<runtime_dir>/vhost`).
    pub sockets: SocketDirs,
    /// The most guest memory its frontend may map, in bytes (`[vhost] max_guest_memory_gib`).
    pub max_guest_memory: u64,
    /// Whether its guest's frames are lent to the switch in place (`[vhost]
    /// lend_guest_memory`) or copied first.
    pub lend_guest_memory: bool,
}

impl VhostPolicy {
    /// Sockets in `sockets`, and the default memory limit.
    pub fn new(sockets: SocketDirs) -> VhostPolicy {
        VhostPolicy {
            sockets,
            max_guest_memory: weft_vhost::DEFAULT_MAX_GUEST_MEMORY,
            lend_guest_memory: true,
        }
    }
}

/// The socket of a vhost-user port: the one it names (inside an allowed directory), or
/// `<switch>-<port>.sock` in the default directory. The error names the client's path,
/// what is wrong with it and the fix.
pub fn vhost_socket(
    ctx: OpenContext<'_>,
    port: &str,
    socket: Option<&str>,
) -> Result<SocketName, SocketDirsError> {
    ctx.vhost
        .sockets
        .resolve(&format!("{}-{port}.sock", ctx.switch), socket)
}

/// The socket of a port that has one (vhost-user, memif): the one it names, inside an
/// allowed directory, or its default name in the default directory. `None` for other
/// kinds; the error names the client's path, what is wrong with it and the fix.
pub fn port_socket(
    ctx: OpenContext<'_>,
    port: &str,
    kind: &PortKind,
) -> Option<Result<SocketName, SocketDirsError>> {
    match kind {
        PortKind::VhostUser { socket, .. } => Some(vhost_socket(ctx, port, socket.as_deref())),
        PortKind::Memif { socket, .. } => Some(ctx.vhost.sockets.resolve(
            &memif::socket_default_name(ctx.switch, port),
            socket.as_deref(),
        )),
        _ => None,
    }
}

/// Checks what only the context can tell about a port before it is created: a vhost-user
/// or memif socket's directory, name and length. The error names the field and the fix.
pub fn check(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<(), SocketDirsError> {
    port_socket(ctx, port, kind).transpose().map(drop)
}

/// Opens the device of port `port` (whose name a TAP takes when it names no device), with
/// halves for each of the switch's lanes.
pub fn open(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<Device, OpenError> {
    let opened = match kind {
        PortKind::Tap { .. } => tap::open(port, &tap_settings(kind), ctx.taps)?,
        PortKind::AfPacket { ifname } => af_packet::open(ifname)?,
        PortKind::AfXdp {
            ifname,
            queue,
            attach,
        } => af_xdp::open(ifname, *queue, *attach)?,
        PortKind::VhostUser { .. } => vhost::open(ctx, port, kind)?,
        PortKind::Memif { .. } => memif::open(ctx, port, kind)?,
        PortKind::Vxlan { .. } => vxlan::open(kind)?,
        PortKind::TcpLink { .. } => tcp_link::open(port, kind, ctx.files)?,
    };
    split(ctx, port, opened)
}

/// Takes over port `port`'s device from what another weftd handed over, or systemd kept
/// (`carried`, with its descriptors `fds`); a device it says to open afresh is opened.
/// `origin` says how it came, for `port show` ("taken over from weftd 0.2.0 (pid 812)").
pub fn adopt(
    ctx: OpenContext<'_>,
    port: &str,
    kind: &PortKind,
    carried: &Carried,
    fds: Vec<OwnedFd>,
    origin: &str,
) -> Result<Device, OpenError> {
    if let Some(count) = carried.fd_count().filter(|c| *c != fds.len()) {
        return Err(CarryError::Mismatch(format!(
            "{} descriptors where {count} belong",
            fds.len()
        ))
        .into());
    }
    let opened = match (kind, carried) {
        (_, Carried::Reopen) => return open(ctx, port, kind),
        (PortKind::Tap { .. }, Carried::Tap { .. }) => {
            tap::adopt(&tap_settings(kind), carried, fds, ctx.taps)?
        }
        (PortKind::VhostUser { .. }, Carried::VhostUser { snapshot }) => {
            vhost::adopt(ctx, port, kind, snapshot.clone(), fds)?
        }
        (PortKind::Memif { .. }, Carried::Memif { handover }) => {
            memif::adopt(ctx, port, kind, handover.clone(), fds)?
        }
        (PortKind::Vxlan { .. }, Carried::Vxlan { handover }) => {
            vxlan::adopt(kind, handover.clone(), fds)?
        }
        (PortKind::TcpLink { .. }, Carried::TcpLink { handover }) => {
            tcp_link::adopt(kind, ctx.files, handover.clone(), fds)?
        }
        _ => {
            return Err(CarryError::Mismatch(format!(
                "a {} port cannot take over a {carried:?}",
                kind_name(kind)
            ))
            .into())
        }
    };
    let opened = Opened {
        origin: Some(Origin::now(origin.to_string())),
        ..opened
    };
    split(ctx, port, opened)
}

/// A TAP port's settings from its kind (defaults for any other kind: never used).
fn tap_settings(kind: &PortKind) -> tap::TapSettings<'_> {
    match kind {
        PortKind::Tap {
            ifname,
            netns,
            queues,
            mtu,
            offloads,
        } => tap::TapSettings {
            ifname: ifname.as_deref(),
            netns: netns.as_deref(),
            queues: *queues,
            mtu: *mtu,
            offloads: *offloads,
        },
        _ => tap::TapSettings {
            ifname: None,
            netns: None,
            queues: 1,
            mtu: 1500,
            offloads: true,
        },
    }
}

/// An opened device split over the switch's lanes.
fn split(ctx: OpenContext<'_>, port: &str, opened: Opened) -> Result<Device, OpenError> {
    let Opened {
        mut device,
        origin,
        lanes,
        remote_fdb,
        keep,
    } = opened;
    let lanes = match lanes {
        Some(lanes) => lanes,
        None => device.take_lanes(ctx.lanes)?,
    };
    let device = Device {
        lanes,
        handle: DeviceHandle {
            device: Arc::from(device),
            remote_fdb,
            keep,
            origin,
        },
    };
    Ok(device.spread(ctx.lanes, home_lane(port, ctx.lanes)))
}

/// The lane that receives from a port with one receive half: spread by the port's name, so
/// that a switch's TAPs and sockets do not all land on one lane, and the same after every
/// restart. (FNV-1a by hand: std's hasher promises no stable output across releases.)
pub fn home_lane(port: &str, lanes: usize) -> usize {
    let hash = port.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    usize::try_from(hash % u64::try_from(lanes.max(1)).unwrap_or(1)).unwrap_or(0)
}

impl Device {
    /// Halves for `lanes` lanes: a device opened with one pair keeps its receive half on
    /// lane `home` and shares its transmit half among all of them.
    pub fn spread(mut self, lanes: usize, home: usize) -> Device {
        if lanes <= 1 || self.lanes.len() != 1 {
            return self;
        }
        let Some(PortHalves { rx, tx }) = self.lanes.pop() else {
            return self;
        };
        let mut rx = rx;
        self.lanes = SharedTx::share(tx, lanes)
            .into_iter()
            .enumerate()
            .map(|(lane, tx)| PortHalves {
                rx: if lane == home % lanes {
                    rx.take()
                } else {
                    None
                },
                tx: Box::new(tx),
            })
            .collect();
        self
    }
}

/// The MTU a port of this kind has, as configured.
pub fn configured_mtu(kind: &PortKind) -> u32 {
    match kind {
        PortKind::Tap { mtu, .. } => *mtu,
        PortKind::AfPacket { .. } | PortKind::AfXdp { .. } | PortKind::Vxlan { .. } => 1500,
        PortKind::VhostUser { mtu, .. }
        | PortKind::Memif { mtu, .. }
        | PortKind::TcpLink { mtu, .. } => *mtu,
    }
}

/// A device handle for ports whose halves tests make in memory: MTU 1500, no status, no
/// counters.
#[cfg(test)]
pub(crate) fn memory_handle() -> DeviceHandle {
    struct InMemory;
    impl PortDevice for InMemory {
        fn kind(&self) -> &'static str {
            "memory"
        }
        fn mtu(&self) -> u32 {
            1500
        }
        fn take_lanes(&mut self, _: usize) -> Result<Vec<PortHalves>, weft_switch::DeviceError> {
            Err(weft_switch::DeviceError::AlreadySplit)
        }
        fn status(&self) -> weft_switch::DeviceStatus {
            weft_switch::DeviceStatus::default()
        }
        fn visit_counters(&self, _: &mut dyn FnMut(weft_switch::DeviceCounter<'_>)) {}
    }
    DeviceHandle {
        device: Arc::new(InMemory),
        remote_fdb: None,
        keep: Keep::Reopen,
        origin: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use weft_switch::{PortCaps, TxFrame};

    /// Allowed socket directories for these tests: `<tmp>/vhost` (the default) and `<tmp>/vms`.
    fn sockets() -> &'static (tempfile::TempDir, VhostPolicy) {
        static DIRS: std::sync::OnceLock<(tempfile::TempDir, VhostPolicy)> =
            std::sync::OnceLock::new();
        DIRS.get_or_init(|| {
            let t = tempfile::tempdir().unwrap();
            std::fs::create_dir(t.path().join("vhost")).unwrap();
            std::fs::create_dir(t.path().join("vms")).unwrap();
            let dirs =
                SocketDirs::open(&t.path().join("vhost"), &[t.path().join("vms")], &[]).unwrap();
            (t, VhostPolicy::new(dirs))
        })
    }

    static NO_MARKS: TapMarks = TapMarks::none();

    fn ctx() -> OpenContext<'static> {
        static FILES: std::sync::OnceLock<ClientFiles> = std::sync::OnceLock::new();
        OpenContext {
            switch: "br0",
            vhost: &sockets().1,
            files: FILES.get_or_init(ClientFiles::default),
            lanes: 1,
            taps: &NO_MARKS,
        }
    }

    #[test]
    fn a_one_queue_device_is_received_on_its_home_lane_and_sent_to_from_every_lane() {
        use weft_switch::memory_port::memory_port;
        let (rx, tx, h) = memory_port(PortCaps::plain(1500), 16);
        let device = Device {
            lanes: vec![PortHalves {
                rx: Some(Box::new(rx)),
                tx: Box::new(tx),
            }],
            handle: memory_handle(),
        }
        .spread(3, 1);
        let receiving: Vec<bool> = device.lanes.iter().map(|l| l.rx.is_some()).collect();
        assert_eq!(receiving, vec![false, true, false]);
        let frame = [0u8; 60];
        for mut lane in device.lanes {
            let sent = lane
                .tx
                .transmit(&[TxFrame::whole(&frame, Default::default())]);
            assert_eq!(sent, 1);
        }
        assert_eq!(h.take_sent().len(), 3, "every lane reaches the one device");
    }

    #[test]
    fn home_lanes_spread_port_names_and_never_change() {
        // Pinned: a restart must put a port's receive half on the same lane.
        assert_eq!(home_lane("t1", 2), home_lane("t1", 2));
        assert_eq!(home_lane("anything", 1), 0);
        let mut per_lane = [0usize; 4];
        for n in 0..400 {
            per_lane[home_lane(&format!("tap{n}"), 4)] += 1;
        }
        assert!(per_lane.iter().all(|&c| c > 60), "{per_lane:?}");
        let want =
            [fnv("t1") % 2, fnv("t2") % 2, fnv("up") % 3].map(|h| usize::try_from(h).unwrap());
        assert_eq!(
            [home_lane("t1", 2), home_lane("t2", 2), home_lane("up", 3)],
            want
        );
    }

    /// FNV-1a, written out again so the test pins the function, not only its stability.
    fn fnv(s: &str) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }

    #[test]
    fn vhost_user_sockets_default_to_the_switch_and_port_name() {
        let root = sockets().0.path();
        assert_eq!(
            vhost_socket(ctx(), "vm1", None).unwrap().path(),
            root.join("vhost/br0-vm1.sock")
        );
        let named = root.join("vms/x.sock");
        assert_eq!(
            vhost_socket(ctx(), "vm1", Some(&named.to_string_lossy()))
                .unwrap()
                .path(),
            named
        );
        assert!(vhost_socket(ctx(), "vm1", Some("/run/x.sock")).is_err());
    }

    #[test]
    fn a_tap_in_a_missing_namespace_fails_with_the_reason() {
        let kind = PortKind::Tap {
            ifname: None,
            netns: Some(format!("weft-absent-{}", std::process::id())),
            queues: 1,
            mtu: 1500,
            offloads: true,
        };
        let Err(e) = open(ctx(), "t0", &kind) else {
            panic!("opened a TAP in a namespace that does not exist")
        };
        assert!(e.to_string().contains("network namespace"), "{e}");
    }

    #[test]
    fn a_multiqueue_tap_is_split_over_the_lanes_and_taken_over_with_every_queue() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: creating a TAP needs root");
            return;
        }
        // Not persistent (no marks): the device goes with its last descriptor.
        let ifname = format!("wmq{}", std::process::id() % 100_000);
        let tap = |queues| PortKind::Tap {
            ifname: Some(ifname.clone()),
            netns: None,
            queues,
            mtu: 1500,
            offloads: true,
        };
        let two_lanes = OpenContext { lanes: 2, ..ctx() };
        let opened = open(two_lanes, "t0", &tap(4)).unwrap();
        let receiving: Vec<bool> = opened.lanes.iter().map(|l| l.rx.is_some()).collect();
        assert_eq!(receiving, [true, true], "two queues on each lane");
        let (carried, fds) = opened.handle.keep.record().unwrap().unwrap();
        assert_eq!((carried.fd_count(), fds.len()), (Some(4), 4));
        let dup = |fds: &[OwnedFd]| -> Vec<OwnedFd> {
            fds.iter().map(|f| f.try_clone().unwrap()).collect()
        };
        let one_short = dup(&fds[..3]);
        let e = adopt(two_lanes, "t0", &tap(4), &carried, one_short, "test").err();
        assert!(e.is_some_and(|e| e.to_string().contains("3 descriptors")));
        let e = adopt(two_lanes, "t0", &tap(2), &carried, dup(&fds), "test").err();
        assert!(e.is_some_and(|e| e.to_string().contains("port of 2 queues")));
        let taken = adopt(two_lanes, "t0", &tap(4), &carried, fds, "test").unwrap();
        assert_eq!(taken.lanes.len(), 2);
        assert!(taken.lanes.iter().all(|l| l.rx.is_some()));
        assert_eq!(taken.handle.device.kind(), "tap");
    }

    #[test]
    fn a_carried_tap_says_its_queues_and_one_queue_reads_as_before() {
        let two = Carried::Tap {
            ifname: "t0".into(),
            queues: 2,
            mtu: 1500,
            csum: true,
            tso: true,
            uso: false,
            owned: true,
        };
        let text = serde_json::to_string(&two).unwrap();
        assert_eq!(serde_json::from_str::<Carried>(&text).unwrap(), two);
        assert_eq!(two.fd_count(), Some(2));
        // As a weftd before multiqueue TAPs wrote it, and writes it still for one queue.
        let old = r#"{"kind":"tap","ifname":"t0","mtu":1500,"csum":true,"tso":true,"uso":false,"owned":true}"#;
        let one: Carried = serde_json::from_str(old).unwrap();
        assert_eq!(one.fd_count(), Some(1));
        assert_eq!(serde_json::to_string(&one).unwrap(), old);
    }
}
