//! The control plane's part of a takeover: holding the workers between batches, reading
//! what the switches learned, and giving each port's device away (see `crate::takeover`);
//! on the other side, teaching the new switches what the old ones had learned.

use std::time::Duration;

use weft_control::ControlError;
use weft_runtime::PausedWorker;
use weft_switch::{PortId, Timestamp};

use super::{internal, Controller};
use crate::devices::Leaving;
use crate::takeover::protocol::{LearnedMac, SwitchFdb};

/// Workers held between batches, and what their switches had learned when they stopped.
/// Dropping it lets them carry on.
pub struct Held {
    /// Each worker's hold.
    pub workers: Vec<PausedWorker>,
    /// Each switch's learned entries.
    pub fdb: Vec<SwitchFdb>,
}

impl Held {
    /// Lets every worker carry on.
    pub fn resume(self) {
        for w in self.workers {
            w.resume();
        }
    }
}

type RawEntry = (u16, weft_packet::MacAddr, PortId, u64);

impl Controller {
    /// Holds every worker between two batches (for at most `max`), reading each switch's
    /// learned entries on its first lane's worker as it stops.
    pub fn hold_workers(&self, max: Duration) -> Result<Held, ControlError> {
        let mut workers = Vec::new();
        let mut learned: Vec<Vec<(String, Vec<RawEntry>)>> = Vec::new();
        for index in 0..self.pool.len() {
            let (entries, paused) = self.pool.pause_with(index, max, |reg, now| {
                reg.iter_mut()
                    .map(|sw| {
                        sw.sync_lanes(now);
                        let entries = sw
                            .fdb()
                            .entries()
                            .filter(|e| !e.is_static && !e.is_expired(now))
                            .map(|e| {
                                let age = e.age(now).unwrap_or_default();
                                (
                                    e.vlan,
                                    e.mac,
                                    e.port,
                                    u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                                )
                            })
                            .collect();
                        (sw.name().to_string(), entries)
                    })
                    .collect()
            })?;
            workers.push(paused);
            learned.push(entries);
        }
        let mut fdb = Vec::new();
        for (name, rt) in &self.switches {
            let home = learned
                .get(rt.home())
                .and_then(|sws| sws.iter().find(|(n, _)| n == name));
            let Some((_, entries)) = home else { continue };
            let names: std::collections::BTreeMap<PortId, &String> =
                rt.ports.iter().map(|(n, p)| (p.id, n)).collect();
            fdb.push(SwitchFdb {
                switch: name.clone(),
                entries: entries
                    .iter()
                    .filter_map(|&(vlan, mac, port, age_ms)| {
                        Some(LearnedMac {
                            vlan,
                            mac,
                            port: (*names.get(&port)?).clone(),
                            age_ms,
                        })
                    })
                    .collect(),
            });
        }
        Ok(Held { workers, fdb })
    }

    /// Every port's device on its way to the new weftd (with the workers held): where it
    /// goes and what travels. Dropping one gives its device back to this weftd (a
    /// vhost-user port's control thread and a TCP link's thread were parked).
    pub fn carry_ports(&self) -> Result<Vec<(String, String, Leaving<'_>)>, ControlError> {
        let mut out = Vec::new();
        for (switch, rt) in &self.switches {
            for (port, p) in &rt.ports {
                let leaving = p.device.keep.carry().map_err(|e| {
                    internal(format!(
                        "port {switch}:{port} cannot be handed over now: {e}"
                    ))
                })?;
                out.push((switch.clone(), port.clone(), leaving));
            }
        }
        Ok(out)
    }

    /// Teaches the switches what the old weftd's had learned (entries for ports they do not
    /// have are skipped); returns how many entries were learned.
    pub fn restore_learned(&self, fdb: &[SwitchFdb]) -> usize {
        let mut restored = 0;
        for learned in fdb {
            let Some(rt) = self.switches.get(&learned.switch) else {
                continue;
            };
            let mut entries: Vec<(u16, weft_packet::MacAddr, PortId, u64)> = learned
                .entries
                .iter()
                .filter_map(|e| Some((e.vlan, e.mac, rt.ports.get(&e.port)?.id, e.age_ms)))
                .collect();
            // Oldest first: the FDB's clock only moves forward.
            entries.sort_by_key(|e| std::cmp::Reverse(e.3));
            let counts = self
                .pool
                .on_lanes(&rt.workers, &learned.switch, move |sw, now| {
                    entries
                        .iter()
                        .filter(|&&(vlan, mac, port, age_ms)| {
                            let seen =
                                Timestamp(now.0.saturating_sub(age_ms.saturating_mul(1_000_000)));
                            sw.restore_learned(vlan, mac, port, seen)
                        })
                        .count()
                });
            restored += counts.ok().and_then(|c| c.first().copied()).unwrap_or(0);
        }
        restored
    }
}
