//! What the client asks for, and what it got.

use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_net::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6,
    VIRTIO_NET_F_GUEST_USO4, VIRTIO_NET_F_GUEST_USO6, VIRTIO_NET_F_HOST_TSO4,
    VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_HOST_USO, VIRTIO_NET_F_MRG_RXBUF,
};
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use weft_packet::OffloadInfo;

/// The largest Ethernet frame (64 KB IP packet, Ethernet header and two VLAN tags): the size
/// of a TSO super-frame, and the same limit weft's vhost-user ports apply.
pub const MAX_FRAME_LEN: usize = 65_535 + 22;

/// The virtio-net header before every frame (`VERSION_1` layout, `num_buffers` included).
pub const HEADER_LEN: usize = weft_packet::virtio_net::HEADER_LEN;

/// How a client sets itself up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Entries of each ring (a power of two, 2..=32768; the backend may allow fewer — weft's
    /// ports default to 1024).
    pub queue_size: u16,
    /// The MTU of ordinary frames (largest L3 packet), 68..=65535.
    pub mtu: usize,
    /// Accept checksum and TCP segmentation offloads (`CSUM`, `GUEST_CSUM`, `HOST_TSO4/6`,
    /// `GUEST_TSO4/6`) when offered.
    pub offloads: bool,
    /// With `offloads`, also accept UDP segmentation (`HOST_USO`, `GUEST_USO4/6`) when
    /// offered: UDP super-frames sent and received whole.
    pub uso: bool,
    /// Accept mergeable receive buffers (`MRG_RXBUF`) when offered: receive buffers of
    /// [`rx_buffer_len`](Self::rx_buffer_len) bytes, a large frame spanning several.
    /// Without it every receive buffer holds a whole frame (64 KB each with TSO).
    pub mergeable_rx_buffers: bool,
    /// Size of one receive buffer with mergeable buffers (at least 1536 bytes).
    pub rx_buffer_len: usize,
    /// Accept `EVENT_IDX` (notification suppression by ring index) when offered.
    pub event_idx: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            queue_size: 256,
            mtu: 1500,
            offloads: true,
            uso: true,
            mergeable_rx_buffers: true,
            rx_buffer_len: 4096,
            event_idx: true,
        }
    }
}

pub(crate) const fn bit(b: u32) -> u64 {
    1u64 << b
}

const OFFLOADS: u64 = bit(VIRTIO_NET_F_CSUM)
    | bit(VIRTIO_NET_F_GUEST_CSUM)
    | bit(VIRTIO_NET_F_HOST_TSO4)
    | bit(VIRTIO_NET_F_HOST_TSO6)
    | bit(VIRTIO_NET_F_GUEST_TSO4)
    | bit(VIRTIO_NET_F_GUEST_TSO6);

const USO: u64 =
    bit(VIRTIO_NET_F_HOST_USO) | bit(VIRTIO_NET_F_GUEST_USO4) | bit(VIRTIO_NET_F_GUEST_USO6);

impl ClientConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.queue_size < 2 || !self.queue_size.is_power_of_two() || self.queue_size > 32_768 {
            return Err("queue_size must be a power of two in 2..=32768");
        }
        if !(68..=65_535).contains(&self.mtu) {
            return Err("mtu must be in 68..=65535");
        }
        if self.rx_buffer_len < 1536 || self.rx_buffer_len > MAX_FRAME_LEN + HEADER_LEN {
            return Err("rx_buffer_len must be in 1536..=65569");
        }
        Ok(())
    }

    /// The virtio feature bits this client implements and wants under this configuration.
    /// Everything else offered is declined (e.g. indirect descriptors, `MTU`, `STATUS`,
    /// `MQ`, packed rings): a driver must not accept what it does not implement.
    pub fn wanted_features(&self) -> u64 {
        let mut f = bit(VIRTIO_F_VERSION_1);
        if self.offloads {
            f |= OFFLOADS;
            if self.uso {
                f |= USO;
            }
        }
        if self.mergeable_rx_buffers {
            f |= bit(VIRTIO_NET_F_MRG_RXBUF);
        }
        if self.event_idx {
            f |= bit(VIRTIO_RING_F_EVENT_IDX);
        }
        f
    }
}

