//! `vhost_user` ports: a socket a VM or DPDK application connects to (server mode), or one
//! weft connects to (client mode), within the directories weftd's configuration allows.

use weft_control::state::{PortKind, VhostMode};
use weft_vhost::{VhostPortConfig, VhostUserPort};

use super::{OpenContext, OpenError, Opened};

/// Opens the vhost-user port `port` of `kind` and splits it over the switch's lanes.
pub(super) fn open(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<Opened, OpenError> {
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
    let vhost = VhostUserPort::open_in(socket.dir, &socket.name, mode, config)?;
    Ok(Opened::plain(vhost))
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
