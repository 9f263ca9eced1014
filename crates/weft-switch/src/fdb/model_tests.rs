//! Property tests: the FDB against a naive reference model that applies the same rules
//! by brute force (a plain map, linear scans for victims), plus the fairness property.

use core::time::Duration;
use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;

use super::eviction_tests::flood_next;
use super::tests::{check_invariants, mac};
use super::*;

const VLANS: [VlanId; 3] = [0, 7, MAX_FDB_VLAN];
const MACS: u64 = 10;
const PORTS: u16 = 4;
const FAR_PORT: PortId = PortId(300);
const AGEING_NS: u64 = 1000;

#[derive(Clone, Copy, Debug)]
struct ModelEntry {
    port: PortId,
    is_static: bool,
    last_seen: u64,
    /// When the entry was last put at the tail of the LRU order.
    seq: u64,
}

type Key = (VlanId, MacAddr);

/// The reference: every rule of the FDB, computed the slow and obvious way.
struct Model {
    max_entries: usize,
    max_per_port: usize,
    refresh_ns: u64,
    entries: HashMap<Key, ModelEntry>,
    clock: u64,
    seq: u64,
    stats: FdbStats,
}

impl Model {
    fn expired(e: &ModelEntry, now: u64) -> bool {
        !e.is_static && now.saturating_sub(e.last_seen) >= AGEING_NS
    }

    fn lookup(&self, key: Key, now: u64) -> Option<PortId> {
        let e = self.entries.get(&key)?;
        (!Self::expired(e, now)).then_some(e.port)
    }

    fn dynamic_on(&self, port: PortId) -> usize {
        self.entries
            .values()
            .filter(|e| !e.is_static && e.port == port)
            .count()
    }

    fn len_for_port(&self, port: PortId) -> usize {
        self.entries.values().filter(|e| e.port == port).count()
    }

    fn oldest(&self, port: Option<PortId>) -> Option<Key> {
        self.entries
            .iter()
            .filter(|(_, e)| !e.is_static && port.is_none_or(|p| e.port == p))
            .min_by_key(|(_, e)| e.seq)
            .map(|(k, _)| *k)
    }

    fn tail_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn evict(
        &mut self,
        key: Key,
        now: u64,
        cause: EvictionCause,
    ) -> Option<(PortId, EvictionCause)> {
        let e = self.entries.remove(&key)?;
        if Self::expired(&e, now) {
            self.stats.expired += 1;
            return None;
        }
        match cause {
            EvictionCause::PortLimit => self.stats.evictions.port_limit += 1,
            EvictionCause::TableFull => self.stats.evictions.table_full += 1,
        }
        Some((e.port, cause))
    }

    fn room_on_port(&mut self, port: PortId, now: u64) -> Option<(PortId, EvictionCause)> {
        if self.dynamic_on(port) < self.max_per_port {
            return None;
        }
        let victim = self.oldest(Some(port))?;
        self.evict(victim, now, EvictionCause::PortLimit)
    }

    /// `Err(())` when every entry is static.
    fn room_in_table(
        &mut self,
        prefer: Option<PortId>,
        now: u64,
    ) -> Result<Option<(PortId, EvictionCause)>, ()> {
        if let Some(oldest) = self.oldest(None) {
            if Self::expired(&self.entries[&oldest], now) {
                self.entries.remove(&oldest);
                self.stats.expired += 1;
                return Ok(None);
            }
        }
        let mut counts = vec![0usize; MAX_PORTS];
        for e in self.entries.values().filter(|e| !e.is_static) {
            counts[e.port.index()] += 1;
        }
        let most = counts.iter().copied().max().unwrap_or(0);
        if most == 0 {
            return Err(());
        }
        let victim_port = match prefer {
            Some(p) if counts[p.index()] == most => p,
            _ => PortId(u16::try_from(counts.iter().position(|&c| c == most).unwrap()).unwrap()),
        };
        let victim = self.oldest(Some(victim_port)).unwrap();
        Ok(self.evict(victim, now, EvictionCause::TableFull))
    }

    fn created(eviction: Option<(PortId, EvictionCause)>) -> LearnOutcome {
        match eviction {
            Some((victim_port, cause)) => LearnOutcome::Evicted { victim_port, cause },
            None => LearnOutcome::Learned,
        }
    }

    fn ignore(&mut self, reason: IgnoreReason) -> LearnOutcome {
        self.stats.ignored.count(reason);
        LearnOutcome::Ignored(reason)
    }

