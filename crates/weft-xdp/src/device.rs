//! An AF_XDP port as the daemon sees every port: a [`PortDevice`] with one pair of halves,
//! what it is attached as, and its counters (its own and the kernel's for the socket).

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use weft_switch::{DeviceCounter, DeviceError, DeviceStatus, PortDevice, PortHalves, Unsplit};

use crate::error::XdpError;
use crate::program::{Attachment, Program};
use crate::socket::{self, KernelStats};
use crate::stats::{XdpDrop, XdpStats};

/// What the halves and the device share and the last of them lets go: the attached
/// program (detached on drop) and the interface's claim.
pub(crate) struct Keep {
    // Behind a mutex only so that `Keep` is `Sync` whatever the loader's types are; never
    // locked after `open`.
    _program: Mutex<Program>,
    _claim: Claim,
}

impl Keep {
    pub(crate) fn new(program: Program, claim: Claim) -> Keep {
        Keep {
            _program: Mutex::new(program),
            _claim: claim,
        }
    }
}

/// The interfaces (network namespace, index) that have an AF_XDP port of this process.
static CLAIMED: Mutex<Option<HashSet<(u64, u32)>>> = Mutex::new(None);

/// One interface claimed by one port; released on drop.
pub(crate) struct Claim {
    key: (u64, u32),
}

impl Claim {
    /// Claims `ifindex` in the namespace `netns`, or says it already has a port.
    pub(crate) fn take(netns: u64, ifindex: u32, ifname: &str) -> Result<Claim, XdpError> {
        let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
        let set = claimed.get_or_insert_with(HashSet::new);
        if !set.insert((netns, ifindex)) {
            return Err(XdpError::Busy {
                ifname: ifname.to_string(),
            });
        }
        Ok(Claim {
            key: (netns, ifindex),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = claimed.as_mut() {
            set.remove(&self.key);
        }
    }
}

/// An open AF_XDP port: its halves until taken, its counters, its attachment.
///
/// Dropping it and both halves detaches the XDP program and closes the socket.
pub struct XdpPort {
    pub(crate) ifname: String,
    pub(crate) queue: u32,
    pub(crate) mtu: u32,
    pub(crate) attachment: Attachment,
    pub(crate) zero_copy: bool,
    pub(crate) halves: Unsplit,
    pub(crate) stats: Arc<XdpStats>,
    /// A descriptor of the socket, for the kernel's counters.
    pub(crate) socket: OwnedFd,
    pub(crate) _keep: Arc<Keep>,
}

impl XdpPort {
    /// The interface.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }
    /// The receive queue served.
    pub fn queue(&self) -> u32 {
        self.queue
    }
    /// True when the program runs in the driver (native XDP), false for generic XDP.
    pub fn native(&self) -> bool {
        self.attachment == Attachment::Native
    }
    /// True when the socket is bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }
    /// The port's own counters.
    pub fn stats(&self) -> &Arc<XdpStats> {
        &self.stats
    }
    /// The words `port show` lists: `native` or `generic`, then `zero_copy` or `copy`.
    pub fn mode_words(&self) -> Vec<String> {
        let copy = if self.zero_copy { "zero_copy" } else { "copy" };
        vec![self.attachment.name().to_string(), copy.to_string()]
    }
}

impl PortDevice for XdpPort {
    fn kind(&self) -> &'static str {
        "af_xdp"
    }

    fn mtu(&self) -> u32 {
        self.mtu
    }

    fn take_lanes(&mut self, _lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        self.halves.take()
    }

    fn status(&self) -> DeviceStatus {
        DeviceStatus {
            offloads: self.mode_words(),
            ..DeviceStatus::default()
        }
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        for reason in XdpDrop::ALL {
            visit(DeviceCounter::drop(reason.name(), self.stats.drops(reason)));
        }
        let k: KernelStats = socket::kernel_stats(&self.socket);
        visit(DeviceCounter::drop("xdp_kernel_rx_dropped", k.rx_dropped));
        visit(DeviceCounter::drop(
            "xdp_kernel_rx_ring_full",
            k.rx_ring_full,
        ));
        visit(DeviceCounter::drop(
            "xdp_kernel_rx_invalid",
            k.rx_invalid_descs,
        ));
        visit(DeviceCounter::drop(
            "xdp_kernel_tx_invalid",
            k.tx_invalid_descs,
        ));
        visit(DeviceCounter::event(
            "xdp_kernel_fill_ring_empty",
            k.rx_fill_ring_empty_descs,
        ));
        visit(DeviceCounter::event(
            "xdp_kernel_tx_ring_empty",
            k.tx_ring_empty_descs,
        ));
        visit(DeviceCounter::event(
            "xdp_rx_kicks",
            self.stats.rx_kicks.get(),
        ));
        visit(DeviceCounter::event(
            "xdp_tx_kicks",
            self.stats.tx_kicks.get(),
        ));
        visit(DeviceCounter::event(
            "xdp_tx_bad_completions",
            self.stats.tx_bad_completions.get(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interface_is_claimed_by_one_port_at_a_time() {
        let a = Claim::take(1, 4242, "veth9").unwrap();
        assert!(matches!(
            Claim::take(1, 4242, "veth9"),
            Err(XdpError::Busy { .. })
        ));
        let other_netns = Claim::take(2, 4242, "veth9").unwrap();
        drop(a);
        let again = Claim::take(1, 4242, "veth9").unwrap();
        drop((again, other_netns));
    }
}
