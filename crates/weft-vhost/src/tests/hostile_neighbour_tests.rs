//! A hostile guest beside a healthy pair of ports on one [`Switch`], polled in turn as a
//! worker polls them: the hostile guest keeps its transmit ring full of the costliest
//! chains the port still takes — indirect tables of the cap's length (1023 one-byte
//! buffers and an empty one at the end, so that each is dropped only at its last
//! descriptor) — while one healthy guest sends bursts of the switch's batch to the other. The hostile port reads
//! no more than its budget per poll (`rx/budget.rs`), and every healthy frame arrives.
//!
//! The same rig measures the healthy pair's rate beside the hostile guest against its
//! rate alone (phases alternating in one process, only the switch's polls timed):
//! `scripts/bench-budget` runs [`healthy_pair_rate_beside_a_hostile_guest_against_alone`]
//! in a release build for longer; in the ordinary test run it is a short smoke.

use std::time::{Duration, Instant};

use vm_memory::{Bytes, GuestAddress};
use weft_switch::{PortId, PortOptions, Switch, SwitchConfig, Timestamp};

use crate::config::VhostPortConfig;
use crate::counters::FrameDrop;
use crate::ring_access::MAX_CHAIN_DESCRIPTORS;
use crate::tests::testutil::{all_features, ether_frame, Rig, INDIRECT, NEXT};

/// A busy healthy port's burst: the switch's whole batch.
const BURST: usize = weft_switch::port::DEFAULT_BATCH;
const HDR0: [u8; 12] = [0; 12];
/// The hostile guest's ring (every descriptor a chain head naming the one table).
const HOSTILE_RING: u16 = 256;
/// Where the hostile guest keeps its indirect table (room for 65535 descriptors, in the
/// buffer area its transmit ring's driver does not use) and the 1 KiB its one-byte
/// buffers point into.
const HOSTILE_TABLE: u64 = 0x60_0000;
const HOSTILE_BYTES: u64 = 0x70_0000;

/// The switch, the healthy pair (`from` sends to `to`) and the hostile guest.
struct Neighbours {
    switch: Switch,
    a: PortId,
    b: PortId,
    h: PortId,
    from: Rig,
    to: Rig,
    hostile: Rig,
    frames: Vec<Vec<u8>>,
    round: u64,
}

impl Neighbours {
    /// The pair, and a hostile guest whose chains are each an indirect table of
    /// `hostile_chain` descriptors (see [`Neighbours::arm_hostile`]).
    fn new(hostile_chain: usize) -> Self {
        let config = VhostPortConfig::default();
        let features = all_features(&config);
        let (from, from_rx, from_tx) = Rig::new(config, features, 256);
        let (to, to_rx, to_tx) = Rig::new(config, features, 256);
        let (hostile, h_rx, h_tx) = Rig::new(config, features, HOSTILE_RING);
        let mut switch = Switch::new("neighbours", SwitchConfig::default()).unwrap();
        let mut add = |name: &str, rx: crate::rx::VhostPortRx, tx: crate::tx::VhostPortTx| {
            switch
                .add_port(
                    name,
                    Some(Box::new(rx)),
                    Box::new(tx),
                    PortOptions::default(),
                )
                .unwrap()
        };
        let a = add("a", from_rx, from_tx);
        let b = add("b", to_rx, to_tx);
        let h = add("h", h_rx, h_tx);
        switch
            .add_static_mac(0, weft_packet::MacAddr([2, 0, 0, 0, 0, 1]), b)
            .unwrap();
        let frames = (0..BURST)
            .map(|i| ether_frame(1, 2, 60, u8::try_from(i).unwrap()))
            .collect();
        let mut n = Neighbours {
            switch,
            a,
            b,
            h,
            from,
            to,
            hostile,
            frames,
            round: 0,
        };
        n.arm_hostile(hostile_chain);
        n
    }

    /// The hostile guest's table: `len` descriptors, one-byte buffers but the last, which
    /// is empty; every descriptor of its ring a chain naming it, all made available.
    fn arm_hostile(&mut self, len: usize) {
        let cap = len;
        let ring = &mut self.hostile.txq;
        let mut table = Vec::with_capacity(16 * cap);
        for i in 0..cap {
            let last = i + 1 == cap;
            let (len, flags, next) = if last {
                (0u32, 0u16, 0u16)
            } else {
                (1, NEXT, u16::try_from(i + 1).unwrap())
            };
            let addr = HOSTILE_BYTES + (i % 1024) as u64;
            table.extend_from_slice(&addr.to_le_bytes());
            table.extend_from_slice(&len.to_le_bytes());
            table.extend_from_slice(&flags.to_le_bytes());
            table.extend_from_slice(&next.to_le_bytes());
        }
        ring.mem
            .write_slice(&table, GuestAddress(HOSTILE_TABLE))
            .unwrap();
        ring.mem
            .write_slice(&[0xa5; 1024], GuestAddress(HOSTILE_BYTES))
            .unwrap();
        let len = u32::try_from(table.len()).unwrap();
        for head in 0..HOSTILE_RING {
            ring.set_desc(head, HOSTILE_TABLE, len, INDIRECT, 0);
            ring.publish(head);
        }
    }

