//! Iovecs tied to the memory they describe: an [`IoVec<'a>`] can only be made from memory
//! that lives for `'a` (weft's own bytes, or a [`VolatileSlice`] of memory a guest shares,
//! which is never read as a `&[u8]`: only the kernel copies from it), so a system call that
//! takes iovecs borrowed for the call reads only live memory.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd};

use vm_memory::VolatileSlice;

/// Memory the kernel reads from (a piece of an outgoing datagram or frame), borrowed for
/// `'a`. Laid out as a C `struct iovec`.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct IoVec<'a> {
    raw: libc::iovec,
    memory: PhantomData<&'a [u8]>,
}

impl std::fmt::Debug for IoVec<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoVec({:p}, {})", self.raw.iov_base, self.raw.iov_len)
    }
}

// SAFETY: an IoVec is a shared borrow of bytes (`&'a [u8]` or a `VolatileSlice<'a>`, both
// Send and Sync); its pointer is only ever handed to the kernel to read from.
unsafe impl Send for IoVec<'_> {}
// SAFETY: as above.
unsafe impl Sync for IoVec<'_> {}

impl Default for IoVec<'_> {
    fn default() -> Self {
        IoVec::EMPTY
    }
}

impl IoVec<'static> {
    /// No bytes.
    pub const EMPTY: IoVec<'static> = IoVec {
        raw: libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        },
        memory: PhantomData,
    };
}

impl<'a> IoVec<'a> {
    /// Bytes in weft's own memory.
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        IoVec {
            raw: libc::iovec {
                // The kernel only reads through it (the C declaration is not const).
                iov_base: bytes.as_ptr().cast_mut().cast(),
                iov_len: bytes.len(),
            },
            memory: PhantomData,
        }
    }

    /// Bytes in memory another party shares (a guest's buffer): the kernel copies them as
    /// they are at the time of the call.
    #[inline]
    pub fn shared(slice: VolatileSlice<'a>) -> Self {
        IoVec {
            raw: libc::iovec {
                iov_base: slice.ptr_guard().as_ptr().cast_mut().cast(),
                iov_len: slice.len(),
            },
            memory: PhantomData,
        }
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.raw.iov_len
    }

    /// True when it describes no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw.iov_len == 0
    }

    /// Where the bytes start (for tests and checks; never dereferenced here).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.raw.iov_base.cast_const().cast()
    }

    pub(crate) fn raw(&self) -> libc::iovec {
        self.raw
    }
}

/// Memory the kernel writes into (a receive buffer), exclusively borrowed for `'a`.
#[repr(transparent)]
pub struct IoVecMut<'a> {
    raw: libc::iovec,
    memory: PhantomData<&'a mut [u8]>,
}

// SAFETY: an IoVecMut is an exclusive borrow of bytes (`&'a mut [u8]`, Send); its pointer is
// only ever handed to the kernel to write into.
unsafe impl Send for IoVecMut<'_> {}

impl<'a> IoVecMut<'a> {
    /// A buffer in weft's own memory.
    #[inline]
    pub fn new(bytes: &'a mut [u8]) -> Self {
        IoVecMut {
            raw: libc::iovec {
                iov_base: bytes.as_mut_ptr().cast(),
                iov_len: bytes.len(),
            },
            memory: PhantomData,
        }
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.raw.iov_len
    }

    /// True when it describes no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw.iov_len == 0
    }

    pub(crate) fn raw(&self) -> libc::iovec {
        self.raw
    }
}

/// `writev` of `iov` to `fd`. Returns the bytes written.
pub fn writev(fd: impl AsFd, iov: &[IoVec<'_>]) -> io::Result<usize> {
    let n = libc::c_int::try_from(iov.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `iov` is a live array of at least `n` iovecs (`IoVec` is a transparent
    // `struct iovec`), each describing memory borrowed for at least this call; the kernel
    // only reads through them.
    let written = unsafe { libc::writev(fd.as_fd().as_raw_fd(), iov.as_ptr().cast(), n) };
    // Negative only on error (-1); any other value is a byte count.
    usize::try_from(written).map_err(|_| io::Error::last_os_error())
}

/// A reusable list of iovecs: its storage (and capacity) outlives each use, while the
/// iovecs of one use ([`IoVecList`]) live only as long as the memory they describe.
#[derive(Default)]
pub struct IoVecStore {
    raw: Vec<libc::iovec>,
}

// SAFETY: between uses the stored pointers are stale and never read (every use starts by
// clearing the list); during a use they are shared borrows held by the `IoVecList`, which
// is Send for the same reason `IoVec` is.
unsafe impl Send for IoVecStore {}
// SAFETY: a shared `&IoVecStore` exposes nothing of the stored pointers (only the capacity).
unsafe impl Sync for IoVecStore {}

impl std::fmt::Debug for IoVecStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoVecStore(capacity {})", self.raw.capacity())
    }
}

impl IoVecStore {
    /// Room for `capacity` iovecs before the first use.
    pub fn with_capacity(capacity: usize) -> Self {
        IoVecStore {
            raw: Vec::with_capacity(capacity),
        }
    }

    /// An empty list whose iovecs borrow memory for `'a`.
    pub fn start<'a>(&mut self) -> IoVecList<'_, 'a> {
        self.raw.clear();
        IoVecList {
            store: self,
            memory: PhantomData,
        }
    }
}

/// One use of an [`IoVecStore`]: iovecs describing memory borrowed for `'a`.
pub struct IoVecList<'s, 'a> {
    store: &'s mut IoVecStore,
    memory: PhantomData<IoVec<'a>>,
}

impl<'a> IoVecList<'_, 'a> {
    /// Appends `iov` (the store grows only when its capacity is short).
    #[inline]
    pub fn push(&mut self, iov: IoVec<'a>) {
        self.store.raw.push(iov.raw());
    }

    /// Appends every iovec of `iovs`.
    #[inline]
    pub fn extend(&mut self, iovs: &[IoVec<'a>]) {
        self.store.raw.extend(iovs.iter().map(IoVec::raw));
    }

    /// The iovecs so far.
    pub fn as_slice(&self) -> &[IoVec<'a>] {
        let raw = &self.store.raw;
        // SAFETY: `IoVec` is a transparent `libc::iovec`; every entry was pushed in this use
        // from an `IoVec<'a>` (the list was cleared when the use began), so each is one.
        unsafe { std::slice::from_raw_parts(raw.as_ptr().cast(), raw.len()) }
    }

    /// How many iovecs so far.
    pub fn len(&self) -> usize {
        self.store.raw.len()
    }

    /// True before the first push.
    pub fn is_empty(&self) -> bool {
        self.store.raw.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn writev_gathers_own_and_shared_memory_in_order() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut shared = [7u8; 3];
        let iov = [
            IoVec::new(b"ab"),
            IoVec::EMPTY,
            IoVec::shared(VolatileSlice::from(&mut shared[..])),
        ];
        assert_eq!(writev(&a, &iov).unwrap(), 5);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(got, *b"ab\x07\x07\x07");
    }

    #[test]
    fn a_store_keeps_its_capacity_across_uses() {
        let mut store = IoVecStore::with_capacity(4);
        let bytes = [1u8; 8];
        {
            let mut list = store.start();
            list.push(IoVec::new(&bytes[..2]));
            list.extend(&[IoVec::new(&bytes[2..]), IoVec::EMPTY]);
            let lens: Vec<usize> = list.as_slice().iter().map(IoVec::len).collect();
            assert_eq!(lens, [2, 6, 0]);
        }
        assert!(store.start().is_empty());
        assert!(store.raw.capacity() >= 4);
    }
}
