//! Cache hints for guest memory: lines to be read soon, lines to be written soon (taken
//! with `prefetchw` where the CPU has it), and lines done with (`clflushopt`). The prefetches
//! never fault, whatever the address; the flush only on an address that is mapped.

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

/// Whether the CPU has `clflushopt` (CPUID 7h.0, EBX bit 23), asked once.
#[cfg(target_arch = "x86_64")]
pub(super) fn has_clflushopt() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        core::arch::x86_64::__cpuid(0).eax >= 7
            && core::arch::x86_64::__cpuid_count(7, 0).ebx & (1 << 23) != 0
    })
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn has_clflushopt() -> bool {
    false
}

/// Lets the cache line `at` is in go from every cache (`clflushopt`: written back if dirty,
/// then invalidated), when `has_clflushopt` says the CPU has it; nothing otherwise (the
/// older `clflush` is ordered with every store and would cost more than it saves). The
/// line's contents are unchanged: the next access to it, by any core, reads it from memory.
///
/// # Safety
///
/// `at` must lie in memory mapped for reading (a flush faults where a read would).
#[inline(always)]
pub(super) unsafe fn evict_line(at: *const u8, has_clflushopt: bool) {
    #[cfg(target_arch = "x86_64")]
    if has_clflushopt {
        // SAFETY: the caller's contract (`at` mapped); `clflushopt` changes no memory
        // contents and no register, and runs only on CPUs that have it.
        unsafe {
            core::arch::asm!("clflushopt [{0}]", in(reg) at, options(nostack, preserves_flags));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, has_clflushopt);
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

/// Hints the caches toward the lines of a receive buffer's first `span` bytes at `at`
/// (at most [`PREFETCH_WRITE_MAX`]), to be written soon — all but the first `header`
/// bytes' lines, only to be read. The virtio-net header is written only where it changes
/// (`GuestBytes::store_header`), and at a stream's usual frame it does not: its line is
/// then shared with the guest's core, which reads it first thing (`num_buffers`), instead
/// of taken from it for a write that never comes. Asked for writing, that line was the
/// DPDK generator's costliest load beside weft (20 % of its samples, its mergeable
/// receive's `num_buffers` read); asked for reading, `scripts/ab-vhost` at 64 B gained
/// 18.7 %, 13.7 % and 4.1 % (30, 36 and 32 of 39 phases above 1; docs/performance-history.md,
/// "The header line left shared"). Hints only: never faults, whatever the address.
#[inline(always)]
pub(super) fn prefetch_receive_buffer(
    at: *const u8,
    header: usize,
    span: usize,
    has_prefetchw: bool,
) {
    let span = span.min(PREFETCH_WRITE_MAX);
    let header = header.min(span);
    if header > 0 {
        prefetch_ends(at, header);
    }
    // From the line holding the first byte after the header: a buffer that does not
    // start on a line boundary ends one line further on.
    let first = (at as usize).saturating_add(header) & !63;
    let end = (at as usize).saturating_add(span);
    for line in (first..end).step_by(64) {
        prefetch_for_write(line as *const u8, has_prefetchw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evicted_line_reads_back_unchanged() {
        let mut bytes = [0u8; 256];
        for (b, value) in bytes.iter_mut().zip(0..=u8::MAX) {
            *b = value;
        }
        for offset in [0, 63, 64, 130, 255] {
            // SAFETY: every offset lies inside `bytes`, which is mapped for reading.
            unsafe { evict_line(bytes.as_ptr().add(offset), has_clflushopt()) };
        }
        assert!(bytes.iter().zip(0..=u8::MAX).all(|(b, value)| *b == value));
    }

    #[test]
    fn prefetching_a_receive_buffer_never_faults_whatever_the_address() {
        let bytes = [0u8; 256];
        let wild = [
            core::ptr::null(),
            bytes.as_ptr(),
            usize::MAX as *const u8,
            (usize::MAX - 100) as *const u8,
        ];
        for at in wild {
            for (header, span) in [(12, 76), (0, 2048), (12, 0), (100, 12), (12, usize::MAX)] {
                for use_prefetchw in [false, true] {
                    prefetch_receive_buffer(at, header, span, use_prefetchw && has_prefetchw());
                }
            }
        }
    }
}