    /// The hostile guest makes available again every chain the port gave back.
    fn rearm_hostile(&mut self) {
        for (head, _) in self.hostile.txq.take_used() {
            self.hostile.txq.publish(u16::try_from(head).unwrap());
        }
    }

    /// Descriptors the hostile port has read so far.
    fn hostile_descriptors(&self) -> u64 {
        self.hostile.stats_from_guest().descriptors
    }

    /// One round: the healthy guest sends a burst and its peer posts as many buffers; the
    /// worker polls both (and the hostile port, if `hostile`). Returns the time spent in
    /// the switch's polls of the pair and of the hostile port, and the hostile port's
    /// descriptors read in its poll; checks that the whole burst arrived (byte for byte
    /// when `check_bytes`).
    fn round(&mut self, hostile: bool, check_bytes: bool) -> Round {
        for f in &self.frames {
            self.from.txq.send(&HDR0, f, &[]);
        }
        let posted = self.to.rxq.post_rx(BURST, 2048);
        self.round += 1;
        let now = Timestamp(self.round * 1000);
        let before = self.hostile_descriptors();
        let start = Instant::now();
        let moved = self.switch.poll(self.a, now);
        self.switch.poll(self.b, now);
        let pair_done = Instant::now();
        if hostile {
            self.switch.poll(self.h, now);
        }
        let end = Instant::now();
        let read = self.hostile_descriptors() - before;
        assert_eq!(moved, BURST, "round {}", self.round);
        assert_eq!(self.from.txq.take_used().len(), BURST);
        let used = self.to.rxq.take_used();
        assert_eq!(used.len(), BURST, "round {}", self.round);
        if check_bytes {
            for ((id, len), (head, f)) in used.iter().zip(posted.iter().zip(&self.frames)) {
                assert_eq!(*id, u32::from(*head));
                assert_eq!(&self.to.rxq.read_rx(*id, *len)[12..], f.as_slice());
            }
        }
        if hostile {
            self.rearm_hostile();
        }
        Round {
            pair: pair_done - start,
            hostile: end - pair_done,
            read,
        }
    }
}

/// What one [`Neighbours::round`] cost.
#[derive(Debug, Default, Clone, Copy)]
struct Round {
    /// Time in the polls of the healthy pair.
    pair: Duration,
    /// Time in the poll of the hostile port.
    hostile: Duration,
    /// Descriptors the hostile port read.
    read: u64,
}

impl std::ops::AddAssign for Round {
    fn add_assign(&mut self, other: Round) {
        self.pair += other.pair;
        self.hostile += other.hostile;
        self.read += other.read;
    }
}

#[test]
fn a_hostile_guest_beside_a_healthy_pair_reads_no_more_than_its_budget_per_poll_and_every_healthy_frame_arrives(
) {
    let mut n = Neighbours::new(usize::from(MAX_CHAIN_DESCRIPTORS));
    let rounds = 400u64;
    let cap = u64::from(MAX_CHAIN_DESCRIPTORS);
    // The switch's batch of 128 frames: a quantum of 64 descriptors beyond their chains'
    // first per receive (`rx/budget.rs`).
    let quantum = SwitchConfig::default().batch_size as u64 / 2;
    let mut most = 0;
    for _ in 0..rounds {
        most = most.max(n.round(true, true).read);
    }
    let total = n.hostile_descriptors();
    assert!(
        most <= quantum + cap + 1,
        "{most} descriptors in one poll of the hostile port"
    );
    // Every chain read whole (1025 descriptors) and dropped at its last descriptor.
    let s = n.hostile.stats_from_guest();
    let chains = s.dropped(FrameDrop::ZeroLengthDescriptor);
    assert_eq!(chains * (cap + 1), total);
    // Beyond each chain's first: all the budget allowed, and no more.
    let extra = total - chains;
    assert!(
        extra <= rounds * quantum + cap,
        "{extra} descriptors in {rounds} polls"
    );
    assert!(extra >= (rounds - 1) * quantum, "{extra} descriptors");
    // The hostile port stayed up: dropping is all it earns.
    assert_eq!(s.total_faults(), 0);
    assert!(s.budget_cuts > 0);
    let healthy = n.switch.port_counters(n.b).unwrap().snapshot();
    assert_eq!(healthy.tx_packets, rounds * BURST as u64);
    assert_eq!(n.to.stats_to_guest().total_drops(), 0);
}

