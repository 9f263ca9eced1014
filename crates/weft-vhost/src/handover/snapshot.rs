//! Describing a suspended port: its listener, its connection and what the frontend set up,
//! with duplicates of every descriptor named. Nothing is changed unless all of it can be
//! carried; then every running ring's guest is interrupted once.

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

use vmm_sys_util::eventfd::EventFd;

use super::{
    ConnectionSnapshot, HandoverError, PortSnapshot, RegionSnapshot, RingAddrsSnapshot,
    RingSnapshot, SNAPSHOT_VERSION,
};
use crate::control::Device;
use crate::device::DeviceShared;
use crate::server::{lock, VhostUserPort};
use vhost::vhost_user::message::VhostUserVirtioFeatures;
use virtio_queue::QueueT;

/// The descriptors of a snapshot, in the order they are named.
#[derive(Default)]
struct Fds(Vec<OwnedFd>);

impl Fds {
    /// Adds a duplicate of `fd`; returns its index.
    fn push(&mut self, fd: impl std::os::fd::AsFd) -> Result<usize, HandoverError> {
        let dup = fd
            .as_fd()
            .try_clone_to_owned()
            .map_err(HandoverError::io("duplicating a descriptor"))?;
        self.0.push(dup);
        Ok(self.0.len() - 1)
    }

    /// Adds a duplicate of the eventfd `fd`; returns its index.
    fn push_eventfd(&mut self, fd: &EventFd) -> Result<usize, HandoverError> {
        let dup = fd
            .try_clone()
            .map_err(HandoverError::io("duplicating an eventfd"))?;
        // SAFETY: `into_raw_fd` gives up the duplicate's only owner, so the OwnedFd is its
        // sole owner and closes it once.
        self.0
            .push(unsafe { OwnedFd::from_raw_fd(dup.into_raw_fd()) });
        Ok(self.0.len() - 1)
    }
}

/// The snapshot of `port`, whose control thread is parked.
pub(super) fn take(port: &VhostUserPort) -> Result<(PortSnapshot, Vec<OwnedFd>), HandoverError> {
    let mut fds = Fds::default();
    let listener = port.listener.as_ref().map(|l| fds.push(l)).transpose()?;
    let served = lock(&port.served);
    let connection = match served.as_ref() {
        None => None,
        Some(s) => {
            let socket = fds.push(&s.stream)?;
            let device = lock(&s.device);
            Some(describe(&device, &port.shared, socket, &mut fds)?)
        }
    };
    drop(served);
    if connection.is_some() {
        flush_notifications(&port.shared);
    }
    let snapshot = PortSnapshot {
        version: SNAPSHOT_VERSION,
        listener,
        connection,
    };
    Ok((snapshot, fds.0))
}

/// The connection's device model, after checking that all of it can be carried.
fn describe(
    device: &Device,
    shared: &DeviceShared,
    socket: usize,
    fds: &mut Fds,
) -> Result<ConnectionSnapshot, HandoverError> {
    // A dirty log mapped while logging is off (a migration that was cancelled) is not
    // carried: a frontend sends the log again with every start of logging.
    if device.acked_features() & VhostUserVirtioFeatures::LOG_ALL.bits() != 0 {
        return Err(HandoverError::Logging);
    }
    let memory = match device.memory() {
        None => None,
        Some(table) => {
            let mut regions = Vec::new();
            for (index, r) in table.regions().iter().enumerate() {
                let file = table.region_file(index).ok_or_else(|| {
                    HandoverError::Inconsistent(format!("memory region {index} has no file"))
                })?;
                regions.push(RegionSnapshot {
                    guest_phys_addr: r.guest_phys_addr,
                    size: r.size,
                    user_addr: r.user_addr,
                    mmap_offset: r.mmap_offset,
                    fd: fds.push(file)?,
                });
            }
            Some(regions)
        }
    };
    let mut rings = Vec::with_capacity(device.rings().len());
    for (index, ring) in device.rings().iter().enumerate() {
        let vring = shared.vrings.get(index).ok_or_else(|| {
            HandoverError::Inconsistent(format!("queue {index} has no shared state"))
        })?;
        let call = ring
            .call
            .as_ref()
            .map(|c| fds.push_eventfd(c))
            .transpose()?;
        let st = vring.lock();
        let base = if ring.started {
            if let Some(fault) = st.fault {
                return Err(HandoverError::Broken {
                    queue: vring.name,
                    fault,
                });
            }
            if !st.running {
                return Err(HandoverError::Inconsistent(format!(
                    "queue {} started but not running",
                    vring.name
                )));
            }
            if st.in_flight > 0 {
                return Err(HandoverError::InFlight {
                    queue: vring.name,
                    count: st.in_flight,
                });
            }
            let (next_avail, next_used) = (st.queue.next_avail(), st.queue.next_used());
            if next_avail != next_used {
                return Err(HandoverError::Unreturned {
                    queue: vring.name,
                    next_avail,
                    next_used,
                });
            }
            next_avail
        } else {
            ring.base
        };
        // The kick the data path waits on is the ring's own (the frontend's descriptor).
        let kick = match (&st.kick, ring.started) {
            (Some(k), true) => Some(fds.push_eventfd(k)?),
            _ => None,
        };
        drop(st);
        rings.push(RingSnapshot {
            size: ring.size,
            addrs: ring.addrs.map(|a| RingAddrsSnapshot {
                desc: a.desc,
                avail: a.avail,
                used: a.used,
                log: a.log,
            }),
            base,
            enabled: ring.enabled,
            started: ring.started,
            call,
            kick,
        });
    }
    Ok(ConnectionSnapshot {
        socket,
        features: device.acked_features(),
        protocol_features: device.acked_protocol(),
        memory,
        rings,
        announce: shared.pending_announce(),
        guest_mtu: Some(shared.guest_mtu.load(std::sync::atomic::Ordering::Relaxed))
            .filter(|m| *m > 0),
    })
}

/// Interrupts the guest on every running ring: a notification a coalescing or optimistic
/// policy held back would otherwise be lost with this process (a spurious one is
/// harmless, a lost one stalls the guest until its next frame).
fn flush_notifications(shared: &DeviceShared) {
    for vring in &shared.vrings {
        let st = vring.lock();
        if st.running {
            if let Some(call) = &st.call {
                let _ = call.write(1);
            }
        }
    }
}