/// The features both sides agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Negotiated(pub u64);

impl Negotiated {
    /// True when feature bit `b` was agreed.
    pub const fn has(self, b: u32) -> bool {
        self.0 & bit(b) != 0
    }

    /// Mergeable receive buffers.
    pub const fn mergeable_rx(self) -> bool {
        self.has(VIRTIO_NET_F_MRG_RXBUF)
    }

    /// Notification suppression by ring index.
    pub const fn event_idx(self) -> bool {
        self.has(VIRTIO_RING_F_EVENT_IDX)
    }

    /// The backend may send us frames with a checksum still to be computed.
    pub const fn rx_partial_csum(self) -> bool {
        self.has(VIRTIO_NET_F_GUEST_CSUM)
    }

    /// The backend may send us TCP super-frames (IPv4 or IPv6).
    pub const fn rx_tso(self) -> bool {
        self.has(VIRTIO_NET_F_GUEST_TSO4) || self.has(VIRTIO_NET_F_GUEST_TSO6)
    }

    /// The backend may send us UDP super-frames (we take both IPv4 and IPv6 ones, as weft
    /// sends them only then).
    pub const fn rx_uso(self) -> bool {
        self.has(VIRTIO_NET_F_GUEST_USO4) && self.has(VIRTIO_NET_F_GUEST_USO6)
    }

    /// True when we may send a frame with this offload state (virtio 1.x §5.1.6.2: a driver
    /// must not use what it did not negotiate).
    pub fn may_send(self, info: &OffloadInfo) -> bool {
        weft_packet::virtio_net::driver_may_send(self.0, info)
    }

    /// The largest frame we may transmit: 64 KB + 22 with host TSO or USO, MTU + 22
    /// without.
    pub fn max_tx_frame(self, mtu: usize) -> usize {
        if self.has(VIRTIO_NET_F_HOST_TSO4)
            || self.has(VIRTIO_NET_F_HOST_TSO6)
            || self.has(VIRTIO_NET_F_HOST_USO)
        {
            MAX_FRAME_LEN
        } else {
            mtu + 22
        }
    }

    /// The largest frame the backend may send us.
    pub fn max_rx_frame(self, mtu: usize) -> usize {
        if self.rx_tso() || self.rx_uso() {
            MAX_FRAME_LEN
        } else {
            mtu + 22
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_packet::GsoKind;

    #[test]
    fn unimplemented_features_are_never_wanted() {
        use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_INDIRECT_DESC;
        let all = ClientConfig::default().wanted_features();
        assert_eq!(all & bit(VIRTIO_RING_F_INDIRECT_DESC), 0);
        assert_eq!(
            all & bit(virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_MQ),
            0
        );
        let bare = ClientConfig {
            offloads: false,
            mergeable_rx_buffers: false,
            event_idx: false,
            ..ClientConfig::default()
        }
        .wanted_features();
        assert_eq!(bare, bit(VIRTIO_F_VERSION_1));
    }

    #[test]
    fn only_negotiated_offloads_may_be_sent() {
        let tso4 = OffloadInfo {
            needs_csum: true,
            gso: GsoKind::TcpV4,
            ..OffloadInfo::default()
        };
        assert!(!Negotiated(0).may_send(&tso4));
        assert!(Negotiated(0).may_send(&OffloadInfo::default()));
        let n = Negotiated(bit(VIRTIO_NET_F_CSUM) | bit(VIRTIO_NET_F_HOST_TSO4));
        assert!(n.may_send(&tso4));
        assert_eq!(n.max_tx_frame(1500), MAX_FRAME_LEN);
        assert_eq!(Negotiated(0).max_tx_frame(1500), 1522);
    }

    #[test]
    fn bad_settings_are_refused() {
        for c in [
            ClientConfig {
                queue_size: 3,
                ..ClientConfig::default()
            },
            ClientConfig {
                queue_size: 1,
                ..ClientConfig::default()
            },
            ClientConfig {
                mtu: 67,
                ..ClientConfig::default()
            },
            ClientConfig {
                rx_buffer_len: 100,
                ..ClientConfig::default()
            },
        ] {
            assert!(c.validate().is_err(), "{c:?}");
        }
        assert!(ClientConfig::default().validate().is_ok());
    }
}
