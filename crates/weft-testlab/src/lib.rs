//! Test support shared by the end-to-end tests of the port crates (weft-tap, weft-overlay):
//! network namespaces and veth pairs that clean up after themselves ([`lab`]), a switch
//! polled on its own thread the way a worker would ([`runner`]) and ports put on it
//! ([`ports`]: a TAP in a namespace), a switch on weft-runtime's worker ([`worker_switch`]),
//! DPDK testpmd as a vhost-user frontend ([`testpmd`]), and QEMU guests on vhost-user
//! sockets ([`qemu`]). Only for tests: every
//! helper panics with a clear message when the environment is not what the test needs.
#![allow(missing_docs, unreachable_pub, clippy::missing_panics_doc)]

pub mod blast;
pub mod etcd;
pub mod lab;
pub mod ports;
pub mod qemu;
pub mod qmp;
pub mod runner;
pub mod testpmd;
pub mod worker_switch;
