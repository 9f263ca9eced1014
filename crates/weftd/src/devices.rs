//! Port devices: what stands behind a port of a switch.
//!
//! weftd creates ports of the kinds the protocol names: `tap` (a TAP device, created in the
//! port's network namespace, gone when the port is removed or weftd exits) and `af_packet`
//! (a packet socket on an existing interface), both from weft-tap; `vhost_user` (a socket a VM
//! or DPDK application connects to, weft-vhost), `vxlan` (a tunnel endpoint, weft-overlay) and
//! `tcp_link` (frames in a TCP connection to another weftd, weft-overlay).
//! A port restored from the
//! state file whose device cannot be opened is kept, marked failed, behind a [`FailedPort`]:
//! it keeps its place (its id, the rules and static FDB entries that name it) and drops what
//! the switch sends it.

mod counters;

pub use counters::{device_counters, device_drops, live_offloads, TcpLinkDevice};

use std::any::Any;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use weft_control::state::{PortKind, VhostMode};
use weft_overlay::tcp_link::{LinkKey, TcpLinkConfig, TcpLinkMode, TcpLinkPort};
use weft_overlay::{VxlanConfig, VxlanPort};
use weft_switch::lanes::SharedTx;
use weft_switch::{PortCaps, PortHalves, PortRx, PortTx, TxFrame};
use weft_tap::{AfPacket, AfPacketOptions, Offloads, PortStats, Tap, TapOptions};
use weft_vhost::{VhostPortConfig, VhostUserPort};

use crate::control::client_files::ClientFiles;
use crate::socket_dirs::{SocketDirs, SocketName};

/// An opened device: the halves the switch takes, and what the port reports.
pub struct Device {
    /// The halves for each lane of the switch, first lane first (one with one lane). A
    /// vhost-user port gives each lane its share of the queue pairs; any other port's
    /// receive half goes to one lane ([`home_lane`]), and every lane transmits through one
    /// shared half ([`weft_switch::lanes::SharedTx`]).
    pub lanes: Vec<PortHalves>,
    /// MTU.
    pub mtu: u32,
    /// Offloads the device takes on transmit (`csum`, `tso4`, `tso6`, `uso`).
    pub offloads: Vec<String>,
    /// What the device counts itself (frames it dropped before the switch saw them, or
    /// that the kernel refused); `None` for a stand-in.
    pub stats: Option<Arc<PortStats>>,
    /// What must live as long as the port (a vhost-user port's control thread and socket:
    /// dropping it removes the socket).
    pub keep: Option<Keepalive>,
}

/// What a VXLAN port's control plane holds: its counters and its remote FDB.
pub struct VxlanDevice {
    /// The port's own counters (decapsulation drops by reason).
    pub stats: Arc<weft_overlay::OverlayStats>,
    /// The running port's remote FDB (static entries change in place).
    pub fdb: weft_overlay::RemoteFdbHandle,
}

/// An owner a port's device needs alive while the port exists.
pub type Keepalive = Arc<dyn Any + Send + Sync>;

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
) -> Result<SocketName, String> {
    ctx.vhost
        .sockets
        .resolve(&format!("{}-{port}.sock", ctx.switch), socket)
        .map_err(|e| e.to_string())
}

