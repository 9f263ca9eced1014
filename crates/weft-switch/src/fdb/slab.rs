//! Entry storage: a fixed-capacity slab of slots threaded by intrusive doubly linked lists.
//!
//! Lists link slots by index, so they cost no allocation per entry and every operation on
//! them is O(1). Each dynamic entry sits on two lists, oldest first: its port's list (that
//! port's LRU order, for fair eviction) and the table-wide ageing list (for a sweep that
//! touches only what expires). Both stay sorted by last-seen time because the FDB only
//! appends at the tail, stamped with its monotonic clock. Static entries are on neither
//! list; free slots chain through `by_port.next`.

use crate::types::PortId;

/// "No slot": the end of a list.
pub(super) const NIL: u32 = u32::MAX;

/// The two neighbours of a slot on one list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Link {
    pub(super) prev: u32,
    pub(super) next: u32,
}

impl Link {
    pub(super) const UNLINKED: Link = Link {
        prev: NIL,
        next: NIL,
    };
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Free,
    Dynamic,
    Static,
}

/// One entry (or a free slot).
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    /// `(vlan << 48) | mac`, see `super::pack_key`.
    pub(super) key: u64,
    /// Monotonic nanoseconds of the last refresh; unused for static entries.
    pub(super) last_seen: u64,
    pub(super) port: PortId,
    pub(super) kind: Kind,
    pub(super) by_port: Link,
    pub(super) by_age: Link,
    /// Flap dampening (see `guard.rs`): moves since `moves_since`, and the time until
    /// which the entry is held on its port (0: not held).
    pub(super) moves: u32,
    pub(super) moves_since: u64,
    pub(super) held_until: u64,
}

/// Head (oldest) and tail (newest) of one list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ends {
    pub(super) head: u32,
    pub(super) tail: u32,
}

impl Ends {
    pub(super) const EMPTY: Ends = Ends {
        head: NIL,
        tail: NIL,
    };
}

/// Which of a slot's two links a list operation uses.
#[derive(Clone, Copy, Debug)]
pub(super) enum Chain {
    ByPort,
    ByAge,
}

impl Slot {
    fn link(&mut self, chain: Chain) -> &mut Link {
        match chain {
            Chain::ByPort => &mut self.by_port,
            Chain::ByAge => &mut self.by_age,
        }
    }
}

/// The slot array. It grows by `push` up to its preallocated capacity and never
/// reallocates; freed slots are reused first.
#[derive(Debug)]
pub(super) struct Slab {
    slots: Vec<Slot>,
    free: u32,
    capacity: usize,
}

impl Slab {
    /// `capacity` must be below `NIL` (the config validation guarantees it).
    pub(super) fn with_capacity(capacity: usize) -> Slab {
        Slab {
            slots: Vec::with_capacity(capacity),
            free: NIL,
            capacity,
        }
    }

    pub(super) fn get(&self, i: u32) -> &Slot {
        &self.slots[i as usize]
    }

    pub(super) fn get_mut(&mut self, i: u32) -> &mut Slot {
        &mut self.slots[i as usize]
    }

    /// Stores `slot` (unlinked) and returns its index, or `None` when every slot is taken.
    pub(super) fn alloc(&mut self, slot: Slot) -> Option<u32> {
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.get(i).by_port.next;
            *self.get_mut(i) = slot;
            i
        } else if self.slots.len() < self.capacity {
            let i = u32::try_from(self.slots.len()).ok()?;
            self.slots.push(slot);
            i
        } else {
            return None;
        };
        let s = self.get_mut(i);
        s.by_port = Link::UNLINKED;
        s.by_age = Link::UNLINKED;
        Some(i)
    }

    /// Returns slot `i` (already unlinked from every list) to the free chain.
    pub(super) fn release(&mut self, i: u32) {
        let free = self.free;
        let s = self.get_mut(i);
        s.kind = Kind::Free;
        s.by_port = Link {
            prev: NIL,
            next: free,
        };
        s.by_age = Link::UNLINKED;
        self.free = i;
    }

    /// How many slots have ever been handed out: every occupied index is below this.
    pub(super) fn high_water(&self) -> usize {
        self.slots.len()
    }

    /// Occupied slots with their indices, in index order.
    pub(super) fn occupied(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.slots.iter().filter(|s| s.kind != Kind::Free)
    }

    /// Appends slot `i` at the tail (newest end) of the list `ends`.
    pub(super) fn push_back(&mut self, ends: &mut Ends, i: u32, chain: Chain) {
        let old_tail = ends.tail;
        *self.get_mut(i).link(chain) = Link {
            prev: old_tail,
            next: NIL,
        };
        if old_tail == NIL {
            ends.head = i;
        } else {
            self.get_mut(old_tail).link(chain).next = i;
        }
        ends.tail = i;
    }

    /// Takes slot `i` off the list `ends` (it must be on it).
    pub(super) fn unlink(&mut self, ends: &mut Ends, i: u32, chain: Chain) {
        let Link { prev, next } = *self.get_mut(i).link(chain);
        if prev == NIL {
            ends.head = next;
        } else {
            self.get_mut(prev).link(chain).next = next;
        }
        if next == NIL {
            ends.tail = prev;
        } else {
            self.get_mut(next).link(chain).prev = prev;
        }
        *self.get_mut(i).link(chain) = Link::UNLINKED;
    }

    /// Puts slot `i` (on no list) right after `after` on the list `ends`, or at its head
    /// when `after` is `NIL`.
    pub(super) fn insert_after(&mut self, ends: &mut Ends, after: u32, i: u32, chain: Chain) {
        let next = if after == NIL {
            ends.head
        } else {
            self.get_mut(after).link(chain).next
        };
        *self.get_mut(i).link(chain) = Link { prev: after, next };
        if after == NIL {
            ends.head = i;
        } else {
            self.get_mut(after).link(chain).next = i;
        }
        if next == NIL {
            ends.tail = i;
        } else {
            self.get_mut(next).link(chain).prev = i;
        }
    }

    /// Moves slot `i` to the tail of `ends`.
    pub(super) fn move_to_back(&mut self, ends: &mut Ends, i: u32, chain: Chain) {
        if ends.tail != i {
            self.unlink(ends, i, chain);
            self.push_back(ends, i, chain);
        }
    }

    /// The reserved size of the slot array (to check it never grows).
    #[cfg(test)]
    pub(super) fn reserved(&self) -> usize {
        self.slots.capacity()
    }

    /// Walks a list from oldest to newest (for invariant checks in tests).
    #[cfg(test)]
    pub(super) fn walk(&self, ends: Ends, chain: Chain) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = ends.head;
        while i != NIL && out.len() <= self.slots.len() {
            out.push(i);
            let mut slot = *self.get(i);
            i = slot.link(chain).next;
        }
        out
    }
}