    fn learn(&mut self, key: Key, port: PortId, now: u64) -> LearnOutcome {
        if let Err(reason) = check_key(key.0, key.1, port) {
            return self.ignore(reason);
        }
        self.clock = self.clock.max(now);
        let now = self.clock;
        let Some(old) = self.entries.get(&key).copied() else {
            let mut eviction = self.room_on_port(port, now);
            if self.entries.len() >= self.max_entries {
                match self.room_in_table(Some(port), now) {
                    Ok(Some(e)) => eviction = Some(e),
                    Ok(None) => {}
                    Err(()) => return self.ignore(IgnoreReason::TableFullOfStatic),
                }
            }
            let seq = self.tail_seq();
            let entry = ModelEntry {
                port,
                is_static: false,
                last_seen: now,
                seq,
            };
            self.entries.insert(key, entry);
            self.stats.learned += 1;
            return Self::created(eviction);
        };
        if old.is_static {
            if old.port == port {
                self.stats.refreshed += 1;
                return LearnOutcome::Refreshed;
            }
            return self.ignore(IgnoreReason::StaticConflict);
        }
        let live = !Self::expired(&old, now);
        if live && old.port == port {
            self.stats.refreshed += 1;
            if now - old.last_seen >= self.refresh_ns {
                let seq = self.tail_seq();
                let e = self.entries.get_mut(&key).unwrap();
                (e.last_seen, e.seq) = (now, seq);
            }
            return LearnOutcome::Refreshed;
        }
        self.entries.remove(&key);
        let eviction = self.room_on_port(port, now);
        let seq = self.tail_seq();
        let entry = ModelEntry {
            port,
            is_static: false,
            last_seen: now,
            seq,
        };
        self.entries.insert(key, entry);
        if live {
            self.stats.moves += 1;
            LearnOutcome::Moved { from: old.port }
        } else {
            self.stats.learned += 1;
            Self::created(eviction)
        }
    }

    fn add_static(&mut self, key: Key, port: PortId) -> Result<(), FdbError> {
        match check_key(key.0, key.1, port) {
            Err(IgnoreReason::PortOutOfRange) => return Err(FdbError::PortOutOfRange(port)),
            Err(IgnoreReason::VlanOutOfRange) => return Err(FdbError::VlanOutOfRange(key.0)),
            Err(_) => return Err(FdbError::NotUnicast(key.1)),
            Ok(()) => {}
        }
        if !self.entries.contains_key(&key)
            && self.entries.len() >= self.max_entries
            && self.room_in_table(None, self.clock).is_err()
        {
            return Err(FdbError::TableFull);
        }
        let entry = ModelEntry {
            port,
            is_static: true,
            last_seen: 0,
            seq: 0,
        };
        self.entries.insert(key, entry);
        Ok(())
    }

    fn flush(&mut self, filter: FlushFilter) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(vlan, _), e| match filter {
            FlushFilter::All => false,
            FlushFilter::Dynamic => e.is_static,
            FlushFilter::Port(p) => e.port != p,
            FlushFilter::DynamicOnPort(p) => e.is_static || e.port != p,
            FlushFilter::Vlan(v) => *vlan != v,
        });
        let removed = before - self.entries.len();
        self.stats.removed += u64::try_from(removed).unwrap();
        removed
    }

    fn expire(&mut self, now: u64) -> usize {
        self.clock = self.clock.max(now);
        let clock = self.clock;
        let before = self.entries.len();
        self.entries.retain(|_, e| !Self::expired(e, clock));
        let expired = before - self.entries.len();
        self.stats.expired += u64::try_from(expired).unwrap();
        expired
    }

    fn listing(&self) -> BTreeSet<(VlanId, MacAddr, PortId, bool, Option<Timestamp>)> {
        let seen = |e: &ModelEntry| (!e.is_static).then_some(Timestamp(e.last_seen));
        self.entries
            .iter()
            .map(|(&(vlan, mac), e)| (vlan, mac, e.port, e.is_static, seen(e)))
            .collect()
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// `back` makes the caller's clock lag (the FDB must not go back in time).
    Learn {
        key: Key,
        port: PortId,
        back: u64,
    },
    Lookup(Key),
    Advance(u64),
    Expire,
    AddStatic(Key, PortId),
    Remove(Key),
    Flush(FlushFilter),
}

fn arb_vlan() -> impl Strategy<Value = VlanId> {
    prop_oneof![20 => prop::sample::select(VLANS.to_vec()), 1 => Just(MAX_FDB_VLAN + 1)]
}

fn arb_mac() -> impl Strategy<Value = MacAddr> {
    prop_oneof![
        30 => (0..MACS).prop_map(mac),
        1 => Just(MacAddr::BROADCAST),
        1 => Just(MacAddr([0x01, 0x00, 0x5e, 0, 0, 1])),
        1 => Just(MacAddr::ZERO),
    ]
}

