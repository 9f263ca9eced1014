//! Worker threads for the data path.
//!
//! Each worker owns a [`SwitchRegistry`] (the switches assigned to it) and loops: run the
//! control-plane jobs that are waiting, poll every port of every switch once (a batch
//! each), and when nothing arrived, idle by the configured [`IdleStrategy`] — spinning
//! while traffic is likely to resume, then sleeping on the ports' readiness descriptors
//! (epoll) so an idle switch costs no CPU (VNET/P §4.3's yield strategies; OVS's
//! bounded, adaptive sleep for idle poll threads). The control plane never shares a lock
//! with a worker: it sends a closure ([`WorkerHandle::exec`]) that the worker runs between
//! batches, and reads counters through the switches' atomic counters.
//!
//! No `unsafe` here: affinity and the epoll/eventfd family come from `weft-sys`.
#![forbid(unsafe_code)]

mod clock;
mod idle;
mod worker;

pub use clock::{clock_base, now, wall_time_ns};
pub use idle::IdleStrategy;
pub use worker::{
    pin_to, spawn_worker, PausedWorker, WorkerConfig, WorkerGone, WorkerHandle, WorkerStats,
    EXEC_TIMEOUT,
};

pub use weft_switch::SwitchRegistry;
