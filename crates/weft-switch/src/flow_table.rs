//! The flow table: prioritized wildcard rules over [`FlowKey`]s (Hyper-Switch's flow-based
//! data plane; VNET/P's routing rules by source and destination MAC).

use core::cmp::Reverse;

use hashbrown::HashMap;

use crate::flow_key::FlowKey;
use crate::flow_match::{CompiledMatch, FlowMatch, PackedKey};

mod action;
mod error;

pub use action::{Action, ActionList, MAX_ACTIONS};
pub use error::FlowError;

/// The rule limit [`FlowTable::default`] uses.
pub const DEFAULT_MAX_RULES: usize = 4096;

/// The largest rule limit a table accepts; [`FlowTable::new`] clamps to it, so that a
/// configured limit can never make the table preallocate without bound.
pub const MAX_FLOW_RULES: usize = 65_536;

/// A rule: when `matches` matches a packet and no rule ranks higher, apply `actions`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FlowRule {
    /// Higher wins.
    pub priority: u16,
    /// What the rule matches.
    pub matches: FlowMatch,
    /// What it does, in order.
    pub actions: ActionList,
    /// An opaque value for the control plane (e.g. to find the rules it installed).
    pub cookie: u64,
}

impl FlowRule {
    /// A rule with cookie 0.
    pub const fn new(priority: u16, matches: FlowMatch, actions: ActionList) -> Self {
        FlowRule {
            priority,
            matches,
            actions,
            cookie: 0,
        }
    }

    /// Checks the match and the actions (see [`FlowMatch::validate`] and
    /// [`ActionList::validate`]).
    pub fn validate(&self) -> Result<(), FlowError> {
        self.matches.validate()?;
        self.actions.validate()
    }
}

/// Identifies an installed rule. Ids grow with every insert and are never reused, not
/// even after [`FlowTable::clear`], so a stale id never names a newer rule.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct RuleId(pub u64);

/// A rule's hit counters (saturating).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct RuleStats {
    /// Packets that hit the rule.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    id: RuleId,
    rule: FlowRule,
    stats: RuleStats,
}

/// Prioritized wildcard rules; [`lookup`](Self::lookup) finds the rule for a packet.
///
/// **Which rule wins**: the highest `priority` among the matching rules; among equal
/// priorities, the one inserted **earlier**. The result is deterministic and depends only
/// on the rules and their insertion order.
///
/// **How**: rules are kept sorted by (priority descending, insertion order), each with
/// its match precompiled to masks over the packed key, and a lookup scans them and stops
/// at the first match (a few word operations per rule). A linear scan is enough because
/// the exact-match [`FlowCache`](crate::flow_cache::FlowCache) in front of the table
/// makes misses rare; tuple space search (OVS `dpcls`) could replace the scan behind this
/// same API if rule counts grow.
///
/// **Cost**: `lookup` and `record_hit` never allocate. Storage for `max_rules` rules is
/// reserved up front, so `insert` does not allocate either in steady state; `insert` and
/// `remove` move entries (O(n)), which is fine for the control path.
///
/// **Generation**: [`generation`](Self::generation) bumps on every successful insert,
/// remove and on every clear; caches keyed on it drop decisions made under older rules.
///
/// **Ownership**: no interior locking. One thread owns a table, or workers read an
/// immutable snapshot the control plane published (see the design notes).
#[derive(Debug)]
pub struct FlowTable {
    /// Compiled matches in lookup order, apart from `entries` so the scan touches only them.
    matchers: Vec<CompiledMatch>,
    /// The rules, in the same order as `matchers`.
    entries: Vec<Entry>,
    /// Each installed id's priority: with the id, its sort key, to find it by binary search.
    priorities: HashMap<RuleId, u16>,
    max_rules: usize,
    next_id: u64,
    generation: u64,
}

