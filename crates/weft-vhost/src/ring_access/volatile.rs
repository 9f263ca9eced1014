//! Unaligned reads and writes of guest memory through host pointers whose ranges the caller
//! has checked.

/// A value as it lies in guest memory: read and written with no alignment assumed (the
/// spec aligns the rings, but a frontend's word is not trusted), as `vm-memory` does.
#[repr(C, packed)]
pub(super) struct Unaligned<T>(pub(super) T);

/// Reads a `T` at `at`, volatile (the guest may change it at any time).
///
/// # Safety
///
/// `at` must be valid for reading `size_of::<T>()` bytes, and `T` valid for any bits.
#[inline(always)]
pub(super) unsafe fn read_guest<T: Copy>(at: *const u8) -> T {
    // SAFETY: the caller's contract; the packed wrapper makes any address aligned.
    unsafe { core::ptr::read_volatile(at.cast::<Unaligned<T>>()).0 }
}

/// Writes `value` at `at`, unaligned. Not volatile, like the frames' copies: the memory is
/// shared with the guest, so the compiler can neither drop these stores nor move them past
/// the used index's Release store that publishes them, and a volatile unaligned store makes
/// it go through the stack.
///
/// # Safety
///
/// `at` must be valid for writing `size_of::<T>()` bytes.
#[inline(always)]
pub(super) unsafe fn write_guest<T: Copy>(at: *mut u8, value: T) {
    // SAFETY: the caller's contract; `write_unaligned` assumes no alignment.
    unsafe { at.cast::<T>().write_unaligned(value) }
}
