//! A switch instance: one L2 domain with its ports, FDB, flow table and flow cache, and the
//! three-stage batch pipeline (VALE §4): [`classify`] collects a port's burst, reads headers
//! and decides each packet's destinations; [`deliver`] hands every destination its packets
//! once per batch.
//!
//! Ownership: a `Switch` is driven by one thread (`&mut self`); counters are readable from
//! anywhere through [`PortCounters`] handles.

#[cfg(test)]
mod batch_tests;
mod classify;
mod deliver;
#[cfg(test)]
mod lane_tests;
mod lanes;
#[cfg(test)]
mod offload_tests;
#[cfg(test)]
mod own_frames_tests;
mod peers;
#[cfg(test)]
mod policy_proptests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod split_frame_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod too_big_tests;
#[cfg(test)]
mod upcall_tests;
mod upcalls;

use std::sync::Arc;

use arrayvec::ArrayVec;

use crate::capture::{CaptureBuffer, CaptureDirection};
use crate::counters::{DropCounters, PortCounters};
use crate::fdb::{Fdb, FdbConfig, FdbError, FlapEpisode};
use crate::flow_cache::{FlowCache, FlowCacheStats};
use crate::flow_table::{FlowError, FlowRule, FlowTable, RuleId};
use crate::policy::{MacLimit, PortSecurity, StormPolicy};
use crate::port::{
    PortCaps, PortHalves, PortRx, PortTx, RxBatch, RxFrame, DEFAULT_BATCH, MAX_BATCH,
};
use crate::types::{PortId, Timestamp, MAX_PORTS};
use crate::upcall::{Upcall, UpcallHub, UpcallQueue, UpcallStats};

use crate::vlan::PortVlanMode;
pub use deliver::{PacketOutError, PacketOutStats, Pipeline};

pub use classify::BatchScratch;

/// The bytes of the frames of one batch, in arrival order.
pub(crate) type Frames<'a> = ArrayVec<RxFrame<'a>, MAX_BATCH>;

/// Settings of one switch.
#[derive(Debug, Clone)]
pub struct SwitchConfig {
    /// Frames per receive batch, 1..=1024 (default [`DEFAULT_BATCH`], 128).
    pub batch_size: usize,
    /// The learning FDB's bounds and ageing.
    pub fdb: FdbConfig,
    /// Most flow rules (default 4096).
    pub max_rules: usize,
    /// Flow cache entries (default 4096).
    pub flow_cache_capacity: usize,
    /// Upcalls queued for the control plane (default 256).
    pub upcall_queue_len: usize,
    /// Bytes of each frame kept in an upcall (default 2048).
    pub upcall_snaplen: usize,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            batch_size: DEFAULT_BATCH,
            fdb: FdbConfig::default(),
            max_rules: 4096,
            flow_cache_capacity: 4096,
            upcall_queue_len: 256,
            upcall_snaplen: 2048,
        }
    }
}

/// Per-port settings.
#[derive(Debug, Clone)]
pub struct PortOptions {
    /// VLAN mode (default: plain, frames pass as they are).
    pub vlan: PortVlanMode,
    /// Send unknown-unicast floods to this port (default true). Broadcast and multicast
    /// are always flooded.
    pub flood_unknown_unicast: bool,
    /// Learn source addresses seen on this port (default true).
    pub learning: bool,
    /// What the port may send (default: anything).
    pub security: PortSecurity,
    /// How fast the port may flood (default: unlimited).
    pub storm: StormPolicy,
    /// A bound on the port's learned MACs (default: only the switch-wide per-port bound).
    pub mac_limit: Option<MacLimit>,
}

impl Default for PortOptions {
    fn default() -> Self {
        PortOptions {
            vlan: PortVlanMode::plain(),
            flood_unknown_unicast: true,
            learning: true,
            security: PortSecurity::default(),
            storm: StormPolicy::default(),
            mac_limit: None,
        }
    }
}

