//! Port commands: `port add` options to a request, `port set` changes onto current options.

use weft_control::rule::IpPattern;
use weft_control::state::{
    MacLimitAction, MacLimitSettings, PortKind, PortSettings, RateSettings, StormSettings,
    VhostMode, VlanMode, DEFAULT_STORM_BURST_MS,
};
use weft_control::{MacAddr, Request};

use crate::cli::{PortKindCmd, PortOptionArgs, PortRef, VhostModeArg};
use crate::error::CliError;

/// The `port_add` request for `weft port add SWITCH:PORT KIND ...`; `create_switch`: make
/// the switch when there is none (`--no-create-switch` says not to).
pub fn port_add_request(
    target: &PortRef,
    kind: &PortKindCmd,
    create_switch: bool,
) -> Result<Request, CliError> {
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
        PortKindCmd::AfXdp {
            ifname,
            queue,
            xdp_attach,
            options,
        } => (
            PortKind::AfXdp {
                ifname: ifname.clone(),
                queue: *queue,
                attach: *xdp_attach,
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
        PortKindCmd::Memif {
            memif_socket,
            id,
            role,
            secret,
            queues,
            mtu,
            options,
        } => (
            PortKind::Memif {
                socket: memif_socket.clone(),
                id: *id,
                role: match role {
                    VhostModeArg::Server => VhostMode::Server,
                    VhostModeArg::Client => VhostMode::Client,
                },
                secret: secret.clone(),
                queues: *queues,
                mtu: *mtu,
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
    Ok(Request::PortAdd {
        create_switch,
        switch: target.switch.clone(),
        name: target.port.clone(),
        kind,
        options: updated_settings(PortSettings::default(), &changes)?,
    })
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
    /// New allowed source MACs (empty: port security by MAC off).
    pub allowed_macs: Option<Vec<MacAddr>>,
    /// New allowed source prefixes (empty: port security by IP off).
    pub allowed_ips: Option<Vec<IpPattern>>,
    /// May act as a DHCP server.
    pub allow_dhcp_server: Option<bool>,
    /// May send router advertisements.
    pub allow_router_advertisements: Option<bool>,
    /// New broadcast rate (`Some(None)`: unlimited).
    pub storm_broadcast: Option<Option<RateSettings>>,
    /// New multicast rate.
    pub storm_multicast: Option<Option<RateSettings>>,
    /// New unknown-unicast rate.
    pub storm_unknown_unicast: Option<Option<RateSettings>>,
    /// New storm burst, ms.
    pub storm_burst_ms: Option<u32>,
    /// New MAC limit count.
    pub mac_limit: Option<u32>,
    /// New action at the MAC limit.
    pub mac_limit_action: Option<MacLimitAction>,
    /// Remove the MAC limit.
    pub no_mac_limit: bool,
}

/// The hint when a command changes nothing: every option `port set` takes.
const PORT_SET_OPTIONS: &str = "give --access VLAN, --trunk VLANS [--native VLAN], --plain, \
     --[no-]flood-unknown, --[no-]learning, --allowed-mac MACS, --allowed-ip PREFIXES, \
     --[no-]allow-dhcp-server, --[no-]allow-ra, --no-port-security, --storm-broadcast RATE, \
     --storm-multicast RATE, --storm-unknown-unicast RATE, --storm-burst-ms MS, \
     --no-storm-control, --mac-limit N, --mac-limit-action no-learn|drop or --no-mac-limit";

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
        let p = &o.policy;
        let clear = p.no_port_security;
        let unlimited = p.no_storm_control.then_some(None);
        let changes = PortChanges {
            vlan,
            flood_unknown_unicast: flag(o.flood_unknown, o.no_flood_unknown),
            learning: flag(o.learning, o.no_learning),
            allowed_macs: if clear {
                Some(Vec::new())
            } else {
                p.allowed_macs.clone()
            },
            allowed_ips: if clear {
                Some(Vec::new())
            } else {
                p.allowed_ips.clone()
            },
            allow_dhcp_server: flag(p.allow_dhcp_server, p.no_allow_dhcp_server || clear),
            allow_router_advertisements: flag(p.allow_ra, p.no_allow_ra || clear),
            storm_broadcast: p.storm_broadcast.map(|r| r.0).or(unlimited),
            storm_multicast: p.storm_multicast.map(|r| r.0).or(unlimited),
            storm_unknown_unicast: p.storm_unknown_unicast.map(|r| r.0).or(unlimited),
            storm_burst_ms: if p.no_storm_control {
                Some(DEFAULT_STORM_BURST_MS)
            } else {
                p.storm_burst_ms
            },
            mac_limit: p.mac_limit,
            mac_limit_action: p.mac_limit_action.map(Into::into),
            no_mac_limit: p.no_mac_limit,
        };
        if changes == PortChanges::default() {
            return Err(CliError::usage("nothing to change", PORT_SET_OPTIONS));
        }
        Ok(changes)
    }
}

/// `current` with `changes` applied; a usage error for a MAC limit action on a port
/// without a limit (and none given).
pub fn updated_settings(
    current: PortSettings,
    changes: &PortChanges,
) -> Result<PortSettings, CliError> {
    let mut security = current.security;
    if let Some(macs) = &changes.allowed_macs {
        security.allowed_macs = macs.clone();
    }
    if let Some(ips) = &changes.allowed_ips {
        security.allowed_ips = ips.clone();
    }
    if let Some(on) = changes.allow_dhcp_server {
        security.allow_dhcp_server = on;
    }
    if let Some(on) = changes.allow_router_advertisements {
        security.allow_router_advertisements = on;
    }
    let storm = StormSettings {
        broadcast: changes.storm_broadcast.unwrap_or(current.storm.broadcast),
        multicast: changes.storm_multicast.unwrap_or(current.storm.multicast),
        unknown_unicast: changes
            .storm_unknown_unicast
            .unwrap_or(current.storm.unknown_unicast),
        burst_ms: changes.storm_burst_ms.unwrap_or(current.storm.burst_ms),
    };
    let mac_limit = match (
        changes.mac_limit,
        changes.mac_limit_action,
        current.mac_limit,
    ) {
        _ if changes.no_mac_limit => None,
        (Some(max), action, now) => Some(MacLimitSettings {
            max,
            action: action.or(now.map(|l| l.action)).unwrap_or_default(),
        }),
        (None, Some(action), Some(now)) => Some(MacLimitSettings { action, ..now }),
        (None, Some(_), None) => {
            return Err(CliError::usage(
                "--mac-limit-action needs a MAC limit, and the port has none",
                "give --mac-limit N with it",
            ))
        }
        (None, None, now) => now,
    };
    Ok(PortSettings {
        vlan: changes.vlan.clone().unwrap_or(current.vlan),
        flood_unknown_unicast: changes
            .flood_unknown_unicast
            .unwrap_or(current.flood_unknown_unicast),
        learning: changes.learning.unwrap_or(current.learning),
        security,
        storm,
        mac_limit,
    })
}
