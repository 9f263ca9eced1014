//! What can go wrong, for the caller.

use std::io;

/// An error of the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The backend's socket could not be reached or a request failed.
    #[error(
        "vhost-user request failed: {0} (is a weft vhost-user port listening on that socket?)"
    )]
    Protocol(#[from] vhost::Error),
    /// The backend does not offer `VIRTIO_F_VERSION_1`, which this client requires.
    #[error("the backend does not offer VIRTIO_F_VERSION_1 (features {0:#x}); only modern virtio is supported")]
    NoVersion1(u64),
    /// The configuration cannot work.
    #[error("bad client configuration: {0}")]
    Config(&'static str),
    /// Creating, sealing or mapping the shared memory failed.
    #[error("shared memory: {0}")]
    Memory(io::Error),
    /// The shared memory would be larger than this machine can address.
    #[error("shared memory of {0} bytes is too large")]
    MemoryTooLarge(usize),
    /// An access fell outside the shared memory (a layout bug, never backend input).
    #[error("access at offset {0:#x} outside the shared memory")]
    OutOfBounds(u64),
    /// An eventfd operation (kick, call, wait) failed.
    #[error("eventfd: {0}")]
    EventFd(io::Error),
    /// A frame handed to `send_batch` cannot be sent; nothing of that batch was queued.
    #[error("frame {index} of the batch: {reason}")]
    BadFrame {
        /// Its position in the batch.
        index: usize,
        /// What is wrong with it.
        reason: FrameError,
    },
    /// The backend moved a used index further than the ring has entries: the ring can no
    /// longer be trusted and the queue is stopped. Reconnect to recover.
    #[error("the backend broke the {0} ring (used index ran ahead); reconnect")]
    QueueBroken(&'static str),
}

/// Why a frame cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than an Ethernet header.
    #[error("frame of {0} bytes is shorter than an Ethernet header (14)")]
    TooShort(usize),
    /// Longer than the transmit buffers (MTU + 22 without TSO, 64 KB + 22 with it).
    #[error("frame of {len} bytes exceeds the {max}-byte limit (larger frames need negotiated TSO and a GSO header)")]
    TooLong {
        /// The frame's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Asks for an offload (checksum or segmentation) that was not negotiated.
    #[error("frame asks for an offload the backend did not negotiate")]
    OffloadNotNegotiated,
    /// Longer than the MTU allows, and not a GSO super-frame.
    #[error("frame of {len} bytes above the MTU frame size {max} is not a GSO super-frame")]
    AboveMtu {
        /// The frame's length.
        len: usize,
        /// MTU + 22.
        max: usize,
    },
}
