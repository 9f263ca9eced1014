//! Bodies of the vhost-user fuzz targets (`fuzz/fuzz_targets/vhost_*.rs`), also run by
//! proptests on stable. The port's two trust boundaries, each through the real code:
//!
//! - [`guest_rings`]: what a guest writes into its memory — descriptor tables, available
//!   rings, indexes, virtio-net headers, frames — read and written by both halves of a
//!   port.
//! - [`frontend_messages`]: what a frontend sends on the vhost-user socket — any request,
//!   any body, any file descriptors — through the `vhost` crate's parser into the port's
//!   request handler, then the rings it set up served once.

mod frontend;
mod rings;

/// A fuzz input, read front to back; zeros once it runs out (so every input decodes).
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    /// The next `n` bytes, fewer at the end.
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }

    /// A little-endian number of `n` bytes (at most 8).
    fn num(&mut self, n: usize) -> u64 {
        let bytes = self.take(n).iter().rev();
        bytes.fold(0, |v, b| v << 8 | u64::from(*b))
    }

    fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }
}

pub use frontend::frontend_messages;
pub use rings::{guest_rings, GuestRun};
