//! Lanes: one switch run by several worker threads at once.
//!
//! A port with several queue pairs (a VM with `VIRTIO_NET_F_MQ`) can send faster than one
//! core switches. Its queues are then spread over *lanes*: each lane is a whole [`Switch`](crate::Switch)
//! (same name, same ports, same rules), owned by one worker thread, polling its share of
//! the ports' receive queues and transmitting on its own transmit queues — as Open
//! vSwitch's PMD threads each poll some receive queues and own a transmit queue per port.
//! A lane's data-path state stays single-owner; only three things cross lanes:
//!
//! - **What was learned.** Each lane's FDB records the entries it writes
//!   (`fdb::LearnedEntry`); after a batch the lane posts them to every other lane's
//!   inbox, and each lane takes its inbox in before its next batch (one lock per batch
//!   that learned something, none otherwise: an atomic flag says whether mail is waiting).
//!   A record is tagged with the lane's port membership count, so one that crosses a port
//!   being added or removed is dropped rather than pointing at the wrong port.
//! - **Transmit halves that cannot be split.** A TAP with one queue, a VXLAN socket: every
//!   lane gets a [`SharedTx`], one lock around the one half, taken once per burst (VALE's
//!   per-destination lock, OVS's shared transmit queues); its caps generation is read
//!   without the lock.
//! - **Control.** The control plane makes every change on every lane, in the same order,
//!   so ports get the same ids everywhere.
//!
//! Bounds: an inbox holds [`INBOX_CAPACITY`] records; more are counted as lost (the other
//! lanes then learn those stations from their next refresh, or flood meanwhile).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::fdb::LearnedEntry;
use crate::port::{PortCaps, PortTx, TxFrame};

/// The most lanes a switch has.
pub const MAX_LANES: usize = 16;

/// Records an inbox holds until its lane takes them.
pub const INBOX_CAPACITY: usize = 4096;

/// A learned entry on its way to another lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneRecord {
    /// What was learned.
    pub entry: LearnedEntry,
    /// The posting lane's port membership count (ports added + removed) then.
    pub membership: u64,
}

#[derive(Debug, Default)]
struct Inbox {
    waiting: AtomicBool,
    records: Mutex<Vec<LaneRecord>>,
}

/// Counters of one lane's exchange with the others (single writer: the lane).
#[derive(Debug, Default)]
pub struct LaneCounters {
    posted: AtomicU64,
    lost: AtomicU64,
    applied: AtomicU64,
    stale: AtomicU64,
}

/// A snapshot of [`LaneCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneStats {
    /// Records this lane posted (counted once per receiving lane).
    pub posted: u64,
    /// Records this lane could not post: the receiver's inbox was full, or its own FDB's
    /// journal was.
    pub lost: u64,
    /// Records from other lanes this lane applied.
    pub applied: u64,
    /// Records from other lanes dropped because ports came or went in between.
    pub stale: u64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl LaneCounters {
    /// The counters now.
    pub fn snapshot(&self) -> LaneStats {
        LaneStats {
            posted: self.posted.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            applied: self.applied.load(Ordering::Relaxed),
            stale: self.stale.load(Ordering::Relaxed),
        }
    }
}

/// The lanes of one switch and their inboxes.
#[derive(Debug)]
pub struct LaneGroup {
    inboxes: Vec<Inbox>,
    counters: Vec<Arc<LaneCounters>>,
}

/// Why lanes could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a switch runs on 1 to {MAX_LANES} lanes, not {0}")]
pub struct BadLaneCount(pub usize);

