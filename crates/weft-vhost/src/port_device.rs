//! A vhost-user port as the daemon sees every port ([`PortDevice`]): its halves per lane,
//! the offloads its frontend negotiated, whether one is connected and its rings run, which
//! rings are broken, and what each queue counted.

use weft_switch::{DeviceCounter, DeviceError, DeviceStatus, Link, PortDevice, PortHalves};

use crate::counters::{FrameDrop, QueueFault, QueueStats, BATCH_BUCKETS};
use crate::memory::{LogRefusal, MemoryRefusal};
use crate::{queue_name, VhostUserPort};

impl PortDevice for VhostUserPort {
    fn kind(&self) -> &'static str {
        "vhost_user"
    }

    fn mtu(&self) -> u32 {
        u32::try_from(self.configured_mtu()).unwrap_or(u32::MAX)
    }

    fn take_lanes(&mut self, lanes: usize) -> Result<Vec<PortHalves>, DeviceError> {
        let halves = self
            .take_lane_halves(lanes)
            .map_err(|e| DeviceError::Split(e.to_string()))?;
        Ok(halves
            .into_iter()
            .map(|(rx, tx)| PortHalves::pair(rx, tx))
            .collect())
    }

    fn status(&self) -> DeviceStatus {
        let caps = self.caps();
        let offloads = [
            ("csum", caps.partial_csum),
            ("tso4", caps.tso4),
            ("tso6", caps.tso6),
            ("uso", caps.uso),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| name.to_string())
        .collect();
        // A ring broken now (until the frontend restarts it), named with why.
        let broken = self
            .queue_status()
            .iter()
            .enumerate()
            .filter_map(|(index, q)| {
                q.fault
                    .map(|f| format!("{}:{}", queue_name(index), f.counter_name()))
            })
            .collect();
        let stats = self.stats();
        DeviceStatus {
            offloads,
            link: Some(if self.is_connected() {
                Link::Connected
            } else {
                Link::Disconnected
            }),
            running: self.is_running(),
            broken,
            activity: if stats.logging {
                vec!["logging".into()]
            } else {
                Vec::new()
            },
            peer_mtu: stats.guest_mtu,
        }
    }

    fn visit_counters(&self, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
        let s = self.stats();
        // Drops, both directions together, by reason.
        for i in 0..s.from_guest.drops.len() {
            let n = s.from_guest.drops.get(i).copied().unwrap_or(0)
                + s.to_guest.drops.get(i).copied().unwrap_or(0);
            let name = format!("vhost_{}", FrameDrop::counter_name(i));
            visit(DeviceCounter::drop(&name, n));
        }
        let faults: u64 = QueueFault::ALL
            .into_iter()
            .map(|f| s.from_guest.faulted(f) + s.to_guest.faulted(f))
            .sum();
        visit(DeviceCounter::drop("vhost_queue_faults", faults));
        for (queue, q) in [("to_guest", &s.to_guest), ("from_guest", &s.from_guest)] {
            queue_counters(queue, q, visit);
        }
        // How the guest's frames reached the switch: lent in place, or copied first.
        visit(DeviceCounter::event(
            "vhost_from_guest_lent",
            s.from_guest.lent,
        ));
        visit(DeviceCounter::event(
            "vhost_from_guest_bounced",
            s.from_guest.bounced,
        ));
        // Memory tables its frontends sent that were refused, by reason (each drops that
        // frontend; the port waits for the next).
        for r in MemoryRefusal::ALL {
            let n = s.memory_refusals.get(r.index()).copied().unwrap_or(0);
            let name = format!("vhost_memory_refused_{}", r.counter_name());
            visit(DeviceCounter::event(&name, n));
        }
        // Live migration: the pages written while logging, and the guests announced here.
        visit(DeviceCounter::event("vhost_log_bytes", s.log_bytes));
        visit(DeviceCounter::event("vhost_pages_logged", s.pages_logged));
        visit(DeviceCounter::event(
            "vhost_pages_beyond_log",
            s.pages_beyond_log,
        ));
        visit(DeviceCounter::event("vhost_announcements", s.announcements));
        visit(DeviceCounter::event("vhost_mtu_refused", s.mtu_refusals));
        for r in LogRefusal::ALL {
            let n = s.log_refusals.get(r.index()).copied().unwrap_or(0);
            let name = format!("vhost_refused_{}", r.counter_name());
            visit(DeviceCounter::event(&name, n));
        }
        if s.pairs.len() > 1 {
            // With several queue pairs: how the frames spread over them (and so over the
            // switch's lanes), and each queue's kicks and notifications (the batch
            // histograms stay totals).
            for (k, pair) in s.pairs.iter().enumerate() {
                for (queue, q) in [
                    ("to_guest", &pair.to_guest),
                    ("from_guest", &pair.from_guest),
                ] {
                    let name = format!("vhost_pair{k}_{queue}_frames");
                    visit(DeviceCounter::event(&name, q.frames));
                    for (counter, n) in event_counters(q) {
                        let name = format!("vhost_pair{k}_{queue}_{counter}");
                        visit(DeviceCounter::event(&name, n));
                    }
                }
            }
        }
    }
}

