//! Learning's two guards against a misbehaving port: its own MAC limit (new addresses
//! beyond it are not learned) and flap dampening (an address moving between ports more
//! than `mac_move_limit` times within a second stays where it is for `mac_move_hold`).
//!
//! Both refuse rather than evict or move, so a refused frame leaves every lookup as it
//! was; the switch then drops the frame (a held address, or the limit's `drop` action) or
//! forwards it unlearned.

use core::hash::BuildHasher;

use arrayvec::ArrayVec;
use weft_packet::MacAddr;

use super::{unpack_key, Fdb, IgnoreReason};
use crate::types::{PortId, Timestamp, VlanId};

/// Episodes kept until the control plane takes them; more are only counted.
pub const FLAP_LOG_LEN: usize = 16;
const SECOND_NS: u64 = 1_000_000_000;

/// One address found flapping: reported once per episode, when its hold begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlapEpisode {
    /// The address's VLAN.
    pub vlan: VlanId,
    /// The address.
    pub mac: MacAddr,
    /// The port it is held on.
    pub held_on: PortId,
    /// The port it tried to move to when the limit was passed.
    pub moving_to: PortId,
    /// When the hold ends.
    pub until: Timestamp,
}

/// Episodes waiting for the control plane (bounded: it never allocates).
#[derive(Debug, Default)]
pub(super) struct FlapLog {
    episodes: ArrayVec<FlapEpisode, FLAP_LOG_LEN>,
    /// Episodes that found the log full.
    unlogged: u64,
}

impl Fdb {
    /// Bounds the learned entries of `port` (`None`: only the table's per-port bound). A
    /// port already above a new limit keeps its entries; it learns no new address until
    /// enough have aged out.
    pub fn set_port_mac_limit(&mut self, port: PortId, limit: Option<usize>) {
        if let Some(entries) = self.ports.get_mut(port.index()) {
            entries.limit = limit.unwrap_or(usize::MAX);
        }
    }

    /// Whether `port` holds as many learned entries as its own limit allows.
    pub(super) fn at_port_limit(&self, port: PortId) -> bool {
        self.ports
            .get(port.index())
            .is_some_and(|e| e.dynamic >= e.limit)
    }

    /// Whether the entry in slot `i` may move (or, if not `live`, be revived) onto `port`,
    /// a port other than its own. Counts the move towards flap dampening.
    pub(super) fn admit_move(
        &mut self,
        i: u32,
        port: PortId,
        live: bool,
        now: u64,
    ) -> Result<(), IgnoreReason> {
        if self.at_port_limit(port) {
            return Err(IgnoreReason::PortMacLimit);
        }
        let limit = self.config.mac_move_limit;
        if !live || limit == 0 {
            return Ok(());
        }
        let hold_ns = u64::try_from(self.config.mac_move_hold.as_nanos()).unwrap_or(u64::MAX);
        let slot = self.slab.get_mut(i);
        if now < slot.held_until {
            return Err(IgnoreReason::FlapHeld);
        }
        if now.saturating_sub(slot.moves_since) >= SECOND_NS {
            slot.moves_since = now;
            slot.moves = 0;
        }
        slot.moves = slot.moves.saturating_add(1);
        if slot.moves <= limit {
            return Ok(());
        }
        // A new episode: hold the address where it is, and start counting afresh after.
        slot.held_until = now.saturating_add(hold_ns);
        slot.moves = 0;
        slot.moves_since = slot.held_until;
        let (key, held_on, until) = (slot.key, slot.port, slot.held_until);
        // The other lanes hold it too (they may not have seen as many moves).
        self.journal_hold(key, held_on, now, until);
        let slot = self.slab.get(i);
        let (vlan, mac) = unpack_key(slot.key);
        let episode = FlapEpisode {
            vlan,
            mac,
            held_on: slot.port,
            moving_to: port,
            until: Timestamp(slot.held_until),
        };
        self.stats.flap_episodes += 1;
        if self.flaps.episodes.try_push(episode).is_err() {
            self.flaps.unlogged += 1;
        }
        Err(IgnoreReason::FlapHeld)
    }

    /// The flap episodes begun since the last call, and how many more found no room.
    pub fn take_flap_episodes(&mut self) -> (ArrayVec<FlapEpisode, FLAP_LOG_LEN>, u64) {
        let log = core::mem::take(&mut self.flaps);
        (log.episodes, log.unlogged)
    }

    /// Whether `mac` in `vlan` is held by flap dampening at `now`.
    pub fn is_held(&self, vlan: VlanId, mac: MacAddr, now: Timestamp) -> bool {
        let key = super::pack_key(vlan, mac);
        self.find(self.hasher.hash_one(key), key)
            .is_some_and(|i| now.0 < self.slab.get(i).held_until)
    }
}