impl LaneGroup {
    /// A group of `lanes` lanes, and one handle per lane (give each to its lane's switch).
    pub fn lanes(lanes: usize) -> Result<Vec<Lane>, BadLaneCount> {
        if !(1..=MAX_LANES).contains(&lanes) {
            return Err(BadLaneCount(lanes));
        }
        let group = Arc::new(LaneGroup {
            inboxes: (0..lanes)
                .map(|_| Inbox {
                    waiting: AtomicBool::new(false),
                    records: Mutex::new(Vec::with_capacity(INBOX_CAPACITY)),
                })
                .collect(),
            counters: (0..lanes).map(|_| Arc::default()).collect(),
        });
        Ok((0..lanes)
            .map(|index| Lane {
                group: Arc::clone(&group),
                index,
                taken: Vec::with_capacity(INBOX_CAPACITY),
            })
            .collect())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A lane that panicked holding an inbox left whole records in it (pushes are atomic
    // under the lock), so the data stays usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One lane's end of a [`LaneGroup`], held by that lane's switch.
#[derive(Debug)]
pub struct Lane {
    group: Arc<LaneGroup>,
    index: usize,
    /// Records taken from the inbox, applied outside its lock (reserved once).
    taken: Vec<LaneRecord>,
}

impl Lane {
    /// This lane's position in its group (0 is the lane the control plane reads first).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Lanes in the group.
    pub fn lanes(&self) -> usize {
        self.group.inboxes.len()
    }

    /// This lane's counters.
    pub fn counters(&self) -> Arc<LaneCounters> {
        self.group
            .counters
            .get(self.index)
            .cloned()
            .unwrap_or_default()
    }

    fn my_counters(&self) -> Option<&LaneCounters> {
        self.group.counters.get(self.index).map(|c| &**c)
    }

    /// Counts records the lane's own journal could not keep.
    pub(crate) fn count_lost(&self, n: u64) {
        if let Some(c) = self.my_counters() {
            bump(&c.lost, n);
        }
    }

    /// Posts `records` to every other lane.
    pub(crate) fn post(&self, records: &[LaneRecord]) {
        if records.is_empty() {
            return;
        }
        let (mut posted, mut lost) = (0u64, 0u64);
        for (i, inbox) in self.group.inboxes.iter().enumerate() {
            if i == self.index {
                continue;
            }
            let mut held = lock(&inbox.records);
            let room = INBOX_CAPACITY.saturating_sub(held.len());
            let fits = records.get(..room.min(records.len())).unwrap_or_default();
            held.extend_from_slice(fits);
            posted += fits.len() as u64;
            lost += (records.len() - fits.len()) as u64;
            inbox.waiting.store(true, Ordering::Release);
        }
        if let Some(c) = self.my_counters() {
            bump(&c.posted, posted);
            bump(&c.lost, lost);
        }
    }

    /// Takes the records waiting for this lane (none, without a lock, when no mail came).
    pub(crate) fn take(&mut self) -> &[LaneRecord] {
        self.taken.clear();
        if let Some(inbox) = self.group.inboxes.get(self.index) {
            // A plain load first: the common case (no mail) writes nothing shared.
            if inbox.waiting.load(Ordering::Relaxed) && inbox.waiting.swap(false, Ordering::Acquire)
            {
                self.taken.append(&mut lock(&inbox.records));
            }
        }
        &self.taken
    }

    /// Counts records taken in (`applied`) and dropped as stale.
    pub(crate) fn count_taken(&self, applied: u64, stale: u64) {
        if let Some(c) = self.my_counters() {
            bump(&c.applied, applied);
            bump(&c.stale, stale);
        }
    }
}

/// A transmit half used by every lane: one lock around it, taken per burst.
pub struct SharedTx {
    inner: Arc<SharedHalf>,
}

struct SharedHalf {
    tx: Mutex<Box<dyn PortTx>>,
    /// The half's `caps_generation`, read again whenever a lane holds the lock, so that the
    /// switch's per-batch look at it takes no lock. A change shows at the next burst.
    generation: AtomicU64,
}

impl SharedHalf {
    fn lock(&self) -> MutexGuard<'_, Box<dyn PortTx>> {
        let tx = lock(&self.tx);
        self.generation
            .store(tx.caps_generation(), Ordering::Relaxed);
        tx
    }
}

impl SharedTx {
    /// `lanes` handles on `tx`.
    pub fn share(tx: Box<dyn PortTx>, lanes: usize) -> Vec<SharedTx> {
        let generation = AtomicU64::new(tx.caps_generation());
        let inner = Arc::new(SharedHalf {
            tx: Mutex::new(tx),
            generation,
        });
        (0..lanes)
            .map(|_| SharedTx {
                inner: Arc::clone(&inner),
            })
            .collect()
    }
}

impl std::fmt::Debug for SharedTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTx")
            .field("handles", &Arc::strong_count(&self.inner))
            .finish()
    }
}

impl PortTx for SharedTx {
    fn caps(&self) -> PortCaps {
        self.inner.lock().caps()
    }

    fn transmit(&mut self, frames: &[TxFrame<'_>]) -> usize {
        self.inner.lock().transmit(frames)
    }

    fn caps_generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Relaxed)
    }

    fn too_big(&mut self, frame: &TxFrame<'_>, mtu: usize) {
        self.inner.lock().too_big(frame, mtu);
    }
}