#[test]
fn a_hostile_guest_posting_65535_descriptor_chains_breaks_its_own_queue_after_reading_the_cap() {
    let mut n = Neighbours::new(usize::from(u16::MAX));
    let cap = u64::from(MAX_CHAIN_DESCRIPTORS);
    for round in 1..=50 {
        let read = n.round(true, true).read;
        // The first poll reads the cap (and the descriptor naming the table) and breaks
        // the hostile queue; the others read nothing; every healthy burst arrives.
        assert_eq!(read, if round == 1 { cap + 1 } else { 0 }, "round {round}");
    }
    let s = n.hostile.stats_from_guest();
    assert_eq!(s.descriptors, cap + 1);
    assert_eq!(
        s.faulted(crate::counters::QueueFault::TooManyDescriptors),
        1
    );
    let healthy = n.switch.port_counters(n.b).unwrap().snapshot();
    assert_eq!(healthy.tx_packets, 50 * BURST as u64);
}

/// Phases of `WEFT_BUDGET_BENCH_MS` milliseconds (default 100), `WEFT_BUDGET_BENCH_PHASES`
/// of each kind (default 2), alternating: the healthy pair alone, then beside the hostile
/// guest. Prints each kind's rate (healthy frames per second of the switch's polls, the
/// hostile port's included), their ratio, and what a round's polls cost.
#[test]
fn healthy_pair_rate_beside_a_hostile_guest_against_alone() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    let phase = Duration::from_millis(env("WEFT_BUDGET_BENCH_MS", 100));
    let phases = env("WEFT_BUDGET_BENCH_PHASES", 2);
    let mut n = Neighbours::new(usize::from(MAX_CHAIN_DESCRIPTORS));
    // [alone, beside the hostile guest]: rounds and their cost.
    let mut totals = [(0u64, Round::default()); 2];
    let mut ratios = Vec::new();
    let rate = |(rounds, cost): (u64, Round)| {
        (rounds * BURST as u64) as f64 / (cost.pair + cost.hostile).as_secs_f64()
    };
    for _ in 0..phases {
        let mut rates = [0f64; 2];
        for (kind, hostile) in [false, true].into_iter().enumerate() {
            let mut this = (0u64, Round::default());
            let start = Instant::now();
            while start.elapsed() < phase {
                this.1 += n.round(hostile, false);
                this.0 += 1;
            }
            rates[kind] = rate(this);
            totals[kind].0 += this.0;
            totals[kind].1 += this.1;
        }
        ratios.push(rates[1] / rates[0]);
    }
    let (alone, beside) = (rate(totals[0]), rate(totals[1]));
    ratios.sort_by(f64::total_cmp);
    let per_round = |d: Duration, rounds: u64| d.as_secs_f64() * 1e6 / rounds.max(1) as f64;
    let (alone_rounds, beside_rounds) = (totals[0].0, totals[1].0);
    println!(
        "healthy pair: alone {:.2} Mpps, beside a hostile guest {:.2} Mpps: {:.3}x \
         (phase ratios {:.3}..{:.3}, median {:.3}); per round of {BURST} frames: the pair's \
         polls {:.1} us alone, {:.1} us beside, the hostile port's {:.1} us for {:.0} \
         descriptors{}",
        alone / 1e6,
        beside / 1e6,
        beside / alone,
        ratios.first().copied().unwrap_or(0.0),
        ratios.last().copied().unwrap_or(0.0),
        ratios.get(ratios.len() / 2).copied().unwrap_or(0.0),
        per_round(totals[0].1.pair, alone_rounds),
        per_round(totals[1].1.pair, beside_rounds),
        per_round(totals[1].1.hostile, beside_rounds),
        totals[1].1.read as f64 / beside_rounds.max(1) as f64,
        if cfg!(debug_assertions) {
            " (debug build: not a measurement)"
        } else {
            ""
        },
    );
    assert_eq!(totals[0].1.read, 0, "the hostile port was not polled alone");
    assert!(totals[1].1.read > 0, "the hostile guest made the port read");
}
