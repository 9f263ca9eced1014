//! The flood list: where head-end replication sends broadcast, multicast and unknown
//! unicast, and whom the receive half takes datagrams from (without learning). It is the
//! configured remotes and the directory's VTEPs for the VNI, and it changes while the port
//! runs ([`FloodList::set_directory`]). Each half keeps its own copy ([`FloodCopy`]) and
//! checks a generation counter once per burst: one atomic load when nothing changed, a lock
//! and a copy into a vector that keeps its capacity only after a change.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::OverlayError;
use crate::vxlan::config::usable_endpoint;
use crate::MAX_FLOOD_REMOTES;

/// What [`crate::RemoteFdbHandle::set_directory_remotes`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FloodApplied {
    /// Remotes on the flood list now, configured ones included.
    pub remotes: usize,
    /// Directory VTEPs left out: the port's own address, another address family's,
    /// unspecified, multicast or broadcast.
    pub refused: usize,
    /// Directory VTEPs given twice, or already configured remotes.
    pub duplicates: usize,
}

/// The lists, in the order the halves take them.
#[derive(Debug, Default)]
struct Lists {
    /// Configured remotes, then the directory's (transmit: replication order).
    flood: Vec<IpAddr>,
    /// The same, sorted (receive: a binary search per datagram).
    sorted: Vec<IpAddr>,
}

/// One port's flood list, shared by its halves and its control handle.
#[derive(Debug)]
pub(crate) struct FloodList {
    /// Bumped (under the lock) after each change.
    generation: AtomicU64,
    lists: Mutex<Lists>,
    local: IpAddr,
    /// As configured (checked when the port opened), kept first and as given.
    configured: Vec<IpAddr>,
}

impl FloodList {
    pub(crate) fn new(local: IpAddr, configured: &[IpAddr]) -> FloodList {
        let mut sorted = configured.to_vec();
        sorted.sort_unstable();
        FloodList {
            generation: AtomicU64::new(0),
            lists: Mutex::new(Lists {
                flood: configured.to_vec(),
                sorted,
            }),
            local,
            configured: configured.to_vec(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lists> {
        // The lists are replaced whole: a panic elsewhere cannot leave them half written.
        self.lists.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `directory` the directory's VTEPs: the flood list becomes the configured
    /// remotes and those (the unusable and duplicate ones left out, and counted). More than
    /// [`MAX_FLOOD_REMOTES`] in all is an error, and the list stays as it was.
    pub(crate) fn set_directory(&self, directory: &[IpAddr]) -> Result<FloodApplied, OverlayError> {
        // Built before taking the lock: the halves wait on it only for the swap.
        let mut added: Vec<IpAddr> = directory
            .iter()
            .copied()
            .filter(|ip| usable_endpoint(self.local, *ip))
            .collect();
        let refused = directory.len() - added.len();
        let usable = added.len();
        added.sort_unstable();
        added.dedup();
        added.retain(|ip| !self.configured.contains(ip));
        let remotes = self.configured.len() + added.len();
        if remotes > MAX_FLOOD_REMOTES {
            return Err(OverlayError::FloodListFull {
                remotes,
                max: MAX_FLOOD_REMOTES,
            });
        }
        let mut flood = Vec::with_capacity(remotes);
        flood.extend_from_slice(&self.configured);
        flood.extend_from_slice(&added);
        let mut sorted = flood.clone();
        sorted.sort_unstable();
        let old = {
            let mut lists = self.lock();
            let old = std::mem::replace(&mut *lists, Lists { flood, sorted });
            self.generation.fetch_add(1, Ordering::Release);
            old
        };
        drop(old);
        Ok(FloodApplied {
            remotes,
            refused,
            duplicates: usable - added.len(),
        })
    }

    /// The flood list now, in replication order.
    pub(crate) fn remotes(&self) -> Vec<IpAddr> {
        self.lock().flood.clone()
    }

    /// The directory's VTEPs on the list (the configured remotes left out).
    pub(crate) fn directory_remotes(&self) -> Vec<IpAddr> {
        let lists = self.lock();
        lists
            .flood
            .iter()
            .skip(self.configured.len())
            .copied()
            .collect()
    }

    /// A copy for a half: `sorted` for the receive half.
    pub(crate) fn follow(self: &Arc<Self>, sorted: bool) -> FloodCopy {
        let mut copy = FloodCopy {
            list: Arc::clone(self),
            seen: u64::MAX,
            sorted,
            remotes: Vec::new(),
        };
        copy.refresh();
        copy
    }
}

/// A half's copy of the flood list.
#[derive(Debug)]
pub(crate) struct FloodCopy {
    list: Arc<FloodList>,
    /// The generation copied.
    seen: u64,
    sorted: bool,
    remotes: Vec<IpAddr>,
}

impl FloodCopy {
    /// Takes the list again if it changed since the last look (call once per burst); true
    /// when it did. Allocates only when the list grew past what this copy held before.
    pub(crate) fn refresh(&mut self) -> bool {
        if self.list.generation.load(Ordering::Acquire) == self.seen {
            return false;
        }
        let lists = self.list.lock();
        // Under the lock the generation is the one of these lists.
        self.seen = self.list.generation.load(Ordering::Relaxed);
        self.remotes.clone_from(if self.sorted {
            &lists.sorted
        } else {
            &lists.flood
        });
        true
    }

    /// The remotes (sorted in the receive half's copy).
    pub(crate) fn remotes(&self) -> &[IpAddr] {
        &self.remotes
    }
}
