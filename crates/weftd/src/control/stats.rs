//! Counters: `stats`, and the snapshot the metrics endpoint encodes.

use std::collections::BTreeMap;

use weft_control::response::{
    LaneStats as LaneStatsInfo, PortStats, SwitchStats as SwitchStatsInfo,
    WorkerStats as WorkerStatsInfo,
};
use weft_control::{ControlError, Response};
use weft_runtime::WorkerStats;
use weft_switch::{PortCountersSnapshot, SwitchStats};

use super::ports::snapshot_info;
pub use super::ports::DeviceCounters;
use super::Controller;

/// Every counter at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Per switch, by name.
    pub switches: Vec<SwitchSnapshot>,
    /// Per worker.
    pub workers: Vec<WorkerSnapshot>,
}

/// One switch's counters.
#[derive(Debug, Clone)]
pub struct SwitchSnapshot {
    /// Name.
    pub name: String,
    /// Its worker (its first lane's).
    pub worker: usize,
    /// Switch-wide counters.
    pub stats: SwitchStats,
    /// Installed flow rules.
    pub rules: usize,
    /// Per port, in configuration order.
    pub ports: Vec<PortSnapshot>,
    /// Per lane, first lane first; empty with one lane.
    pub lanes: Vec<LaneSnapshot>,
}

/// One lane of a switch on several lanes.
#[derive(Debug, Clone)]
pub struct LaneSnapshot {
    /// The worker that runs it.
    pub worker: usize,
    /// Packets its receive halves took in (a multiqueue port's queues spread over lanes).
    pub rx_packets: u64,
    /// What it exchanged with the other lanes.
    pub exchange: weft_switch::lanes::LaneStats,
}

/// One port's counters.
#[derive(Debug, Clone)]
pub struct PortSnapshot {
    /// Name.
    pub name: String,
    /// False when its device failed.
    pub up: bool,
    /// Its frames (or its guest's MTU) are larger than an overlay port of its switch
    /// carries (`control/mtu.rs`).
    pub mtu_over_overlay: bool,
    /// Counters.
    pub counters: PortCountersSnapshot,
    /// What its device counted itself, whatever its kind (nothing when it failed).
    pub device: DeviceCounters,
}

/// One worker's counters.
#[derive(Debug, Clone)]
pub struct WorkerSnapshot {
    /// Index.
    pub index: usize,
    /// Pinned CPU.
    pub cpu: Option<usize>,
    /// Counters.
    pub stats: WorkerStats,
    /// Its switches.
    pub switches: Vec<String>,
}