/// Errors from switch management calls.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// The batch size is outside 1..=1024.
    #[error("batch size {0} is out of range: use 1 to {MAX_BATCH}")]
    BadBatchSize(usize),
    /// A port with that name exists.
    #[error("port {0:?} already exists on this switch")]
    DuplicatePort(String),
    /// The port name is empty or too long.
    #[error("invalid port name {0:?}: use 1 to 64 characters without ':' or whitespace")]
    BadPortName(String),
    /// No room for another port.
    #[error("the switch already has {MAX_PORTS} ports")]
    TooManyPorts,
    /// No such port.
    #[error("no port {0}")]
    NoSuchPort(PortId),
    /// The FDB refused the change.
    #[error(transparent)]
    Fdb(#[from] FdbError),
    /// The flow table refused the rule.
    #[error(transparent)]
    Flow(#[from] FlowError),
}

/// Counters of the switch as a whole.
#[derive(Debug, Clone, Default)]
pub struct SwitchStats {
    /// Batches processed.
    pub batches: u64,
    /// Packets received (all ports).
    pub rx_packets: u64,
    /// FDB size.
    pub fdb_entries: usize,
    /// Learned entries that moved to another port.
    pub fdb_moves: u64,
    /// MAC flap episodes: an address found flapping and held on its port.
    pub mac_flap_episodes: u64,
    /// Flow cache counters.
    pub flow_cache: FlowCacheStats,
    /// Upcall counters.
    pub upcalls: UpcallStats,
    /// Frames a controller sent (packet-out).
    pub packet_out: PacketOutStats,
    /// What this lane exchanged with the others (zeros for a switch of one lane).
    pub lane: crate::lanes::LaneStats,
}

impl SwitchStats {
    /// Adds another lane's counters (the FDB's figures stay: every lane holds the same
    /// table and sees the same moves).
    pub fn add_lane(&mut self, other: &SwitchStats) {
        self.batches += other.batches;
        self.rx_packets += other.rx_packets;
        let (c, o) = (&mut self.flow_cache, &other.flow_cache);
        c.hits += o.hits;
        c.misses += o.misses;
        c.stale_misses += o.stale_misses;
        c.insertions += o.insertions;
        c.evictions += o.evictions;
        self.upcalls.add(&other.upcalls);
        self.packet_out.add(&other.packet_out);
        let (l, o) = (&mut self.lane, &other.lane);
        l.posted += o.posted;
        l.lost += o.lost;
        l.applied += o.applied;
        l.stale += o.stale;
    }
}

/// One port as the switch keeps it.
pub(crate) struct PortSlot {
    pub(crate) name: String,
    /// Running captures (usually none).
    pub(crate) captures: Vec<(CaptureDirection, Arc<CaptureBuffer>)>,
    pub(crate) tx: Box<dyn PortTx>,
    pub(crate) caps: PortCaps,
    /// The port's [`PortTx::caps_generation`] when `caps` was read.
    pub(crate) caps_generation: u64,
    pub(crate) options: PortOptions,
    pub(crate) counters: Arc<PortCounters>,
}

/// A named switch instance. See the module documentation.
pub struct Switch {
    name: String,
    config: SwitchConfig,
    ports: Vec<Option<PortSlot>>,
    /// Receive halves, apart from the slots so that one can be read while others transmit.
    rx: Vec<Option<Box<dyn PortRx>>>,
    /// Ports came or went, or one's capabilities changed, since the receive halves were
    /// last told what their peers accept ([`PortRx::peers_accept`]).
    peers_changed: bool,
    fdb: Fdb,
    table: FlowTable,
    cache: FlowCache<crate::decision::Decision>,
    /// Bumped whenever the port set or a port's options change.
    port_generation: u64,
    /// Ports added plus ports removed so far: equal on every lane that has seen the same
    /// changes, so a learned entry posted under one count is valid under the same count.
    membership: u64,
    /// Set when the switch is one lane of several (`crate::lanes`).
    lane: Option<lanes::LaneState>,
    upcalls: UpcallQueue,
    /// Where upcalls go after each batch; without one they wait for `drain_upcalls`.
    upcall_hub: Option<Arc<UpcallHub>>,
    packet_out: PacketOutStats,
    /// Set only while a controller's frame goes to the learning bridge alone
    /// (`Pipeline::Normal`).
    rules_bypassed: bool,
    batch: RxBatch,
    scratch: BatchScratch,
    deliver: deliver::DeliverScratch,
    drops: DropCounters,
    batches: u64,
    rx_packets: u64,
    /// Cache hits whose decision differed from the uncached one (tests only; must stay 0).
    #[cfg(test)]
    cache_mismatches: u64,
    /// Stage 3 always builds per-destination lists (tests compare it with the straight path).
    #[cfg(test)]
    lists_only: bool,
}

impl Switch {
    /// A switch with no ports.
    pub fn new(name: &str, config: SwitchConfig) -> Result<Switch, SwitchError> {
        if !(1..=MAX_BATCH).contains(&config.batch_size) {
            return Err(SwitchError::BadBatchSize(config.batch_size));
        }
        let fdb = Fdb::new(config.fdb)?;
        Ok(Switch {
            name: name.to_string(),
            table: FlowTable::new(config.max_rules),
            cache: FlowCache::new(config.flow_cache_capacity),
            upcalls: UpcallQueue::new(config.upcall_queue_len, config.upcall_snaplen),
            upcall_hub: None,
            packet_out: PacketOutStats::default(),
            rules_bypassed: false,
            batch: RxBatch::new(config.batch_size),
            scratch: BatchScratch::new(config.batch_size),
            deliver: deliver::DeliverScratch::new(config.batch_size),
            fdb,
            config,
            ports: Vec::new(),
            rx: Vec::new(),
            peers_changed: true,
            port_generation: 0,
            membership: 0,
            lane: None,
            drops: DropCounters::default(),
            batches: 0,
            rx_packets: 0,
            #[cfg(test)]
            cache_mismatches: 0,
            #[cfg(test)]
            lists_only: false,
        })
    }

    /// The switch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The switch's settings.
    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    /// Attaches a port. Its receive half may be `None` when another thread polls it (and
    /// calls [`Switch::process`] with its own receive half).
    pub fn add_port(
        &mut self,
        name: &str,
        rx: Option<Box<dyn PortRx>>,
        tx: Box<dyn PortTx>,
        options: PortOptions,
    ) -> Result<PortId, SwitchError> {
        if name.is_empty()
            || name.len() > 64
            || name.contains(|c: char| c == ':' || c.is_whitespace())
        {
            return Err(SwitchError::BadPortName(name.to_string()));
        }
        if self.port_id(name).is_some() {
            return Err(SwitchError::DuplicatePort(name.to_string()));
        }
        let index = match self.ports.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.ports.len() < MAX_PORTS => {
                self.ports.push(None);
                self.rx.push(None);
                self.ports.len() - 1
            }
            None => return Err(SwitchError::TooManyPorts),
        };
        let id = PortId(u16::try_from(index).map_err(|_| SwitchError::TooManyPorts)?);
        let caps = tx.caps();
        let caps_generation = tx.caps_generation();
        self.fdb
            .set_port_mac_limit(id, options.mac_limit.map(|l| l.max));
        self.ports[index] = Some(PortSlot {
            caps_generation,
            name: name.to_string(),
            captures: Vec::new(),
            tx,
            caps,
            options,
            counters: Arc::new(PortCounters::default()),
        });
        self.rx[index] = rx;
        self.port_generation += 1;
        self.membership += 1;
        self.peers_changed = true;
        Ok(id)
    }

    /// Detaches a port, forgetting what the FDB learned on it. Returns its halves.
    pub fn remove_port(&mut self, id: PortId) -> Result<PortHalves, SwitchError> {
        let slot = self
            .ports
            .get_mut(id.index())
            .and_then(Option::take)
            .ok_or(SwitchError::NoSuchPort(id))?;
        let rx = self.rx.get_mut(id.index()).and_then(Option::take);
        self.fdb.flush(crate::fdb::FlushFilter::Port(id));
        self.fdb.set_port_mac_limit(id, None);
        self.port_generation += 1;
        self.membership += 1;
        self.peers_changed = true;
        Ok(PortHalves { rx, tx: slot.tx })
    }

    /// Changes a port's options (VLAN mode, flooding, learning).
    pub fn set_port_options(
        &mut self,
        id: PortId,
        options: PortOptions,
    ) -> Result<(), SwitchError> {
        let limit = options.mac_limit.map(|l| l.max);
        let slot = self.slot_mut(id)?;
        slot.options = options;
        self.fdb.set_port_mac_limit(id, limit);
        self.port_generation += 1;
        Ok(())
    }

    /// The id of the port called `name`.
    pub fn port_id(&self, name: &str) -> Option<PortId> {
        self.ports
            .iter()
            .position(|p| p.as_ref().is_some_and(|p| p.name == name))
            .and_then(|i| u16::try_from(i).ok())
            .map(PortId)
    }

    /// Ports: id and name.
    pub fn ports(&self) -> impl Iterator<Item = (PortId, &str)> + '_ {
        self.ports.iter().enumerate().filter_map(|(i, p)| {
            let p = p.as_ref()?;
            Some((PortId(u16::try_from(i).ok()?), p.name.as_str()))
        })
    }

    /// Number of ports.
    pub fn port_count(&self) -> usize {
        self.ports.iter().flatten().count()
    }

    /// A port's options.
    pub fn port_options(&self, id: PortId) -> Option<&PortOptions> {
        self.slot(id).ok().map(|s| &s.options)
    }

    /// A handle on a port's counters, readable from any thread.
    pub fn port_counters(&self, id: PortId) -> Option<Arc<PortCounters>> {
        self.slot(id).ok().map(|s| Arc::clone(&s.counters))
    }

    /// Drops not charged to a port (none today: every drop has a port), kept for totals.
    pub fn drops(&self) -> &DropCounters {
        &self.drops
    }

    /// The FDB (read only: changes go through the methods below so that caches stay right).
    pub fn fdb(&self) -> &Fdb {
        &self.fdb
    }

    /// Adds a static FDB entry.
    pub fn add_static_mac(
        &mut self,
        vlan: crate::types::VlanId,
        mac: weft_packet::MacAddr,
        port: PortId,
    ) -> Result<(), SwitchError> {
        self.slot(port)?;
        self.fdb.add_static(vlan, mac, port)?;
        Ok(())
    }

    /// Learns `mac` in `vlan` on `port` as last seen at `seen` (an entry another process
    /// had learned: a takeover), within the FDB's limits; false when nothing was learned.
    pub fn restore_learned(
        &mut self,
        vlan: crate::types::VlanId,
        mac: weft_packet::MacAddr,
        port: PortId,
        seen: Timestamp,
    ) -> bool {
        if self.slot(port).is_err() {
            return false;
        }
        !matches!(
            self.fdb.learn(vlan, mac, port, seen),
            crate::fdb::LearnOutcome::Ignored(_)
        )
    }

    /// Removes an FDB entry; false when there was none.
    pub fn remove_mac(&mut self, vlan: crate::types::VlanId, mac: weft_packet::MacAddr) -> bool {
        self.fdb.remove(vlan, mac)
    }

    /// Flushes FDB entries.
    pub fn flush_fdb(&mut self, filter: crate::fdb::FlushFilter) -> usize {
        self.fdb.flush(filter)
    }

    /// The flow table (read only).
    pub fn flow_table(&self) -> &FlowTable {
        &self.table
    }

    /// Installs a flow rule.
    pub fn add_rule(&mut self, rule: FlowRule) -> Result<RuleId, SwitchError> {
        Ok(self.table.insert(rule)?)
    }

    /// Removes a flow rule.
    pub fn remove_rule(&mut self, id: RuleId) -> Option<FlowRule> {
        self.table.remove(id)
    }

    /// Removes every flow rule.
    pub fn clear_rules(&mut self) {
        self.table.clear();
    }

    /// Hands queued upcalls to `f`.
    pub fn drain_upcalls(&mut self, f: impl FnMut(&Upcall)) -> usize {
        self.upcalls.drain(f)
    }

    /// Switch-wide counters.
    pub fn stats(&self) -> SwitchStats {
        SwitchStats {
            batches: self.batches,
            rx_packets: self.rx_packets,
            fdb_entries: self.fdb.len(),
            fdb_moves: self.fdb.stats().moves,
            mac_flap_episodes: self.fdb.stats().flap_episodes,
            flow_cache: self.cache.stats(),
            upcalls: self.upcalls.stats(),
            packet_out: self.packet_out,
            lane: self
                .lane
                .as_ref()
                .map(|l| l.lane.counters().snapshot())
                .unwrap_or_default(),
        }
    }

    /// The MAC flap episodes begun since the last call (each once, when its hold began),
    /// with the names of the ports involved, and how many more the FDB could not keep.
    ///
    /// On a switch of several lanes, the lane that finds an episode reports it; the others
    /// hold the address as its records tell them, without reporting.
    pub fn take_flap_episodes(&mut self) -> (Vec<(FlapEpisode, String, String)>, u64) {
        let (episodes, unlogged) = self.fdb.take_flap_episodes();
        let name = |id: PortId| {
            self.ports
                .get(id.index())
                .and_then(Option::as_ref)
                .map_or_else(|| format!("#{}", id.0), |p| p.name.clone())
        };
        let named = episodes
            .into_iter()
            .map(|e| (e, name(e.held_on), name(e.moving_to)))
            .collect();
        (named, unlogged)
    }

    /// Ages out FDB entries; call it now and then (the pipeline also does before each batch).
    pub fn expire(&mut self, now: Timestamp) -> usize {
        self.fdb.expire(now)
    }

    /// Polls one port whose receive half the switch holds: receives a batch and forwards
    /// it. Returns the frames received.
    pub fn poll(&mut self, port: PortId, now: Timestamp) -> usize {
        self.tell_peers_if_changed();
        let Some(mut rx) = self.rx.get_mut(port.index()).and_then(Option::take) else {
            return 0;
        };
        let n = self.process(port, rx.as_mut(), now);
        if let Some(slot) = self.rx.get_mut(port.index()) {
            // The port may have been removed meanwhile only by this thread: put it back.
            *slot = Some(rx);
        }
        n
    }

    /// Starts copying the port's frames going `direction` into `buffer`.
    pub fn start_capture(
        &mut self,
        port: PortId,
        direction: CaptureDirection,
        buffer: Arc<CaptureBuffer>,
    ) -> Result<(), SwitchError> {
        self.slot_mut(port)?.captures.push((direction, buffer));
        Ok(())
    }

    /// Stops the capture into `buffer` on `port`; false when there was none.
    pub fn stop_capture(&mut self, port: PortId, buffer: &Arc<CaptureBuffer>) -> bool {
        let Ok(slot) = self.slot_mut(port) else {
            return false;
        };
        let before = slot.captures.len();
        slot.captures.retain(|(_, b)| !Arc::ptr_eq(b, buffer));
        slot.captures.len() != before
    }

    /// The readiness descriptors of the receive halves the switch holds (see
    /// [`PortRx::readiness_fd`]), and whether some port has none and must be polled.
    pub fn readiness_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        let mut must_poll = false;
        for rx in self.rx.iter().flatten() {
            match rx.readiness_fd() {
                Some(fd) => out.push(fd),
                None => must_poll = true,
            }
        }
        must_poll
    }

    /// True when a receive half asks to be polled rather than slept on (see
    /// [`PortRx::needs_polling`]).
    pub fn needs_polling(&self) -> bool {
        self.rx.iter().flatten().any(|rx| rx.needs_polling())
    }

    /// A number that changes whenever ports are added, removed or reconfigured.
    pub fn port_generation(&self) -> u64 {
        self.port_generation
    }

    /// Polls every port once. Returns the frames received.
    pub fn poll_all(&mut self, now: Timestamp) -> usize {
        let mut total = 0;
        for i in 0..self.rx.len() {
            if let Ok(i) = u16::try_from(i) {
                total += self.poll(PortId(i), now);
            }
        }
        total
    }

    /// Receives one batch from `rx` (the receive half of port `port`) and forwards it.
    /// Returns the frames received.
    pub fn process(&mut self, port: PortId, rx: &mut dyn PortRx, now: Timestamp) -> usize {
        if self.slot(port).is_err() {
            return 0;
        }
        // What other lanes learned, at every look at a port (an atomic load when there is
        // nothing), so that a lane whose own ports are quiet keeps its inbox short.
        if self.lane.is_some() {
            self.sync_lanes(now);
        }
        self.batch.clear();
        rx.receive(&mut self.batch);
        let n = self.batch.len();
        if n == 0 {
            rx.finish();
            return 0;
        }
        // Age first, so every lookup of this batch sees one FDB state at `now`: a cached
        // decision then always equals a fresh one.
        self.fdb.expire(now);
        {
            // The frames' bytes, looked up once per batch (an uninitialised array: free to
            // set up, whatever the batch size).
            let mut frames: Frames<'_> = ArrayVec::new();
            // At most the capacity, so `extend` never overflows.
            let descs = self.batch.descs().iter().take(MAX_BATCH);
            frames.extend(descs.map(|d| rx.frame(d.handle)));
            self.classify(port, &frames, now);
            self.capture_received(port, &frames, now);
            self.deliver(port, &frames, now);
        }
        rx.finish();
        if !self.upcalls.is_empty() {
            self.hand_upcalls();
        }
        if self.fdb.journal_pending() {
            self.post_learned();
        }
        self.batches += 1;
        self.rx_packets += n as u64;
        n
    }

    /// Copies the batch just received on `port` into its receive-side captures.
    fn capture_received(&self, port: PortId, frames: &Frames<'_>, now: Timestamp) {
        let Ok(slot) = self.slot(port) else { return };
        for (direction, buffer) in &slot.captures {
            if direction.takes(CaptureDirection::In) {
                let mut w = buffer.writer();
                for frame in frames {
                    w.push(now, CaptureDirection::In, [&[], frame.head], frame.tail);
                }
            }
        }
    }

    fn slot(&self, id: PortId) -> Result<&PortSlot, SwitchError> {
        self.ports
            .get(id.index())
            .and_then(Option::as_ref)
            .ok_or(SwitchError::NoSuchPort(id))
    }

    fn slot_mut(&mut self, id: PortId) -> Result<&mut PortSlot, SwitchError> {
        self.ports
            .get_mut(id.index())
            .and_then(Option::as_mut)
            .ok_or(SwitchError::NoSuchPort(id))
    }

    /// The generation the flow cache is keyed by: any change to the FDB, the rules or the
    /// ports changes it.
    #[cfg(test)]
    fn generation(&self) -> u64 {
        cache_generation(&self.fdb, &self.table, self.port_generation)
    }
}

/// The generation the flow cache is keyed by: each part only grows, so the sum changes
/// whenever any of the FDB, the rules or the ports change.
pub(crate) fn cache_generation(fdb: &Fdb, table: &FlowTable, port_generation: u64) -> u64 {
    fdb.generation()
        .wrapping_add(table.generation())
        .wrapping_add(port_generation)
}
