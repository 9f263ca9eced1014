//! Adopting a port from another process's snapshot. The snapshot is untrusted (a buggy or
//! different binary may have written it): its version, its descriptors (`fds.rs`) and its
//! shape are checked first, then what the frontend once asked is replayed through the
//! request handler's own code (`control.rs`: `SET_MEM_TABLE`, `SET_VRING_*`, the start at
//! the kick), which refuses a snapshot exactly as it would refuse the frontend; an error
//! closes every descriptor passed and changes nothing the frontend sees.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};

use vhost::vhost_user::message::VhostUserVringAddrFlags;
use vhost::vhost_user::VhostUserBackendReqHandlerMut;
use virtio_queue::QueueT;

use super::fds::{named, HandoverFds};
use super::{ConnectionSnapshot, HandoverError, PortSnapshot, RingSnapshot, SNAPSHOT_VERSION};
use crate::config::VhostPortConfig;
use crate::control::Device;
use crate::device::{queue_name, DeviceShared};
use crate::error::VhostError;
use crate::memory::RegionDesc;
use crate::server::serve::{configure, Connection};
use crate::server::source::StreamSource;
use crate::server::{lock, CreatedSocket, VhostMode, VhostUserPort};
use crate::socket_dir::SocketDir;

fn mode_name(listener: bool) -> &'static str {
    if listener {
        "server"
    } else {
        "client"
    }
}

/// [`VhostUserPort::adopt`].
pub(super) fn adopt(
    dir: Arc<SocketDir>,
    name: &OsStr,
    mode: VhostMode,
    config: VhostPortConfig,
    snapshot: PortSnapshot,
    fds: Vec<OwnedFd>,
) -> Result<VhostUserPort, VhostError> {
    if snapshot.version != SNAPSHOT_VERSION {
        return Err(HandoverError::Version {
            found: snapshot.version,
            expected: SNAPSHOT_VERSION,
        }
        .into());
    }
    let mut fds = HandoverFds::check(named(&snapshot), fds)?;
    SocketDir::check_name(name)?;
    let shared = DeviceShared::new(config)?;
    if let Some(c) = &snapshot.connection {
        if c.rings.len() != shared.vrings.len() {
            return Err(HandoverError::QueueCount {
                expected: shared.vrings.len(),
                found: c.rings.len(),
            }
            .into());
        }
    }
    let server = mode == VhostMode::Server;
    if server != snapshot.listener.is_some() {
        return Err(HandoverError::Mode {
            expected: mode_name(server),
            found: mode_name(snapshot.listener.is_some()),
        }
        .into());
    }
    let mut kept = None;
    let mut created = None;
    let source = match snapshot.listener {
        Some(index) => {
            let listener = UnixListener::from(fds.socket(index, "listening socket", true)?);
            // The control thread polls before it accepts (`source.rs`).
            listener
                .set_nonblocking(true)
                .map_err(HandoverError::io("setting up the listening socket"))?;
            kept = Some(
                listener
                    .try_clone()
                    .map_err(HandoverError::io("duplicating the listening socket"))?,
            );
            // The file it is bound to, removed when the port is dropped as though bound here.
            // One that is gone (or replaced by something else) does not stop the hand-over:
            // the connection and the listener still work; nothing is removed later.
            created = match dir.socket_id(name) {
                Ok(id) => Some(CreatedSocket {
                    dir: Arc::clone(&dir),
                    name: name.to_os_string(),
                    id,
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "the adopted listener's socket file is not there");
                    None
                }
            };
            StreamSource::Accept(listener)
        }
        None => StreamSource::connect(Arc::clone(&dir), name.to_os_string()),
    };
    let first = snapshot
        .connection
        .as_ref()
        .map(|c| restore_connection(c, &shared, &mut fds))
        .transpose()?;
    let mut port = VhostUserPort::start(shared, dir.display_path(name), mode, source, first)?;
    port.listener = kept;
    port.created = created;
    tracing::info!(path = %port.path().display(), "vhost-user port adopted");
    Ok(port)
}

