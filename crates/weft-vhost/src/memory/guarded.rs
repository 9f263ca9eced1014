//! Guest memory and its SIGBUS guard as one owner. Everything that touches guest memory
//! holds it through an `Arc<GuardedMemory>` (the memory table, each ring, each data-path
//! batch), so the guard is released only when the last of them lets go — and just before
//! the regions are unmapped. A frontend that replaces its table while a batch still holds
//! frames lent from the old one, and then shrinks the old file, meets the guard, not a
//! dead process.

use std::ops::Deref;

use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestRegionMmap};

use super::sigbus::SigbusGuard;

/// Mapped guest memory, guarded against a frontend shrinking its files (`sigbus.rs`) for
/// as long as it is mapped.
///
/// Share it as `Arc<GuardedMemory>`, never by cloning the [`GuestMemoryMmap`] inside: a
/// clone would keep regions mapped after the guard was released.
#[derive(Debug)]
pub struct GuardedMemory {
    /// Dropped (leaving the registry) before `mem` unmaps: see `Drop`.
    guard: Option<SigbusGuard>,
    mem: GuestMemoryMmap,
}

impl GuardedMemory {
    /// `mem` with the guard registered over its regions.
    pub(crate) fn guarded(mem: GuestMemoryMmap, guard: SigbusGuard) -> Self {
        GuardedMemory {
            guard: Some(guard),
            mem,
        }
    }

    /// Guards `mem`, whose regions (in `mem`'s order) are replaced `pages[i]` bytes at a
    /// time when a SIGBUS hits them: for another kind of shared memory (memif regions) that
    /// wants the one SIGBUS handler of the process rather than a second one racing it.
    pub fn guard(mem: GuestMemoryMmap, pages: &[usize]) -> Result<Self, super::GuardError> {
        let guard = SigbusGuard::register(&mem, pages)?;
        Ok(GuardedMemory::guarded(mem, guard))
    }

    /// Memory the caller mapped (tests, and frontends in this process): nothing to guard.
    pub(crate) fn unguarded(mem: GuestMemoryMmap) -> Self {
        GuardedMemory { guard: None, mem }
    }

    /// The guest memory.
    pub fn memory(&self) -> &GuestMemoryMmap {
        &self.mem
    }

    /// True when a region lost pages under us (a SIGBUS was handled in it).
    pub fn tripped(&self) -> bool {
        self.guard.as_ref().is_some_and(SigbusGuard::tripped)
    }
}

impl Drop for GuardedMemory {
    fn drop(&mut self) {
        // Out of the registry first; the fields (the mapping) drop after this. In the other
        // order the handler could map over an address reused by a later mapping.
        drop(self.guard.take());
    }
}

impl Deref for GuardedMemory {
    type Target = GuestMemoryMmap;

    fn deref(&self) -> &GuestMemoryMmap {
        &self.mem
    }
}

/// So that code generic over guest memory (`virtio-queue`) takes it as it is.
impl GuestMemoryBackend for GuardedMemory {
    type R = GuestRegionMmap;

    fn num_regions(&self) -> usize {
        self.mem.num_regions()
    }

    fn find_region(&self, addr: GuestAddress) -> Option<&GuestRegionMmap> {
        self.mem.find_region(addr)
    }

    fn iter(&self) -> impl Iterator<Item = &GuestRegionMmap> {
        self.mem.iter()
    }
}
