//! Which offloads a port uses, and the [`PortCaps`] that follow from them.
//!
//! Offloads are symmetric: a port with TSO receives super-frames from the kernel and is
//! handed super-frames by the switch; a port without it receives MTU-sized frames and the
//! core segments for it (`weft_packet::gso`). The kernel would accept super-frames written to
//! a TAP or packet socket either way; reporting the same offloads both ways makes "TSO off"
//! mean what it means on a NIC, and lets tests drive the core's software paths.

use weft_switch::PortCaps;

/// The largest super-frame a port takes or produces: a 64 KiB IP packet behind an Ethernet
/// header and two VLAN tags.
pub const MAX_GSO_FRAME_LEN: usize = 65_535 + 22;

/// Offloads a port asks for (or ended up with, after probing the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Offloads {
    /// Frames may carry a checksum still to be computed (virtio `NEEDS_CSUM`).
    pub csum: bool,
    /// TCP super-frames (IPv4 and IPv6). Needs `csum`.
    pub tso: bool,
    /// UDP super-frames (USO). Needs `csum`.
    pub uso: bool,
}

impl Offloads {
    /// Everything: partial checksums, TSO and USO.
    pub const ALL: Offloads = Offloads {
        csum: true,
        tso: true,
        uso: true,
    };
    /// Partial checksums only.
    pub const CSUM_ONLY: Offloads = Offloads {
        csum: true,
        tso: false,
        uso: false,
    };
    /// Nothing: full checksums, MTU-sized frames.
    pub const NONE: Offloads = Offloads {
        csum: false,
        tso: false,
        uso: false,
    };

    /// The same offloads with segmentation dropped where checksum offload is missing (no
    /// kernel segments without it).
    pub const fn normalized(self) -> Offloads {
        Offloads {
            csum: self.csum,
            tso: self.tso && self.csum,
            uso: self.uso && self.csum,
        }
    }

    /// What a port with these offloads and this MTU tells the core.
    pub fn caps(self, mtu: usize) -> PortCaps {
        let o = self.normalized();
        let mut caps = PortCaps::plain(mtu);
        caps.partial_csum = o.csum;
        caps.tso4 = o.tso;
        caps.tso6 = o.tso;
        caps.uso = o.uso;
        if o.tso || o.uso {
            caps.max_gso_frame_len = MAX_GSO_FRAME_LEN;
        }
        caps
    }
}

impl Default for Offloads {
    fn default() -> Self {
        Offloads::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segmentation_without_checksum_offload_is_dropped() {
        let o = Offloads {
            csum: false,
            tso: true,
            uso: true,
        };
        assert_eq!(o.normalized(), Offloads::NONE);
        let caps = o.caps(1500);
        assert!(!caps.tso4 && !caps.uso && !caps.partial_csum);
        assert_eq!(caps.max_gso_frame_len, 0);
    }

    #[test]
    fn caps_follow_mtu_and_offloads() {
        let caps = Offloads::ALL.caps(9000);
        assert_eq!(caps.mtu, 9000);
        assert_eq!(caps.max_frame_len, 9022);
        assert!(caps.partial_csum && caps.tso4 && caps.tso6 && caps.uso);
        assert_eq!(caps.max_gso_frame_len, MAX_GSO_FRAME_LEN);
        let caps = Offloads::CSUM_ONLY.caps(1500);
        assert!(caps.partial_csum && !caps.tso4 && !caps.tso6 && !caps.uso);
    }
}
