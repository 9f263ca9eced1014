//! The controller's side of systemd's file descriptor store (`crate::systemd::fd_store`):
//! after every request, and once when weftd is ready, the store holds a record of each
//! port's device as it is now; on a clean stop the records that would not work after it
//! go.

use std::sync::Arc;

use super::Controller;
use crate::devices::Keep;
use crate::systemd::fd_store::PortNow;
use crate::systemd::FdStore;

impl Controller {
    /// From now on, keeps a record of every port's device in `store` (in line at once).
    pub fn use_fd_store(&mut self, store: FdStore) {
        self.fd_store = Some(store);
        self.sync_fd_store();
    }

    /// Brings the store in line with the ports: a new record for each port whose device
    /// is not the one recorded, none for ports that went. Records are only built for
    /// devices that changed, so a request that changed no port costs a walk of the ports.
    pub(super) fn sync_fd_store(&mut self) {
        let Some(store) = self.fd_store.as_mut() else {
            return;
        };
        let ports = self
            .switches
            .iter()
            .flat_map(|(switch, rt)| {
                rt.ports.iter().map(move |(port, p)| {
                    // The device's address names it: a port whose device was replaced
                    // (re-created, moved to other lanes) gets a new record.
                    let identity = Arc::as_ptr(&p.device.device).cast::<u8>() as usize;
                    ((switch.clone(), port.clone()), identity, &p.device.keep)
                })
            })
            .map(|(key, device, keep)| {
                let record = if store.holds(&key, device) {
                    None
                } else {
                    keep.record().unwrap_or_else(|e| {
                        tracing::warn!(switch = %key.0, port = %key.1, error = %e, "cannot describe the port's device for systemd's file descriptor store");
                        None
                    })
                };
                PortNow {
                    key,
                    device,
                    record,
                }
            })
            .collect();
        store.sync(ports);
    }

    /// A clean stop: the records of vhost-user and memif listeners go (their socket files are
    /// removed with the ports, so a listener kept would serve no path); the others stay,
    /// for a systemd that keeps its store across a restart (`FileDescriptorStorePreserve=`).
    pub(super) fn release_fd_store(&mut self) {
        let Some(store) = self.fd_store.as_mut() else {
            return;
        };
        for (switch, rt) in &self.switches {
            for (port, p) in &rt.ports {
                if matches!(p.device.keep, Keep::Vhost(_) | Keep::Memif(_)) {
                    store.remove(switch, port);
                }
            }
        }
    }
}
