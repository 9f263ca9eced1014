//! weftd, the weft daemon: runs the switches in worker threads, serves the control socket
//! (the `weft-control` protocol), keeps the configuration across restarts in a state file,
//! and exports metrics.
//!
//! Code map: [`daemon`] starts and stops everything; [`config`] is the TOML file;
//! [`control`] answers requests (validating with [`model`], persisting with [`persist`],
//! changing switches through their workers); [`server`] is the control socket;
//! [`metrics`] the Prometheus endpoint; [`devices`] opens what stands behind ports.

pub mod config;
pub mod control;
pub mod daemon;
pub mod demo;
pub mod devices;
pub mod directory;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod metrics;
pub mod model;
pub mod persist;
pub mod ratelimit;
pub mod server;
pub mod socket_dirs;
pub mod systemd;
pub mod takeover;
