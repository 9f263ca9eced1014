//! Port commands: `port add` options to a request, `port set` changes onto current options.

use weft_control::state::{PortKind, PortSettings, VhostMode, VlanMode};
use weft_control::Request;

use crate::cli::{PortKindCmd, PortOptionArgs, PortRef, VhostModeArg};
use crate::error::CliError;

/// The `port_add` request for `weft port add SWITCH:PORT KIND ...`.
pub fn port_add_request(target: &PortRef, kind: &PortKindCmd) -> Request {
    let (kind, options) = match kind {
        PortKindCmd::Tap {
            ifname,
            netns,
            queues,
            mtu,
            no_offloads,
            options,
        } => (
            PortKind::Tap {
                ifname: ifname.clone(),
                netns: netns.clone(),
                queues: *queues,
                mtu: *mtu,
                offloads: !no_offloads,
            },
            options,
        ),
        PortKindCmd::AfPacket { ifname, options } => (
            PortKind::AfPacket {
                ifname: ifname.clone(),
            },
            options,
        ),
        PortKindCmd::VhostUser {
            vhost_socket,
            vhost_mode,
            mtu,
            dispatch,
            notify,
            queues,
            options,
        } => (
            PortKind::VhostUser {
                socket: vhost_socket.clone(),
                mode: match vhost_mode {
                    VhostModeArg::Server => VhostMode::Server,
                    VhostModeArg::Client => VhostMode::Client,
                },
                mtu: *mtu,
                dispatch: *dispatch,
                notify: *notify,
                queues: *queues,
            },
            options,
        ),
        PortKindCmd::Vxlan {
            local,
            vni,
            remotes,
            netns,
            remote_learning,
            udp_port,
            remote_macs,
            remote_ageing,
            directory,
            options,
        } => (
            PortKind::Vxlan {
                local: *local,
                vni: *vni,
                remotes: remotes.clone(),
                netns: netns.clone(),
                learning: *remote_learning,
                port: *udp_port,
                remote_macs: remote_macs.clone(),
                remote_ageing: *remote_ageing,
                directory: *directory,
            },
            options,
        ),
        PortKindCmd::TcpLink {
            listen,
            connect,
            netns,
            link_id,
            mtu,
            no_offloads,
            key_file,
            options,
        } => (
            PortKind::TcpLink {
                listen: *listen,
                connect: *connect,
                netns: netns.clone(),
                link_id: *link_id,
                mtu: *mtu,
                offloads: !no_offloads,
                key_file: key_file.as_deref().map(absolute_path),
            },
            options,
        ),
    };
    let changes = PortChanges::from_args(options).unwrap_or_default();
    Request::PortAdd {
        switch: target.switch.clone(),
        name: target.port.clone(),
        kind,
        options: updated_settings(PortSettings::default(), &changes),
    }
}

/// `path` made absolute against this directory (weftd reads it from its own), as text.
fn absolute_path(path: &std::path::Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// The switch-side options a command line changes; `None` leaves one as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortChanges {
    /// New VLAN mode.
    pub vlan: Option<VlanMode>,
    /// Flood unknown unicast.
    pub flood_unknown_unicast: Option<bool>,
    /// Learning.
    pub learning: Option<bool>,
}

impl PortChanges {
    /// The changes the options ask for; a usage error when there are none.
    pub fn from_args(o: &PortOptionArgs) -> Result<PortChanges, CliError> {
        let vlan = match (&o.access, &o.trunk, o.plain) {
            (Some(v), _, _) => Some(VlanMode::Access { vlan: *v }),
            (None, Some(vlans), _) => Some(VlanMode::Trunk {
                vlans: vlans.clone(),
                native: o.native,
            }),
            (None, None, true) => Some(VlanMode::Plain),
            (None, None, false) => None,
        };
        let flag = |on: bool, off: bool| match (on, off) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        let changes = PortChanges {
            vlan,
            flood_unknown_unicast: flag(o.flood_unknown, o.no_flood_unknown),
            learning: flag(o.learning, o.no_learning),
        };
        if changes == PortChanges::default() {
            return Err(CliError::usage(
                "nothing to change",
                "give --access VLAN, --trunk VLANS [--native VLAN], --plain, \
                 --[no-]flood-unknown or --[no-]learning",
            ));
        }
        Ok(changes)
    }
}

/// `current` with `changes` applied.
pub fn updated_settings(current: PortSettings, changes: &PortChanges) -> PortSettings {
    PortSettings {
        vlan: changes.vlan.clone().unwrap_or(current.vlan),
        flood_unknown_unicast: changes
            .flood_unknown_unicast
            .unwrap_or(current.flood_unknown_unicast),
        learning: changes.learning.unwrap_or(current.learning),
    }
}