/// The connection and its device model, as the frontend set it up.
fn restore_connection(
    c: &ConnectionSnapshot,
    shared: &Arc<DeviceShared>,
    fds: &mut HandoverFds,
) -> Result<Connection, HandoverError> {
    let stream = UnixStream::from(fds.socket(c.socket, "connection", false)?);
    configure(&stream).map_err(HandoverError::io("setting up the connection"))?;
    let device = Arc::new(Mutex::new(Device::new(Arc::clone(shared))));
    let handler = super::replay::handler_for(&stream, &device, c.features, c.protocol_features)?;
    {
        let mut dev = lock(&device);
        if let Some(regions) = &c.memory {
            let descs: Vec<RegionDesc> = regions
                .iter()
                .map(|r| RegionDesc {
                    guest_phys_addr: r.guest_phys_addr,
                    size: r.size,
                    user_addr: r.user_addr,
                    mmap_offset: r.mmap_offset,
                })
                .collect();
            let files = regions
                .iter()
                .map(|r| fds.file(r.fd, "memory region"))
                .collect::<Result<Vec<File>, _>>()?;
            dev.map_memory(&descs, files)?;
        }
        for (index, ring) in c.rings.iter().enumerate() {
            restore_ring(&mut dev, shared, fds, index, ring)?;
        }
        if let Some(mac) = c.announce {
            replayed(&mut dev, "SEND_RARP", None, |d| d.send_rarp(mac))?;
        }
        if let Some(mtu) = c.guest_mtu {
            replayed(&mut dev, "NET_SET_MTU", None, |d| {
                d.set_guest_mtu(u64::from(mtu))
            })?;
        }
    }
    Ok(Connection {
        watch: stream,
        device,
        handler,
    })
}

/// Runs one replayed request; its refusal as a typed error with the handler's reason.
fn replayed(
    dev: &mut Device,
    request: &str,
    queue: Option<&str>,
    f: impl FnOnce(&mut Device) -> vhost::vhost_user::Result<()>,
) -> Result<(), HandoverError> {
    f(dev).map_err(|e| HandoverError::Refused {
        request: match queue {
            Some(q) => format!("{request} ({q})"),
            None => request.to_string(),
        },
        reason: dev.take_refusal().unwrap_or_else(|| e.to_string()),
    })
}

/// Ring `index` set up, and started, as the frontend did it.
fn restore_ring(
    dev: &mut Device,
    shared: &DeviceShared,
    fds: &mut HandoverFds,
    index: usize,
    ring: &RingSnapshot,
) -> Result<(), HandoverError> {
    let queue = queue_name(index);
    let q = Some(queue);
    // At most 32 queues (checked against the configuration).
    let (Ok(i32_index), Ok(i8_index)) = (u32::try_from(index), u8::try_from(index)) else {
        return Err(HandoverError::Inconsistent(format!("queue index {index}")));
    };
    if !ring.started && ring.kick.is_some() {
        return Err(HandoverError::Inconsistent(format!(
            "a kick eventfd for queue {queue}, which is not started"
        )));
    }
    if let Some(size) = ring.size {
        replayed(dev, "SET_VRING_NUM", q, |d| {
            d.set_vring_num(i32_index, u32::from(size))
        })?;
    }
    if let Some(a) = ring.addrs {
        let flags = if a.log.is_some() {
            VhostUserVringAddrFlags::VHOST_VRING_F_LOG
        } else {
            VhostUserVringAddrFlags::empty()
        };
        replayed(dev, "SET_VRING_ADDR", q, |d| {
            d.set_vring_addr(
                i32_index,
                flags,
                a.desc,
                a.used,
                a.avail,
                a.log.unwrap_or(0),
            )
        })?;
    }
    replayed(dev, "SET_VRING_BASE", q, |d| {
        d.set_vring_base(i32_index, u32::from(ring.base))
    })?;
    if let Some(call) = ring.call {
        let file = fds.eventfd(call, "call eventfd")?;
        replayed(dev, "SET_VRING_CALL", q, |d| {
            d.set_vring_call(i8_index, Some(file))
        })?;
    }
    if let Some(enable) = ring.enabled {
        replayed(dev, "SET_VRING_ENABLE", q, |d| {
            d.set_vring_enable(i32_index, enable)
        })?;
    }
    if !ring.started {
        return Ok(());
    }
    let kick = ring
        .kick
        .map(|k| fds.eventfd(k, "kick eventfd"))
        .transpose()?;
    replayed(dev, "SET_VRING_KICK", q, |d| {
        d.set_vring_kick(i8_index, kick)
    })?;
    // The start resumes from the used index in guest memory where it differs from the base
    // (`control.rs`, `resume_index`): for a ring with nothing in flight they are equal, so
    // a difference means the snapshot does not describe this memory.
    let vring = shared
        .vrings
        .get(index)
        .ok_or_else(|| HandoverError::Inconsistent(format!("queue index {index}")))?;
    let resumed = vring.lock().queue.next_avail();
    if resumed != ring.base {
        return Err(HandoverError::UsedIndex {
            queue,
            snapshot: ring.base,
            guest: resumed,
        });
    }
    Ok(())
}