/// Checks what only the context can tell about a port before it is created: a vhost-user
/// socket's directory, name and length. The error names the field and the fix.
pub fn check(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<(), String> {
    let PortKind::VhostUser { socket, .. } = kind else {
        return Ok(());
    };
    vhost_socket(ctx, port, socket.as_deref()).map(drop)
}

/// The VXLAN configuration a `vxlan` port kind describes.
fn vxlan_config(kind: &PortKind) -> Result<Option<VxlanConfig>, String> {
    let PortKind::Vxlan {
        local,
        vni,
        remotes,
        netns,
        learning,
        port,
        remote_macs,
        remote_ageing,
    } = kind
    else {
        return Ok(None);
    };
    let mut config = VxlanConfig::new(SocketAddr::new(*local, port.unwrap_or(0)), *vni);
    if let Some(p) = port {
        config.remote_port = *p;
    }
    for r in remotes {
        config = config.remote(*r);
    }
    config.learning = *learning;
    config.remote_ageing = std::time::Duration::from_secs(u64::from(*remote_ageing));
    for entry in remote_macs {
        config = config.static_mac(entry.mac, entry.remote);
    }
    if let Some(ns) = netns {
        config = config.netns(weft_tap::netns::named(ns));
    }
    Ok(Some(config))
}

/// The TCP link configuration a `tcp_link` port kind describes.
fn tcp_link_config(kind: &PortKind, files: &ClientFiles) -> Result<Option<TcpLinkConfig>, String> {
    let PortKind::TcpLink {
        listen,
        connect,
        netns,
        link_id,
        mtu,
        offloads,
        key_file,
    } = kind
    else {
        return Ok(None);
    };
    let mode = match (listen, connect) {
        (Some(a), None) => TcpLinkMode::Listen(*a),
        (None, Some(a)) => TcpLinkMode::Connect(*a),
        _ => return Err("give exactly one of listen and connect".into()),
    };
    let mut config = TcpLinkConfig::new(mode);
    config.link_id = *link_id;
    config.mtu = usize::try_from(*mtu).map_err(|_| "the MTU is out of range")?;
    config.offloads = *offloads;
    if let Some(ns) = netns {
        config = config.netns(weft_tap::netns::named(ns));
    }
    if let Some(path) = key_file {
        let file = files.key(path).map_err(|e| e.to_string())?;
        let key = LinkKey::new(file.bytes).map_err(|problem| {
            weft_overlay::tcp_link::KeyFileError {
                path: path.into(),
                problem,
            }
            .to_string()
        })?;
        config.key = Some(key);
        if file.others_can_read {
            // A key file others can read is a key others may know: say so (the link still
            // opens).
            tracing::warn!(
                "key file {path} can be read by users other than its owner: chmod 600 {path}"
            );
        }
    }
    Ok(Some(config))
}

/// Opens the device of port `port` (whose name a TAP takes when it names no device), with
/// halves for each of the switch's lanes.
pub fn open(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<Device, String> {
    open_device(ctx, port, kind).map(|d| d.spread(ctx.lanes, home_lane(port, ctx.lanes)))
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

/// One lane's halves of a port with one receive half.
fn one(rx: impl PortRx + 'static, tx: impl PortTx + 'static) -> Vec<PortHalves> {
    vec![PortHalves {
        rx: Some(Box::new(rx)),
        tx: Box::new(tx),
    }]
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

fn open_device(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<Device, String> {
    match kind {
        PortKind::Tap {
            ifname,
            netns,
            queues,
            mtu,
            offloads,
        } => {
            if *queues != 1 {
                // The switch polls one receive half per port; model::validate refuses this
                // first, so only a hand-edited state file gets here.
                return Err(format!("{queues} queues: weftd opens TAPs with one queue"));
            }
            let mut options = TapOptions::new(ifname.as_deref().unwrap_or(port))
                .mtu(*mtu)
                .offloads(if *offloads {
                    Offloads::ALL
                } else {
                    Offloads::NONE
                });
            if let Some(ns) = netns {
                options = options.netns(weft_tap::netns::named(ns));
            }
            let tap = Tap::open(&options).map_err(|e| e.to_string())?;
            let mtu = u32::try_from(tap.mtu()).map_err(|_| "the TAP's MTU is out of range")?;
            let names = offload_names(tap.offloads());
            let queue = tap
                .into_queues()
                .into_iter()
                .next()
                .ok_or("the TAP opened without a queue")?;
            let (rx, tx, stats) = queue.split();
            Ok(Device {
                lanes: one(rx, tx),
                mtu,
                offloads: names,
                stats: Some(stats),
                keep: None,
            })
        }
        PortKind::AfPacket { ifname } => {
            let options = AfPacketOptions::new(ifname);
            let port = AfPacket::open(&options).map_err(|e| e.to_string())?;
            let mtu =
                u32::try_from(port.mtu()).map_err(|_| "the interface's MTU is out of range")?;
            let (rx, tx, stats) = port.split();
            Ok(Device {
                lanes: one(rx, tx),
                mtu,
                offloads: offload_names(options.offloads),
                stats: Some(stats),
                keep: None,
            })
        }
        PortKind::VhostUser {
            socket,
            mode,
            mtu,
            dispatch,
            notify,
            queues,
        } => {
            let socket = vhost_socket(ctx, port, socket.as_deref())?;
            let config = VhostPortConfig {
                mtu: usize::try_from(*mtu).map_err(|_| "the MTU is out of range")?,
                dispatch: dispatch.map(vhost_dispatch).unwrap_or_default(),
                notify: notify.map(vhost_notify).unwrap_or_default(),
                queue_pairs: *queues,
                max_guest_memory: ctx.vhost.max_guest_memory,
                lend_guest_memory: ctx.vhost.lend_guest_memory,
                ..VhostPortConfig::default()
            };
            // In client mode the frontend owns the socket: weft connects (retrying until it is
            // there) and never removes it.
            let mode = match mode {
                VhostMode::Server => weft_vhost::VhostMode::Server,
                VhostMode::Client => weft_vhost::VhostMode::Client,
            };
            let mut vhost = VhostUserPort::open_in(socket.dir, &socket.name, mode, config)
                .map_err(|e| e.to_string())?;
            let lanes = vhost
                .take_lane_halves(ctx.lanes)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(rx, tx)| PortHalves {
                    rx: Some(Box::new(rx)),
                    tx: Box::new(tx),
                })
                .collect();
            Ok(Device {
                lanes,
                mtu: *mtu,
                offloads: Vec::new(),
                stats: None,
                keep: Some(Arc::new(Mutex::new(vhost))),
            })
        }
        PortKind::Vxlan { .. } => {
            let config = vxlan_config(kind)?.ok_or("not a VXLAN port")?;
            let vxlan = VxlanPort::open(&config).map_err(|e| e.to_string())?;
            let fdb = vxlan.remote_fdb();
            // The inner MTU the underlay allows (route MTU minus the overlay's cost).
            let mtu = u32::try_from(vxlan.mtu()).map_err(|_| "the MTU is out of range")?;
            let paths = vxlan.socket_paths();
            let (rx, tx, stats) = vxlan.split();
            let caps = weft_switch::PortTx::caps(&tx);
            // The inner offloads the port takes, then how its datagrams go through the kernel.
            let offloads = [("tso4", caps.tso4), ("tso6", caps.tso6), ("uso", caps.uso)]
                .into_iter()
                .filter(|(_, on)| *on)
                .map(|(name, _)| name)
                .chain(paths.names())
                .map(String::from)
                .collect();
            Ok(Device {
                lanes: one(rx, tx),
                mtu,
                offloads,
                stats: None,
                keep: Some(Arc::new(VxlanDevice { stats, fdb })),
            })
        }
        PortKind::TcpLink { .. } => {
            let config = tcp_link_config(kind, ctx.files)?.ok_or("not a TCP link")?;
            if config.key.is_none() {
                tracing::warn!(
                    port,
                    "tcp link {port} is unauthenticated: anyone who reaches it can send frames \
                     into the switch; give both ends the same --key-file"
                );
            }
            let mtu = u32::try_from(config.mtu).map_err(|_| "the MTU is out of range")?;
            let offloads = if config.offloads {
                ["csum", "tso4", "tso6", "uso"].map(String::from).to_vec()
            } else {
                Vec::new()
            };
            let link = TcpLinkPort::open(&config).map_err(|e| e.to_string())?;
            let (rx, tx, stats) = link.split();
            Ok(Device {
                lanes: one(rx, tx),
                mtu,
                offloads: offloads.clone(),
                stats: None,
                keep: Some(Arc::new(TcpLinkDevice { stats, offloads })),
            })
        }
    }
}

/// The offloads as `PortInfo` names them.
fn offload_names(offloads: Offloads) -> Vec<String> {
    let o = offloads.normalized();
    let mut names = Vec::new();
    if o.csum {
        names.push("csum");
    }
    if o.tso {
        names.extend(["tso4", "tso6"]);
    }
    if o.uso {
        names.push("uso");
    }
    names.into_iter().map(String::from).collect()
}

/// The MTU a port of this kind has, as configured.
pub fn configured_mtu(kind: &PortKind) -> u32 {
    match kind {
        PortKind::Tap { mtu, .. } => *mtu,
        PortKind::AfPacket { .. } | PortKind::Vxlan { .. } => 1500,
        PortKind::VhostUser { mtu, .. } | PortKind::TcpLink { mtu, .. } => *mtu,
    }
}

/// The stand-in for a port whose device failed: it takes no frame (the switch counts them
/// as dropped on this port) and receives none.
pub struct FailedPort {
    caps: PortCaps,
}

impl FailedPort {
    /// A stand-in device for a port of `kind`.
    pub fn device(kind: &PortKind) -> Device {
        let mtu = configured_mtu(kind);
        Device {
            lanes: vec![PortHalves {
                rx: None,
                tx: Box::new(FailedPort {
                    caps: PortCaps::plain(usize::try_from(mtu).unwrap_or(1500)),
                }),
            }],
            mtu,
            offloads: Vec::new(),
            stats: None,
            keep: None,
        }
    }
}

impl PortTx for FailedPort {
    fn caps(&self) -> PortCaps {
        self.caps
    }

    fn transmit(&mut self, _frames: &[TxFrame<'_>]) -> usize {
        0
    }
}

/// The port's dispatch mode from its state.
fn vhost_dispatch(d: weft_control::state::VhostDispatch) -> weft_vhost::DispatchMode {
    use weft_control::state::VhostDispatch as D;
    match d {
        D::GuestDriven => weft_vhost::DispatchMode::GuestDriven,
        D::SwitchDriven => weft_vhost::DispatchMode::SwitchDriven,
        D::Adaptive {
            low_pps,
            high_pps,
            window_us,
        } => weft_vhost::DispatchMode::Adaptive {
            low_pps,
            high_pps,
            window: std::time::Duration::from_micros(window_us),
        },
    }
}

/// The port's notification policy from its state.
fn vhost_notify(n: weft_control::state::VhostNotify) -> weft_vhost::NotifyPolicy {
    use weft_control::state::VhostNotify as N;
    match n {
        N::Immediate => weft_vhost::NotifyPolicy::Immediate,
        N::Optimistic => weft_vhost::NotifyPolicy::Optimistic,
        N::Coalesced {
            frames,
            max_delay_us,
        } => weft_vhost::NotifyPolicy::Coalesced {
            frames,
            max_delay: std::time::Duration::from_micros(max_delay_us),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::IpAddr;
    use std::path::PathBuf;

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

    fn ctx() -> OpenContext<'static> {
        static FILES: std::sync::OnceLock<ClientFiles> = std::sync::OnceLock::new();
        OpenContext {
            switch: "br0",
            vhost: &sockets().1,
            files: FILES.get_or_init(ClientFiles::default),
            lanes: 1,
        }
    }

    #[test]
    fn a_one_queue_device_is_received_on_its_home_lane_and_sent_to_from_every_lane() {
        use weft_switch::memory_port::memory_port;
        let (rx, tx, h) = memory_port(PortCaps::plain(1500), 16);
        let device = Device {
            lanes: one(rx, tx),
            mtu: 1500,
            offloads: Vec::new(),
            stats: None,
            keep: None,
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
    fn vxlan_settings_become_its_configuration() {
        let kind = PortKind::Vxlan {
            local: "192.0.2.1".parse().unwrap(),
            vni: weft_control::Vni::new(9).unwrap(),
            remotes: vec!["192.0.2.2".parse().unwrap()],
            netns: Some("under".into()),
            learning: true,
            port: Some(4790),
            remote_macs: vec![weft_control::state::RemoteMac {
                mac: "02:00:00:00:00:07".parse().unwrap(),
                remote: "192.0.2.2".parse().unwrap(),
            }],
            remote_ageing: 45,
        };
        let c = vxlan_config(&kind).unwrap().unwrap();
        assert_eq!(c.remote_ageing, std::time::Duration::from_secs(45));
        assert_eq!(c.local, "192.0.2.1:4790".parse().unwrap());
        assert_eq!(c.remote_port, 4790);
        assert_eq!(c.vni.get(), 9);
        assert_eq!(c.remotes, ["192.0.2.2".parse::<IpAddr>().unwrap()]);
        assert!(c.learning);
        assert_eq!(
            c.static_fdb,
            [(
                "02:00:00:00:00:07".parse().unwrap(),
                "192.0.2.2".parse::<IpAddr>().unwrap()
            )]
        );
        assert_eq!(c.netns, Some(PathBuf::from("/run/netns/under")));
    }

    #[test]
    fn offloads_are_named_as_the_protocol_names_them() {
        assert_eq!(
            offload_names(Offloads::ALL),
            ["csum", "tso4", "tso6", "uso"]
        );
        assert_eq!(offload_names(Offloads::CSUM_ONLY), ["csum"]);
        assert!(offload_names(Offloads::NONE).is_empty());
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
        assert!(e.contains("network namespace"), "{e}");
    }

    #[test]
    fn multiqueue_taps_are_refused() {
        let kind = PortKind::Tap {
            ifname: None,
            netns: None,
            queues: 2,
            mtu: 1500,
            offloads: true,
        };
        assert!(open(ctx(), "t0", &kind).is_err_and(|e| e.contains("one queue")));
    }
}
