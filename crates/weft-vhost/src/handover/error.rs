//! Why a hand-over could not be made: a port that will not suspend or describe itself (it
//! keeps serving), or a snapshot another process sent that this one will not adopt.

use std::time::Duration;

use crate::counters::QueueFault;
use crate::memory::MemoryTableError;

/// Why a port could not be suspended, described, or adopted.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// The control thread did not reach a message boundary in time: the frontend is
    /// sending a message and has not finished it (or the thread is busy with a slow one).
    /// The port keeps serving.
    #[error(
        "the control thread did not stop between two messages within {0:?} (a frontend \
         halfway through a message?); the port keeps serving"
    )]
    SuspendTimeout(Duration),
    /// The port is suspended already (another hand-over is under way).
    #[error("the port is suspended already")]
    AlreadySuspended,
    /// The port is being dropped.
    #[error("the port is stopping")]
    Stopping,
    /// A live migration is under way: the frontend has asked for dirty page logging
    /// (`VHOST_F_LOG_ALL`). The log, and the pages written while it moves, cannot follow.
    #[error(
        "a live migration is logging dirty pages on this port; hand it over once the \
         migration ends"
    )]
    Logging,
    /// A transmit queue's chains are lent to a batch that has not been finished (the worker
    /// was not paused after `finish`, or finished while the ring was locked). Handing it
    /// over would send them twice or lose them; finish the batch and try again.
    #[error(
        "{count} chains of queue {queue} are in flight (taken, not returned); finish the \
         batch and try again"
    )]
    InFlight {
        /// The queue.
        queue: &'static str,
        /// Chains taken and not returned.
        count: u16,
    },
    /// A queue took buffers it has not put in the used ring, outside any batch.
    #[error(
        "queue {queue} took buffers up to {next_avail} but returned them only up to \
         {next_used}"
    )]
    Unreturned {
        /// The queue.
        queue: &'static str,
        /// The next available entry it would take.
        next_avail: u16,
        /// The next used entry it would write.
        next_used: u16,
    },
    /// A queue is broken (until the frontend resets it); the other process could not
    /// reproduce why.
    #[error("queue {queue} is broken ({fault}) until the frontend resets it")]
    Broken {
        /// The queue.
        queue: &'static str,
        /// Why.
        fault: QueueFault,
    },
    /// The snapshot is of another version of this description.
    #[error("snapshot version {found}, this binary adopts version {expected}")]
    Version {
        /// The snapshot's version.
        found: u32,
        /// The version this binary reads.
        expected: u32,
    },
    /// A descriptor index beyond the descriptors passed.
    #[error("descriptor index {index} for the {what}, but {count} descriptors were passed")]
    FdIndex {
        /// The index.
        index: usize,
        /// What it was to be.
        what: &'static str,
        /// Descriptors passed.
        count: usize,
    },
    /// One descriptor named twice.
    #[error("descriptor {index} is named twice (the second time for the {what})")]
    FdReused {
        /// The index.
        index: usize,
        /// What it was to be the second time.
        what: &'static str,
    },
    /// A descriptor the snapshot does not name.
    #[error("descriptor {0} was passed but the snapshot does not name it")]
    FdUnused(usize),
    /// A descriptor of the wrong kind.
    #[error("descriptor {index} for the {what} is {found}, not {expected}")]
    FdKind {
        /// The index.
        index: usize,
        /// What it was to be.
        what: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },
    /// The snapshot is of a port in the other mode (a listener for a client-mode port, or
    /// none for a server-mode one).
    #[error("the snapshot is of a {found}-mode port, this port is in {expected} mode")]
    Mode {
        /// This port's mode.
        expected: &'static str,
        /// The snapshot's.
        found: &'static str,
    },
    /// The snapshot has another number of queues than this port's configuration.
    #[error("the snapshot has {found} queues, this port {expected}")]
    QueueCount {
        /// This port's queues.
        expected: usize,
        /// The snapshot's.
        found: usize,
    },
    /// The snapshot's memory table is refused as `SET_MEM_TABLE` would refuse it.
    #[error("the snapshot's memory table: {0}")]
    Memory(#[from] MemoryTableError),
    /// A request replayed from the snapshot is refused as the frontend's would be.
    #[error("the snapshot's {request} is refused: {reason}")]
    Refused {
        /// The request replayed (and the queue, for ring requests).
        request: String,
        /// Why.
        reason: String,
    },
    /// The snapshot describes something no frontend could have set up (a kick without a
    /// started ring, a started ring without its size).
    #[error("the snapshot is inconsistent: {0}")]
    Inconsistent(String),
    /// A started ring's used index in guest memory is not where the snapshot says the
    /// data path stopped: another writer moved it, or the memory is not that ring's.
    #[error("queue {queue} resumes at {snapshot} but its used index in guest memory is {guest}")]
    UsedIndex {
        /// The queue.
        queue: &'static str,
        /// Where the snapshot says it resumes.
        snapshot: u16,
        /// The used index in guest memory.
        guest: u16,
    },
    /// Restoring the feature negotiation into the `vhost` crate's handler failed.
    #[error("restoring the negotiation: {0}")]
    Negotiation(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

impl HandoverError {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> HandoverError {
        move |source| HandoverError::Io { what, source }
    }
}
