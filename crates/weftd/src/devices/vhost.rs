//! `vhost_user` ports: a socket a VM or DPDK application connects to (server mode), or one
//! weft connects to (client mode), within the directories weftd's configuration allows.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use weft_control::state::{PortKind, VhostMode};
use weft_switch::{DeviceCounter, DeviceError, DeviceStatus, PortDevice, PortHalves};
use weft_vhost::{PortSnapshot, VhostPortConfig, VhostUserPort};

use super::{Keep, OpenContext, OpenError, Opened};
use crate::socket_dirs::SocketName;

/// Opens the vhost-user port `port` of `kind` and splits it over the switch's lanes.
pub(super) fn open(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<Opened, OpenError> {
    let (socket, mode, config) = settings(ctx, port, kind)?;
    let vhost = VhostUserPort::open_in(socket.dir, &socket.name, mode, config)?;
    opened(ctx, vhost)
}

/// Takes over the vhost-user port another weftd handed over: its socket, its frontend's
/// connection, memory and rings.
pub(super) fn adopt(
    ctx: OpenContext<'_>,
    port: &str,
    kind: &PortKind,
    snapshot: PortSnapshot,
    fds: Vec<OwnedFd>,
) -> Result<Opened, OpenError> {
    let (socket, mode, config) = settings(ctx, port, kind)?;
    let vhost = VhostUserPort::adopt(socket.dir, &socket.name, mode, config, snapshot, fds)?;
    opened(ctx, vhost)
}

/// The port split over the switch's lanes, kept for a later hand-over.
fn opened(ctx: OpenContext<'_>, mut vhost: VhostUserPort) -> Result<Opened, OpenError> {
    let lanes = vhost.take_lanes(ctx.lanes)?;
    let vhost = Arc::new(vhost);
    Ok(Opened {
        lanes: Some(lanes),
        keep: Keep::Vhost(Arc::clone(&vhost)),
        ..Opened::plain(SharedVhost(vhost))
    })
}

/// A vhost-user port the control plane shares with its hand-over keep.
struct SharedVhost(Arc<VhostUserPort>);

impl PortDevice for SharedVhost {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    fn mtu(&self) -> u32 {
        self.0.mtu()
    }
    fn take_lanes(&mut self, _lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        // Split when opened (see `opened`).
        Err(DeviceError::AlreadySplit)
    }
    fn status(&self) -> DeviceStatus {
        self.0.status()
    }
    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        self.0.visit_counters(visit);
    }
}

/// Where the port's socket is, which side it takes, and its driver's configuration.
fn settings(
    ctx: OpenContext<'_>,
    port: &str,
    kind: &PortKind,
) -> Result<(SocketName, weft_vhost::VhostMode, VhostPortConfig), OpenError> {
    let PortKind::VhostUser {
        socket,
        mode,
        mtu,
        dispatch,
        notify,
        queues,
    } = kind
    else {
        return Err(OpenError::Settings("not a vhost-user port".into()));
    };
    let socket = super::vhost_socket(ctx, port, socket.as_deref())?;
    let config = VhostPortConfig {
        mtu: usize::try_from(*mtu)
            .map_err(|_| OpenError::Settings("the MTU is out of range".into()))?,
        dispatch: dispatch.map(vhost_dispatch).unwrap_or_default(),
        notify: notify.map(vhost_notify).unwrap_or_default(),
        queue_pairs: *queues,
        max_guest_memory: ctx.vhost.max_guest_memory,
        lend_guest_memory: ctx.vhost.lend_guest_memory,
        ..VhostPortConfig::default()
    };
    // In client mode the frontend owns the socket: weft connects (retrying until it is there)
    // and never removes it.
    let mode = match mode {
        VhostMode::Server => weft_vhost::VhostMode::Server,
        VhostMode::Client => weft_vhost::VhostMode::Client,
    };
    Ok((socket, mode, config))
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
