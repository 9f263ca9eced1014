//! Where upcalls go after a batch: the subscriptions of control clients (`weft monitor
//! upcalls`).
//!
//! One [`UpcallHub`] serves every switch of a daemon (a subscription may want one switch or
//! all of them, including switches made later). Each [`UpcallSubscription`] is a bounded
//! ring of preallocated slots: a lane copies a batch's upcalls in under the subscription's
//! lock, once per batch, and a full ring loses the copy and counts it (shown to the
//! subscriber, and in the lane's [`UpcallStats::subscriber_lost`](super::UpcallStats)). A
//! slow subscriber never blocks a lane or another subscriber; the reader takes the same
//! lock only to copy a few upcalls out.
//!
//! Lock order: the hub's list, then one subscription. Readers take only a subscription's.

use std::sync::{Arc, Mutex, MutexGuard};

use super::UpcallReason;

/// The rule that sent a packet up, as the controller knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleRef {
    /// Its cookie.
    pub cookie: u64,
    /// Its priority.
    pub priority: u16,
}

/// One upcall as a subscription hands it out.
#[derive(Debug, Clone, Copy)]
pub struct SubscribedUpcall<'a> {
    /// The switch it came from.
    pub switch: &'a str,
    /// The port it came in on.
    pub port: &'a str,
    /// Why it was sent up.
    pub reason: UpcallReason,
    /// The rule that sent it, when one did.
    pub rule: Option<RuleRef>,
    /// The frame's full length.
    pub orig_len: usize,
    /// Its first bytes, up to the subscription's snap length.
    pub data: &'a [u8],
}

#[derive(Default)]
struct Slot {
    // Names and bytes are copied into buffers kept from one use to the next: they grow to
    // the longest name and the snap length once, then never allocate again.
    switch: String,
    port: String,
    reason: UpcallReason,
    rule: Option<RuleRef>,
    orig_len: usize,
    data: Vec<u8>,
}

struct Ring {
    slots: Vec<Slot>,
    head: usize,
    len: usize,
    lost: u64,
}

/// A subscriber's bounded queue of upcalls.
pub struct UpcallSubscription {
    /// The switch wanted, or every switch.
    switch: Option<String>,
    ring: Mutex<Ring>,
    snaplen: usize,
}

impl std::fmt::Debug for UpcallSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpcallSubscription")
            .field("switch", &self.switch)
            .field("snaplen", &self.snaplen)
            .finish()
    }
}

impl UpcallSubscription {
    /// A subscription to `switch`'s upcalls (every switch's with `None`), holding at most
    /// `capacity` (at least 1) upcalls of at most `snaplen` bytes each.
    pub fn new(switch: Option<String>, capacity: usize, snaplen: usize) -> Self {
        let capacity = capacity.max(1);
        UpcallSubscription {
            switch,
            ring: Mutex::new(Ring {
                slots: (0..capacity).map(|_| Slot::default()).collect(),
                head: 0,
                len: 0,
                lost: 0,
            }),
            snaplen,
        }
    }

    /// The switch wanted (`None`: all).
    pub fn switch(&self) -> Option<&str> {
        self.switch.as_deref()
    }

    /// True when the subscription wants upcalls of switch `name`.
    pub fn wants(&self, name: &str) -> bool {
        self.switch.as_deref().is_none_or(|s| s == name)
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock leaves at worst one half-written slot.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the ring for one batch's upcalls: one lock for all of them.
    pub(crate) fn writer(&self) -> SubscriptionWriter<'_> {
        SubscriptionWriter {
            ring: self.lock(),
            snaplen: self.snaplen,
        }
    }

    /// Hands up to `max` upcalls, oldest first, to `f` and frees their slots.
    pub fn drain(&self, max: usize, mut f: impl FnMut(&SubscribedUpcall<'_>)) -> usize {
        let mut ring = self.lock();
        let capacity = ring.slots.len();
        let n = ring.len.min(max);
        for _ in 0..n {
            let head = ring.head;
            let s = &ring.slots[head];
            f(&SubscribedUpcall {
                switch: &s.switch,
                port: &s.port,
                reason: s.reason,
                rule: s.rule,
                orig_len: s.orig_len,
                data: &s.data,
            });
            ring.head = (head + 1) % capacity;
            ring.len -= 1;
        }
        n
    }

    /// Upcalls this subscription lost because its queue was full, so far.
    pub fn lost(&self) -> u64 {
        self.lock().lost
    }

    /// Upcalls waiting.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most upcalls it holds.
    pub fn capacity(&self) -> usize {
        self.lock().slots.len()
    }
}

/// A subscription's ring, locked for one batch.
pub(crate) struct SubscriptionWriter<'a> {
    ring: MutexGuard<'a, Ring>,
    snaplen: usize,
}

