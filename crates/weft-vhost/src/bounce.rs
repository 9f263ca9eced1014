//! The receive half's bounce buffer: frames scattered in guest memory (or every frame,
//! when lending is off) are copied here for the batch. It grows on demand up to a limit
//! and is reused batch after batch, so it allocates only while it grows.

use vm_memory::VolatileSlice;

use crate::chain::ChainError;

/// A batch's worth of copied frames.
#[derive(Debug)]
pub(crate) struct Bounce {
    buf: Vec<u8>,
    used: usize,
    limit: usize,
}

/// The first allocation.
const INITIAL: usize = 256 << 10;

impl Bounce {
    pub(crate) fn new(limit: usize) -> Self {
        Bounce {
            buf: Vec::new(),
            used: 0,
            limit,
        }
    }

    /// Bytes in use.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Forgets everything after `at`.
    pub(crate) fn truncate(&mut self, at: usize) {
        self.used = self.used.min(at);
    }

    /// Forgets everything (the batch is finished).
    pub(crate) fn reset(&mut self) {
        self.used = 0;
    }

    /// Copies `src` at the end.
    pub(crate) fn append(&mut self, src: &VolatileSlice<'_>) -> Result<(), ChainError> {
        let end = self
            .used
            .checked_add(src.len())
            .filter(|end| *end <= self.limit)
            .ok_or(ChainError::NoRoom)?;
        if end > self.buf.len() {
            let grown = end
                .max(self.buf.len().saturating_mul(2))
                .max(INITIAL)
                .min(self.limit);
            self.buf.resize(grown, 0);
        }
        let dst = self.buf.get_mut(self.used..end).ok_or(ChainError::NoRoom)?;
        src.copy_to(dst);
        self.used = end;
        Ok(())
    }

    /// The bytes at `start..start + len` (empty when out of range).
    pub(crate) fn get(&self, start: usize, len: usize) -> &[u8] {
        start
            .checked_add(len)
            .filter(|end| *end <= self.used)
            .and_then(|end| self.buf.get(start..end))
            .unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_grow_up_to_the_limit_and_no_further() {
        let mut b = Bounce::new(INITIAL + 10);
        let mut src = vec![7u8; INITIAL];
        let slice = VolatileSlice::from(src.as_mut_slice());
        b.append(&slice).unwrap();
        assert_eq!(b.used(), INITIAL);
        let mut more = [1u8; 10];
        b.append(&VolatileSlice::from(&mut more[..])).unwrap();
        assert_eq!(b.get(INITIAL, 10), &[1u8; 10]);
        let mut one = [2u8; 1];
        assert_eq!(
            b.append(&VolatileSlice::from(&mut one[..])),
            Err(ChainError::NoRoom)
        );
        b.reset();
        assert!(b.get(0, 1).is_empty());
        b.append(&VolatileSlice::from(&mut one[..])).unwrap();
        assert_eq!(b.get(0, 1), &[2]);
    }

    #[test]
    fn out_of_range_reads_are_empty() {
        let b = Bounce::new(1 << 20);
        assert!(b.get(usize::MAX, 2).is_empty());
        assert!(b.get(0, 1).is_empty());
    }
}
