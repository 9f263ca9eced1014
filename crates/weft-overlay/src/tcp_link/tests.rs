//! Tests of the TCP link: the framing codec (properties), and (on loopback) two ports.

mod auth;
mod codec;
mod flood;
mod handover;
mod handover_hostile;
mod sockets;
