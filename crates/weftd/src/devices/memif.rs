//! `memif` ports: a memif socket (VPP, libmemif, DPDK's `net_memif`) weft listens on
//! (server) or connects to (client), within the directories weftd allows for sockets.

use std::os::fd::OwnedFd;

use weft_control::state::{MemifRole, PortKind};
use weft_memif::{MemifConfig, MemifHandover, MemifPort, Role};

use super::{Keep, OpenContext, OpenError, Opened};
use crate::socket_dirs::SocketName;

/// Opens the memif port `port` of `kind`.
pub(super) fn open(ctx: OpenContext<'_>, port: &str, kind: &PortKind) -> Result<Opened, OpenError> {
    let (socket, config) = settings(ctx, port, kind)?;
    opened(MemifPort::open(socket.dir, &socket.name, config)?)
}

/// Takes over the memif port another weftd handed over: its listener, and its connected
/// peer with the memory and rings, which goes on with no new handshake.
pub(super) fn adopt(
    ctx: OpenContext<'_>,
    port: &str,
    kind: &PortKind,
    handover: MemifHandover,
    fds: Vec<OwnedFd>,
) -> Result<Opened, OpenError> {
    let (socket, config) = settings(ctx, port, kind)?;
    opened(MemifPort::adopt(
        socket.dir,
        &socket.name,
        config,
        handover,
        fds,
    )?)
}

/// The port, with what hands it over later.
fn opened(memif: MemifPort) -> Result<Opened, OpenError> {
    let keep = Keep::Memif(memif.handover_source());
    Ok(Opened {
        keep,
        ..Opened::plain(memif)
    })
}

/// The port's socket and settings.
fn settings(
    ctx: OpenContext<'_>,
    port: &str,
    kind: &PortKind,
) -> Result<(SocketName, MemifConfig), OpenError> {
    let PortKind::Memif {
        id,
        role,
        secret,
        queues,
        mtu,
        ..
    } = kind
    else {
        return Err(OpenError::Settings("not a memif port".into()));
    };
    let socket = super::port_socket(ctx, port, kind)
        .ok_or_else(|| OpenError::Settings("a memif port has a socket".into()))??;
    let config = MemifConfig {
        role: match role {
            MemifRole::Server => Role::Server,
            MemifRole::Client => Role::Client,
        },
        id: *id,
        secret: secret.as_ref().map(|s| s.as_bytes().to_vec()),
        queue_pairs: *queues,
        mtu: *mtu,
        // The peer sees the port's name (`show memif` in VPP, testpmd's link name).
        interface_name: port.to_string(),
        max_region_bytes: ctx.vhost.max_guest_memory,
        ..MemifConfig::default()
    };
    Ok((socket, config))
}

/// A memif port's socket when it names none: `<switch>-<port>.memif.sock`.
pub(super) fn socket_default_name(switch: &str, port: &str) -> String {
    format!("{switch}-{port}.memif.sock")
}
