//! Zero-copy views over the bytes of network frames.
//!
//! Each protocol has a view type in the style of smoltcp's `wire` module: `new_unchecked`,
//! `check_len`, `new_checked`; after `check_len` succeeds no accessor panics. The crate also
//! holds Internet checksums and software segmentation of TSO/GSO super-frames.
//! No I/O and no unsafe code.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod arp;
pub mod checksum;
pub mod error;
pub mod ethernet;
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzz_entry;
pub mod gso;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod offload;
pub mod summary;
pub mod tcp;
pub mod udp;
pub mod virtio_net;
pub mod vlan;
pub mod vxlan;

pub use error::{ParseError, Result};
pub use ethernet::{EthernetFrame, MacAddr};
pub use gso::{complete_checksum, GsoError, Segmenter};
pub use icmp::{Icmpv4Packet, Icmpv6Packet};
pub use offload::{GsoKind, OffloadInfo};
pub use tcp::TcpPacket;
pub use udp::UdpPacket;
pub use virtio_net::{VirtioNetHeader, VirtioNetHeaderError};
pub use vxlan::{Vni, VxlanHeader};

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ipv4::Ipv4Packet;
pub use ipv6::{Ipv6Fragment, Ipv6Packet, Ipv6UpperLayer};
pub use summary::{FragmentKind, FrameSummary, L3Summary, L4Summary};
pub use vlan::{VlanHeader, VlanStack, VlanTag, VlanTci};
