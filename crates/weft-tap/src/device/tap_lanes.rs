//! A TAP port of one or more queues as the daemon sees every port: split over the switch's
//! lanes as a vhost-user port's queue pairs are.
//!
//! Queue `q` is received on lane `q % lanes`, so a lane reads every queue that falls to
//! it through one receive half; lane `l` transmits through queue `l % queues`, its own when
//! there are at least as many queues as lanes, else shared (behind one lock) with the
//! other lanes that fall to the same queue. The kernel spreads the host's flows over the
//! queues (by flow hash), so each lane switches its own share of them. A one-queue TAP
//! gives one pair, which the daemon puts on the port's home lane.

use std::fs::File;
use std::sync::{Arc, Mutex};

use weft_switch::lanes::SharedTx;
use weft_switch::{
    DeviceCounter, DeviceError, DeviceStatus, PortCaps, PortDevice, PortHalves, PortTx,
};

use crate::stats::{PortDrop, PortStats};
use crate::tap::rx::RxQueue;
use crate::tap::{TapQueue, TapRx, TapTx};

/// One queue, until the halves are made.
struct QueuePart {
    file: Arc<File>,
    caps: PortCaps,
    rx_frames: usize,
}

/// A TAP port over one or more queues of one device.
pub struct TapDevice {
    mtu: u32,
    offloads: Vec<String>,
    /// The queues until the halves are taken. (Behind a mutex only so that the device stays
    /// `Sync`; taken through `&mut`, never locked.)
    parts: Mutex<Option<Vec<QueuePart>>>,
    /// Each queue's counters, written by the halves that read and write it.
    stats: Vec<Arc<PortStats>>,
}

impl TapDevice {
    /// A port over `queues` (at least one), whose device has `mtu` and offloads named
    /// `offloads`.
    pub(crate) fn new(queues: Vec<TapQueue>, mtu: u32, offloads: Vec<String>) -> TapDevice {
        let stats = queues
            .iter()
            .map(|_| Arc::new(PortStats::default()))
            .collect();
        let parts = queues
            .into_iter()
            .map(|q| {
                let (file, caps, rx_frames) = q.into_parts();
                QueuePart {
                    file: Arc::new(file),
                    caps,
                    rx_frames,
                }
            })
            .collect();
        TapDevice {
            mtu,
            offloads,
            parts: Mutex::new(Some(parts)),
            stats,
        }
    }

    /// How many queues it has.
    pub fn queues(&self) -> usize {
        self.stats.len()
    }

    /// The counters of every queue, added up.
    pub fn totals(&self) -> crate::PortStatsSnapshot {
        let mut total = crate::PortStatsSnapshot::default();
        for s in &self.stats {
            total.add(&s.snapshot());
        }
        total
    }
}

impl PortDevice for TapDevice {
    fn kind(&self) -> &'static str {
        "tap"
    }

    fn mtu(&self) -> u32 {
        self.mtu
    }

    fn take_lanes(&mut self, lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        let slot = match self.parts.get_mut() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        let parts = slot.take().ok_or(DeviceError::AlreadySplit)?;
        split(parts, &self.stats, lanes)
            .map_err(|e| DeviceError::Split(format!("cannot watch the TAP's queues together: {e}")))
    }

    fn status(&self) -> DeviceStatus {
        DeviceStatus {
            offloads: self.offloads.clone(),
            ..DeviceStatus::default()
        }
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        for reason in PortDrop::ALL {
            let n = self.stats.iter().map(|s| s.drops(reason)).sum();
            visit(DeviceCounter::drop(reason.name(), n));
        }
    }
}

/// The halves: one pair for one queue; else one per lane (see the module's comment).
fn split(
    parts: Vec<QueuePart>,
    stats: &[Arc<PortStats>],
    lanes: usize,
) -> std::io::Result<Vec<PortHalves>> {
    let queues = parts.len();
    let lanes = if queues == 1 { 1 } else { lanes.max(1) };
    let stats_of = |q: usize| stats.get(q).cloned().unwrap_or_default();
    // Transmit halves: queue q serves lanes q, q + queues, ... (at most one when there are
    // at least as many queues as lanes).
    let mut tx: Vec<Option<Box<dyn PortTx>>> = (0..lanes).map(|_| None).collect();
    for (q, part) in parts.iter().enumerate().take(lanes) {
        let half = TapTx::new(Arc::clone(&part.file), part.caps, stats_of(q));
        let users: Vec<usize> = (q..lanes).step_by(queues).collect();
        if users.len() == 1 {
            if let Some(slot) = tx.get_mut(q) {
                *slot = Some(Box::new(half));
            }
        } else {
            let shared = SharedTx::share(Box::new(half), users.len());
            for (lane, shared) in users.into_iter().zip(shared) {
                if let Some(slot) = tx.get_mut(lane) {
                    *slot = Some(Box::new(shared));
                }
            }
        }
    }
    let mtu = parts.first().map_or(0, |p| p.caps.mtu);
    let frames = parts.first().map_or(1, |p| p.rx_frames);
    let mut halves = Vec::with_capacity(lanes);
    for (lane, tx) in tx.into_iter().enumerate() {
        let mine: Vec<RxQueue> = parts
            .iter()
            .enumerate()
            .filter(|(q, _)| q % lanes == lane)
            .map(|(q, p)| RxQueue {
                file: Arc::clone(&p.file),
                stats: stats_of(q),
            })
            .collect();
        let rx = if mine.is_empty() {
            None
        } else {
            Some(Box::new(TapRx::over(mine, mtu, frames)?) as Box<dyn weft_switch::PortRx>)
        };
        let Some(tx) = tx else {
            // Every lane was given a transmit half above; none is left without.
            return Err(std::io::Error::other("a lane without a transmit queue"));
        };
        halves.push(PortHalves { rx, tx });
    }
    Ok(halves)
}

#[cfg(test)]
mod tests;
