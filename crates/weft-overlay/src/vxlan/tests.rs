//! Unit tests: encapsulation bytes, flow hashing, decapsulation of hostile datagrams, the
//! remote FDB's bounds and directory entries, the flood list; and (as root) two ports
//! talking over loopback.

mod codec;
mod directory;
mod flood_list;
mod handover;
mod handover_hostile;
mod offload;
mod remote_ageing;
mod small_gso;
mod sockets;
mod too_big_switch;
mod udp_merge;
// Drops a capability with `capset`, which has no safe wrapper in the dependencies.
#[allow(unsafe_code)]
mod unprivileged;