impl FlowTable {
    /// An empty table holding at most `max_rules` rules (clamped to [`MAX_FLOW_RULES`]).
    pub fn new(max_rules: usize) -> Self {
        let max_rules = max_rules.min(MAX_FLOW_RULES);
        FlowTable {
            matchers: Vec::with_capacity(max_rules),
            entries: Vec::with_capacity(max_rules),
            priorities: HashMap::with_capacity(max_rules),
            max_rules,
            next_id: 0,
            generation: 0,
        }
    }

    /// Validates and installs a rule. On error nothing changes (not even the generation).
    pub fn insert(&mut self, rule: FlowRule) -> Result<RuleId, FlowError> {
        rule.validate()?;
        if self.entries.len() >= self.max_rules {
            return Err(FlowError::TableFull {
                max_rules: self.max_rules,
            });
        }
        let id = RuleId(self.next_id);
        self.next_id += 1;
        // The new id is the largest, so the rule goes after every rule of its priority.
        let pos = self
            .entries
            .partition_point(|e| e.rule.priority >= rule.priority);
        self.matchers.insert(pos, CompiledMatch::new(&rule.matches));
        self.entries.insert(
            pos,
            Entry {
                id,
                rule,
                stats: RuleStats::default(),
            },
        );
        self.priorities.insert(id, rule.priority);
        self.bump_generation();
        Ok(id)
    }

    /// Removes a rule and returns it; `None` (and no change) if there is no such rule.
    pub fn remove(&mut self, id: RuleId) -> Option<FlowRule> {
        let pos = self.position(id)?;
        self.priorities.remove(&id);
        self.matchers.remove(pos);
        let entry = self.entries.remove(pos);
        self.bump_generation();
        Some(entry.rule)
    }

    /// Removes every rule. Rule ids keep growing: none is reused.
    pub fn clear(&mut self) {
        self.matchers.clear();
        self.entries.clear();
        self.priorities.clear();
        self.bump_generation();
    }

    /// The rule for a packet: the highest-priority matching rule, the earliest inserted
    /// among equals; `None` if no rule matches.
    pub fn lookup(&self, key: &FlowKey) -> Option<(RuleId, &FlowRule)> {
        let packed = PackedKey::new(key);
        let pos = self.matchers.iter().position(|m| m.matches(&packed))?;
        self.entries.get(pos).map(|e| (e.id, &e.rule))
    }

    /// Every rule with its counters, in lookup order.
    pub fn rules(&self) -> impl Iterator<Item = (RuleId, &FlowRule, RuleStats)> + '_ {
        self.entries.iter().map(|e| (e.id, &e.rule, e.stats))
    }

    /// One rule, if installed.
    pub fn get(&self, id: RuleId) -> Option<&FlowRule> {
        self.position(id).map(|pos| &self.entries[pos].rule)
    }

    /// One rule's counters, if installed.
    pub fn stats(&self, id: RuleId) -> Option<RuleStats> {
        self.position(id).map(|pos| self.entries[pos].stats)
    }

    /// Adds hits to a rule's counters (the caller batches them). Ids of rules removed
    /// meanwhile are ignored.
    pub fn record_hit(&mut self, id: RuleId, packets: u64, bytes: u64) {
        if let Some(pos) = self.position(id) {
            let stats = &mut self.entries[pos].stats;
            stats.packets = stats.packets.saturating_add(packets);
            stats.bytes = stats.bytes.saturating_add(bytes);
        }
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The most rules the table holds.
    pub fn max_rules(&self) -> usize {
        self.max_rules
    }

    /// Bumps on every insert, remove and clear that succeeds.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn bump_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// Where an installed rule sits in lookup order.
    fn position(&self, id: RuleId) -> Option<usize> {
        let priority = *self.priorities.get(&id)?;
        let wanted = (Reverse(priority), id);
        self.entries
            .binary_search_by(|e| (Reverse(e.rule.priority), e.id).cmp(&wanted))
            .ok()
    }
}

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable::new(DEFAULT_MAX_RULES)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) mod proptests;