fn arb_port() -> impl Strategy<Value = PortId> {
    prop_oneof![30 => (0..PORTS).prop_map(PortId), 1 => Just(FAR_PORT)]
}

fn arb_key() -> impl Strategy<Value = Key> {
    (arb_vlan(), arb_mac())
}

fn arb_filter() -> impl Strategy<Value = FlushFilter> {
    prop_oneof![
        Just(FlushFilter::All),
        Just(FlushFilter::Dynamic),
        arb_port().prop_map(FlushFilter::Port),
        arb_port().prop_map(FlushFilter::DynamicOnPort),
        arb_vlan().prop_map(FlushFilter::Vlan),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let back = prop_oneof![9 => Just(0u64), 1 => 0..300u64];
    prop_oneof![
        16 => (arb_key(), arb_port(), back).prop_map(|(key, port, back)| Op::Learn { key, port, back }),
        2 => arb_key().prop_map(Op::Lookup),
        5 => (0..2 * AGEING_NS / 5).prop_map(Op::Advance),
        1 => Just(Op::Expire),
        2 => (arb_key(), arb_port()).prop_map(|(key, port)| Op::AddStatic(key, port)),
        1 => arb_key().prop_map(Op::Remove),
        1 => arb_filter().prop_map(Op::Flush),
    ]
}

/// Every key an op can name, valid or not.
fn universe() -> Vec<Key> {
    let vlans = VLANS.iter().copied().chain([MAX_FDB_VLAN + 1]);
    let macs: Vec<MacAddr> = (0..MACS).map(mac).chain([MacAddr::BROADCAST]).collect();
    vlans
        .flat_map(|v| macs.iter().map(move |&m| (v, m)))
        .collect()
}

fn lookups(f: &Fdb, keys: &[Key], now: u64) -> Vec<Option<PortId>> {
    keys.iter()
        .map(|&(v, m)| f.lookup(v, m, Timestamp(now)))
        .collect()
}

fn dynamic_counts(f: &Fdb) -> Vec<usize> {
    (0..PORTS)
        .map(|p| f.dynamic_len_for_port(PortId(p)))
        .collect()
}

/// Runs `ops` on a real FDB and on the model, checking after every op that they agree and
/// that the FDB's own invariants hold.
fn run_against_model(max_entries: usize, max_per_port: usize, refresh_ns: u64, ops: &[Op]) {
    let config = FdbConfig {
        max_entries,
        max_per_port,
        ageing: Duration::from_nanos(AGEING_NS),
        refresh_granularity: Duration::from_nanos(refresh_ns),
        ..FdbConfig::default()
    };
    let mut real = Fdb::new(config).unwrap();
    let mut model = Model {
        max_entries,
        max_per_port,
        refresh_ns,
        entries: HashMap::new(),
        clock: 0,
        seq: 0,
        stats: FdbStats::default(),
    };
    let keys = universe();
    let mut now = 0u64;
    for (step, &op) in ops.iter().enumerate() {
        // The generation promise is about lookups at the table's current time: the latest
        // time it has been given, which a lagging learn may leave behind `now`.
        let table_now = match op {
            Op::Learn { back, .. } => model.clock.max(now.saturating_sub(back)),
            _ => now,
        };
        let before = lookups(&real, &keys, table_now);
        let generation = real.generation();
        let counts = dynamic_counts(&real);
        // Whether the op may change lookups at all (refreshes and rejections may not).
        let mut may_change = true;
        match op {
            Op::Learn { key, port, back } => {
                let at = now.saturating_sub(back);
                let got = real.learn(key.0, key.1, port, Timestamp(at));
                assert_eq!(got, model.learn(key, port, at), "step {step}: {op:?}");
                may_change = got.changed_lookups();
                if let LearnOutcome::Evicted {
                    victim_port,
                    cause: EvictionCause::TableFull,
                } = got
                {
                    // Fairness: a full table only takes from a port holding more (or itself).
                    let (victim, learner) = (counts[victim_port.index()], counts[port.index()]);
                    assert!(victim > learner || (victim_port == port && victim == learner));
                }
            }
            Op::Lookup((v, m)) => {
                assert_eq!(real.lookup(v, m, Timestamp(now)), model.lookup((v, m), now));
                may_change = false;
            }
            Op::Advance(dt) => now += dt,
            Op::Expire => assert_eq!(real.expire(Timestamp(now)), model.expire(now)),
            Op::AddStatic(key, port) => {
                let got = real.add_static(key.0, key.1, port);
                assert_eq!(got, model.add_static(key, port), "step {step}: {op:?}");
            }
            Op::Remove(key) => {
                let got = real.remove(key.0, key.1);
                let expected = model.entries.remove(&key).is_some();
                model.stats.removed += u64::from(expected);
                assert_eq!(got, expected);
            }
            Op::Flush(filter) => assert_eq!(real.flush(filter), model.flush(filter)),
        }
        let expected: Vec<_> = keys.iter().map(|&k| model.lookup(k, now)).collect();
        assert_eq!(
            lookups(&real, &keys, now),
            expected,
            "step {step}: lookups after {op:?}"
        );
        let after = lookups(&real, &keys, table_now);
        if !matches!(op, Op::Advance(_)) && before != after {
            assert_ne!(
                real.generation(),
                generation,
                "step {step}: {op:?} changed lookups"
            );
        }
        if !may_change {
            assert_eq!(
                real.generation(),
                generation,
                "step {step}: {op:?} bumped needlessly"
            );
        }
        assert_eq!(real.len(), model.entries.len());
        assert!(real.len() <= max_entries);
        for port in (0..PORTS).map(PortId).chain([FAR_PORT]) {
            assert_eq!(
                real.len_for_port(port),
                model.len_for_port(port),
                "{port:?}"
            );
            assert_eq!(
                real.dynamic_len_for_port(port),
                model.dynamic_on(port),
                "{port:?}"
            );
            assert!(real.dynamic_len_for_port(port) <= max_per_port);
        }
        let listing: BTreeSet<_> = real
            .entries()
            .map(|e| (e.vlan, e.mac, e.port, e.is_static, e.last_seen))
            .collect();
        assert_eq!(
            listing,
            model.listing(),
            "step {step}: entries after {op:?}"
        );
        let expected_stats = FdbStats {
            entries: model.entries.len(),
            static_entries: model.entries.values().filter(|e| e.is_static).count(),
            ..model.stats
        };
        assert_eq!(
            real.stats(),
            expected_stats,
            "step {step}: stats after {op:?}"
        );
        check_invariants(&real);
    }
}

fn arb_bounds() -> impl Strategy<Value = (usize, usize, u64)> {
    (1..14usize, 1..14usize, 0..AGEING_NS / 5)
        .prop_map(|(total, per_port, refresh)| (total, per_port.min(total), refresh))
}

proptest! {
    /// Lookups, outcomes, counts, listings and counters agree with the reference model
    /// after every step; bounds hold; the generation changes whenever a lookup does and not
    /// on refreshes or rejections.
    #[test]
    fn fdb_agrees_with_the_reference_model(
        (total, per_port, refresh) in arb_bounds(),
        ops in prop::collection::vec(arb_op(), 1..200),
    ) {
        run_against_model(total, per_port, refresh, &ops);
    }

    /// Ports that hold no more than an even share of the table keep every entry, however
    /// many random sources another port floods.
    #[test]
    fn quiet_ports_within_an_even_share_survive_any_flood(
        total in 8..300usize,
        per_port in 1..300usize,
        quiet in prop::collection::vec(0..100usize, 1..4),
        flood in 0..3000u64,
        seed in 1..u64::MAX,
    ) {
        let per_port = per_port.min(total);
        let share = (total / (quiet.len() + 1)).min(per_port);
        let mut f = Fdb::new(FdbConfig { max_entries: total, max_per_port: per_port, ..FdbConfig::default() }).unwrap();
        let quiet: Vec<usize> = quiet.iter().map(|&n| n.min(share)).collect();
        let mut next = 0;
        for (p, &n) in quiet.iter().enumerate() {
            for _ in 0..n {
                f.learn(0, mac(next), PortId(u16::try_from(p).unwrap()), Timestamp(0));
                next += 1;
            }
        }
        let flooder = PortId(PORTS);
        let mut seed = seed;
        for i in 0..flood {
            let mut src = flood_next(&mut seed);
            src.0[0] = 0x06; // never one of the quiet ports' addresses
            f.learn(0, src, flooder, Timestamp(i));
        }
        let mut next = 0;
        for (p, &n) in quiet.iter().enumerate() {
            let port = PortId(u16::try_from(p).unwrap());
            prop_assert_eq!(f.len_for_port(port), n);
            for _ in 0..n {
                prop_assert_eq!(f.lookup(0, mac(next), Timestamp(flood)), Some(port));
                next += 1;
            }
        }
        prop_assert!(f.len_for_port(flooder) <= per_port);
        check_invariants(&f);
    }
}
