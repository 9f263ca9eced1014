//! Cache hints for guest memory: lines to be read soon, and lines to be written soon (taken
//! with `prefetchw` where the CPU has it). Hints only: none faults, whatever the address.

/// Most bytes of a receive buffer prefetched for writing: a 1514-byte frame and its header.
/// Every line is asked for, since the hardware prefetcher does not take lines for writing
/// ahead of a copy (a 1514 B run gained 16 % over asking for the first and last line only);
/// a bigger frame's later chains are prefetched in their turn. (That was for buffers asked
/// for one at a time, 8 chains ahead; a group asks for all of its buffers at once, and
/// for fewer bytes of each: `tx/plain_group.rs`.)
pub(super) const PREFETCH_WRITE_MAX: usize = 2048;

/// Starts loading the cache line `at` is in: a hint that never faults, whatever the
/// address.
#[inline(always)]
pub(super) fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it loads nothing into the program, never faults
    // whatever the address, and SSE (its target feature) is part of every x86_64 target.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
}

/// Whether the CPU has `prefetchw` (CPUID 8000_0001h, ECX bit 8), asked once.
#[cfg(target_arch = "x86_64")]
pub(super) fn has_prefetchw() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let max_extended = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max_extended >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0
    })
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn has_prefetchw() -> bool {
    false
}

/// Starts taking the cache line `at` is in for writing (`prefetchw` when `has_prefetchw`
/// says the CPU has it; a plain prefetch otherwise): a hint that never faults, whatever
/// the address.
#[inline(always)]
pub(super) fn prefetch_for_write(at: *const u8, has_prefetchw: bool) {
    #[cfg(target_arch = "x86_64")]
    if has_prefetchw {
        // SAFETY: `prefetchw` is a hint: it loads nothing into the program, writes nothing
        // and never faults whatever the address; it runs only on CPUs that have it.
        unsafe {
            core::arch::asm!("prefetchw [{0}]", in(reg) at, options(nostack, preserves_flags, readonly));
        }
        return;
    }
    prefetch(at);
}

/// Hints the caches toward the line holding the first of the `span` bytes at `at` and the
/// one holding the last (a frame often starts a line after its virtio-net header; the
/// hardware prefetcher follows a longer read). Hints only: never faults, whatever the address.
#[inline(always)]
pub(super) fn prefetch_ends(at: *const u8, span: usize) {
    prefetch(at);
    prefetch(at.wrapping_add(span.saturating_sub(1)));
}

/// Hints the caches toward every line of the `span` bytes at `at` (at most
/// [`PREFETCH_WRITE_MAX`]), to be written soon: from the line holding the first byte, since
/// a buffer that does not start on a line boundary ends one line further on. Hints only:
/// never faults, whatever the address.
#[inline(always)]
pub(super) fn prefetch_lines_for_write(at: *const u8, span: usize, has_prefetchw: bool) {
    let end = (at as usize).saturating_add(span.min(PREFETCH_WRITE_MAX));
    let mut line = at as usize & !63;
    while line < end {
        prefetch_for_write(line as *const u8, has_prefetchw);
        line += 64;
    }
}