impl Controller {
    /// Reads every counter (of one switch, or all). Costs one job per worker.
    pub fn snapshot(&self, only: Option<&str>) -> Result<Snapshot, ControlError> {
        if let Some(name) = only {
            self.switch_rt(name)?;
        }
        let mut per_worker: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (name, rt) in &self.switches {
            for &worker in &rt.workers {
                per_worker.entry(worker).or_default().push(name.clone());
            }
        }
        let mut switch_stats: BTreeMap<String, (SwitchStats, usize)> = BTreeMap::new();
        let mut lane_stats: BTreeMap<String, Vec<LaneSnapshot>> = BTreeMap::new();
        for (&worker, names) in &per_worker {
            let wanted: Vec<String> = names
                .iter()
                .filter(|n| only.is_none_or(|o| o == n.as_str()))
                .cloned()
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let got = self.pool.exec(worker, move |reg, _| {
                wanted
                    .iter()
                    .filter_map(|n| {
                        reg.get(n)
                            .map(|s| (n.clone(), (s.stats(), s.flow_table().len())))
                    })
                    .collect::<Vec<_>>()
            })?;
            // A switch on several lanes answers from each of their workers: add them up.
            for (name, (stats, rules)) in got {
                if self
                    .switches
                    .get(&name)
                    .is_some_and(|rt| rt.workers.len() > 1)
                {
                    lane_stats
                        .entry(name.clone())
                        .or_default()
                        .push(LaneSnapshot {
                            worker,
                            rx_packets: stats.rx_packets,
                            exchange: stats.lane,
                        });
                }
                match switch_stats.get_mut(&name) {
                    Some((sum, _)) => sum.add_lane(&stats),
                    None => {
                        switch_stats.insert(name, (stats, rules));
                    }
                }
            }
        }
        let mut switches = Vec::new();
        for conf in &self.state.switches {
            if only.is_some_and(|o| o != conf.name) {
                continue;
            }
            let rt = self.switch_rt(&conf.name)?;
            let Some((stats, rules)) = switch_stats.remove(&conf.name) else {
                continue;
            };
            let overlay = super::mtu::overlay_limit(conf, &rt.ports);
            let ports = conf
                .ports
                .iter()
                .filter_map(|p| {
                    let prt = rt.ports.get(&p.name)?;
                    let device = prt.device.device.as_ref();
                    let guest_mtu = device.status().peer_mtu;
                    let warned =
                        super::mtu::warning(&p.kind, device.mtu(), guest_mtu, overlay.as_ref());
                    Some(PortSnapshot {
                        name: p.name.clone(),
                        up: prt.failed.is_none(),
                        mtu_over_overlay: prt.failed.is_none() && warned.is_some(),
                        counters: prt.counters(),
                        device: DeviceCounters::read(prt.device.device.as_ref()),
                    })
                })
                .collect();
            let mut lanes = lane_stats.remove(&conf.name).unwrap_or_default();
            lanes.sort_by_key(|l| rt.workers.iter().position(|x| *x == l.worker));
            switches.push(SwitchSnapshot {
                name: conf.name.clone(),
                worker: rt.home(),
                stats,
                rules,
                ports,
                lanes,
            });
        }
        let workers = (0..self.pool.len())
            .filter_map(|index| {
                let (stats, cpu) = self.pool.stats(index)?;
                Some(WorkerSnapshot {
                    index,
                    cpu,
                    stats,
                    switches: per_worker.get(&index).cloned().unwrap_or_default(),
                })
            })
            .collect();
        Ok(Snapshot { switches, workers })
    }

    pub(super) fn stats(&self, only: Option<&str>) -> Result<Response, ControlError> {
        let snap = self.snapshot(only)?;
        let switches = snap
            .switches
            .iter()
            .map(|s| SwitchStatsInfo {
                name: s.name.clone(),
                batches: s.stats.batches,
                rx_packets: s.stats.rx_packets,
                fdb_entries: s.stats.fdb_entries,
                fdb_moves: s.stats.fdb_moves,
                mac_flap_episodes: s.stats.mac_flap_episodes,
                flow_cache_hits: s.stats.flow_cache.hits,
                flow_cache_misses: s.stats.flow_cache.misses,
                upcalls: s.stats.upcalls.queued,
                ports: s
                    .ports
                    .iter()
                    .map(|p| PortStats {
                        name: p.name.clone(),
                        counters: snapshot_info(&p.counters, &p.device.drops),
                    })
                    .collect(),
                lanes: s
                    .lanes
                    .iter()
                    .enumerate()
                    .map(|(lane, l)| LaneStatsInfo {
                        lane,
                        worker: l.worker,
                        rx_packets: l.rx_packets,
                        posted: l.exchange.posted,
                        lost: l.exchange.lost,
                        applied: l.exchange.applied,
                        stale: l.exchange.stale,
                    })
                    .collect(),
            })
            .collect();
        let workers = snap
            .workers
            .iter()
            .map(|w| WorkerStatsInfo {
                id: w.index,
                cpu: w.cpu,
                busy_fraction: w.stats.busy_fraction(),
                batches: w.stats.busy_passes,
                switches: w.switches.clone(),
            })
            .collect();
        Ok(Response::Stats { switches, workers })
    }
}