impl SubscriptionWriter<'_> {
    /// Copies one upcall in; false when the ring is full (counted as lost).
    pub(crate) fn push(&mut self, up: &SubscribedUpcall<'_>) -> bool {
        let ring = &mut *self.ring;
        let capacity = ring.slots.len();
        if ring.len == capacity {
            ring.lost += 1;
            return false;
        }
        let at = (ring.head + ring.len) % capacity;
        let slot = &mut ring.slots[at];
        slot.switch.clear();
        slot.switch.push_str(up.switch);
        slot.port.clear();
        slot.port.push_str(up.port);
        slot.reason = up.reason;
        slot.rule = up.rule;
        slot.orig_len = up.orig_len;
        let keep = up.data.len().min(self.snaplen);
        slot.data.clear();
        slot.data.extend_from_slice(&up.data[..keep]);
        ring.len += 1;
        true
    }
}

/// The subscriptions every switch hands its upcalls to.
#[derive(Default)]
pub struct UpcallHub {
    subscriptions: Mutex<Vec<Arc<UpcallSubscription>>>,
}

impl std::fmt::Debug for UpcallHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpcallHub")
            .field("subscriptions", &self.len())
            .finish()
    }
}

impl UpcallHub {
    /// A hub with no subscription.
    pub fn new() -> Self {
        UpcallHub::default()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Arc<UpcallSubscription>>> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a subscription: upcalls handed over after this call reach it.
    pub fn subscribe(&self, subscription: Arc<UpcallSubscription>) {
        self.lock().push(subscription);
    }

    /// Removes a subscription; false when it was not there.
    pub fn unsubscribe(&self, subscription: &Arc<UpcallSubscription>) -> bool {
        let mut subs = self.lock();
        let before = subs.len();
        subs.retain(|s| !Arc::ptr_eq(s, subscription));
        subs.len() != before
    }

    /// Subscriptions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when there is no subscription.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up<'a>(switch: &'a str, data: &'a [u8]) -> SubscribedUpcall<'a> {
        SubscribedUpcall {
            switch,
            port: "p1",
            reason: UpcallReason::Action,
            rule: Some(RuleRef {
                cookie: 7,
                priority: 100,
            }),
            orig_len: data.len(),
            data,
        }
    }

    #[test]
    fn a_full_subscription_loses_and_counts_then_takes_again_after_a_read() {
        let s = UpcallSubscription::new(None, 2, 4);
        {
            let mut w = s.writer();
            assert!(w.push(&up("br0", &[1, 2, 3, 4, 5, 6])));
            assert!(w.push(&up("br1", &[2])));
            assert!(!w.push(&up("br0", &[3])));
        }
        assert_eq!(s.lost(), 1);
        let mut seen = Vec::new();
        assert_eq!(
            s.drain(1, |u| seen.push((
                u.switch.to_string(),
                u.data.to_vec(),
                u.orig_len
            ))),
            1
        );
        assert_eq!(seen, vec![("br0".to_string(), vec![1, 2, 3, 4], 6)]);
        assert!(s.writer().push(&up("br2", &[9])));
        seen.clear();
        assert_eq!(
            s.drain(10, |u| seen.push((
                u.switch.to_string(),
                u.data.to_vec(),
                u.orig_len
            ))),
            2
        );
        assert_eq!(seen[0].0, "br1");
        assert_eq!(seen[1].0, "br2");
        assert_eq!(s.lost(), 1, "losses stay counted");
    }

    #[test]
    fn a_subscription_wants_its_switch_or_every_switch() {
        assert!(UpcallSubscription::new(None, 1, 64).wants("any"));
        let s = UpcallSubscription::new(Some("br0".into()), 1, 64);
        assert!(s.wants("br0"));
        assert!(!s.wants("br1"));
    }

    #[test]
    fn unsubscribing_removes_only_that_subscription() {
        let hub = UpcallHub::new();
        let a = Arc::new(UpcallSubscription::new(None, 1, 64));
        let b = Arc::new(UpcallSubscription::new(None, 1, 64));
        hub.subscribe(Arc::clone(&a));
        hub.subscribe(Arc::clone(&b));
        assert!(hub.unsubscribe(&a));
        assert!(!hub.unsubscribe(&a));
        assert_eq!(hub.len(), 1);
    }
}
