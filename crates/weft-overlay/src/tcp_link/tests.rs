//! Tests of the TCP link: the framing codec (properties), and (on loopback) two ports.

mod codec;
mod sockets;