/// A queue's notification and kick counters, by name.
fn event_counters(q: &QueueStats) -> [(&'static str, u64); 5] {
    [
        ("notifications", q.notifications),
        ("notifications_suppressed", q.notifications_suppressed),
        ("notifications_held", q.notifications_held),
        ("kicks", q.kicks),
        ("dispatch_changes", q.dispatch_changes),
    ]
}

/// One queue's counters as `vhost_<queue>_<counter>`, batch sizes as
/// `vhost_<queue>_batches_<lowest size>`.
fn queue_counters(queue: &str, q: &QueueStats, visit: &mut dyn FnMut(DeviceCounter<'_>)) {
    for (counter, n) in event_counters(q) {
        visit(DeviceCounter::event(&format!("vhost_{queue}_{counter}"), n));
    }
    // The work the guest asked of the port, and how often its budget cut a look short.
    visit(DeviceCounter::event(
        &format!("vhost_{queue}_descriptors"),
        q.descriptors,
    ));
    visit(DeviceCounter::event(
        &format!("vhost_{queue}_budget_cuts"),
        q.budget_cuts,
    ));
    // Why its rings broke (each breaks once, until the frontend restarts it).
    for f in QueueFault::ALL {
        let name = format!("vhost_{queue}_fault_{}", f.counter_name());
        visit(DeviceCounter::event(&name, q.faulted(f)));
    }
    for (i, n) in q.batch_sizes.iter().enumerate().take(BATCH_BUCKETS) {
        let name = format!("vhost_{queue}_batches_{}", 1u64 << i);
        visit(DeviceCounter::event(&name, *n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(queue: &str, q: &QueueStats) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        queue_counters(queue, q, &mut |c| out.push((c.name.to_string(), c.value)));
        out
    }

    #[test]
    fn virtqueues_are_named_by_pair_and_direction_as_the_guest_sees_them() {
        let names: Vec<&str> = (0..5).map(queue_name).collect();
        assert_eq!(names, ["rx0", "tx0", "rx1", "tx1", "rx2"]);
    }

    #[test]
    fn a_queue_counts_each_fault_under_its_own_name() {
        let q = QueueStats {
            faults: std::array::from_fn(|i| i as u64 + 1),
            ..QueueStats::default()
        };
        let out = counters("from_guest", &q);
        let get = |name: &str| out.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(
            get("vhost_from_guest_fault_avail_index_out_of_range"),
            Some(1)
        );
        assert_eq!(
            get("vhost_from_guest_fault_memory_truncated"),
            Some(QueueFault::ALL.len() as u64)
        );
    }

    #[test]
    fn a_queue_reports_the_descriptors_it_read_and_its_budget_cuts() {
        let q = QueueStats {
            descriptors: 4096,
            budget_cuts: 3,
            ..QueueStats::default()
        };
        let out = counters("from_guest", &q);
        let get = |name: &str| out.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        assert_eq!(get("vhost_from_guest_descriptors"), Some(4096));
        assert_eq!(get("vhost_from_guest_budget_cuts"), Some(3));
    }

    #[test]
    fn a_waiting_port_lists_its_memory_refusals_and_reads_disconnected() {
        let dir = tempfile::tempdir().unwrap();
        let port =
            VhostUserPort::listen(dir.path().join("p.sock"), crate::VhostPortConfig::default())
                .unwrap();
        let mut counters = Vec::new();
        port.visit_counters(&mut |c| counters.push((c.name.to_string(), c.value, c.class)));
        for r in MemoryRefusal::ALL {
            let name = format!("vhost_memory_refused_{}", r.counter_name());
            assert!(
                counters.iter().any(|(n, v, _)| *n == name && *v == 0),
                "{name} in {counters:?}"
            );
        }
        assert!(counters
            .iter()
            .any(|(n, _, c)| n == "vhost_queue_faults" && *c == weft_switch::CounterClass::Drop));
        assert_eq!(port.status().words(), ["disconnected"]);
        assert_eq!(PortDevice::mtu(&port), 1500);
    }

    #[test]
    fn the_halves_are_given_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut port =
            VhostUserPort::listen(dir.path().join("p.sock"), crate::VhostPortConfig::default())
                .unwrap();
        assert_eq!(port.take_lanes(1).map(|l| l.len()).ok(), Some(1));
        assert!(port.take_lanes(1).is_err());
    }
}
