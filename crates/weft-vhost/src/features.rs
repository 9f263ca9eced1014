//! Virtio feature bits: what the backend offers, and what follows from what the frontend
//! accepted (header length, mergeable buffers, which offloads may pass each way).

use vhost::vhost_user::message::VhostUserVirtioFeatures;
use virtio_bindings::bindings::virtio_config::{VIRTIO_F_IN_ORDER, VIRTIO_F_VERSION_1};
use virtio_bindings::bindings::virtio_net::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_ANNOUNCE, VIRTIO_NET_F_GUEST_CSUM,
    VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_GUEST_USO4,
    VIRTIO_NET_F_GUEST_USO6, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_HOST_USO,
    VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_NET_F_MTU, VIRTIO_NET_F_STATUS,
};
use virtio_bindings::bindings::virtio_ring::{
    VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};
use weft_packet::{virtio_net, OffloadInfo};
use weft_switch::PortCaps;

use crate::config::{VhostPortConfig, MAX_FRAME_LEN};

const fn bit(b: u32) -> u64 {
    1u64 << b
}

/// The offload bits, offered only when [`VhostPortConfig::offloads`] is on: checksums, TCP
/// segmentation and UDP segmentation (USO, virtio 1.2; Linux guests from 6.2 and QEMU from
/// 8.2 take it), each way.
const OFFLOAD_FEATURES: u64 = bit(VIRTIO_NET_F_CSUM)
    | bit(VIRTIO_NET_F_GUEST_CSUM)
    | bit(VIRTIO_NET_F_HOST_TSO4)
    | bit(VIRTIO_NET_F_HOST_TSO6)
    | bit(VIRTIO_NET_F_GUEST_TSO4)
    | bit(VIRTIO_NET_F_GUEST_TSO6)
    | bit(VIRTIO_NET_F_HOST_USO)
    | bit(VIRTIO_NET_F_GUEST_USO4)
    | bit(VIRTIO_NET_F_GUEST_USO6);

/// Bits offered whatever the configuration. `STATUS` and `MTU` describe fields of the
/// device configuration space, which the frontend (QEMU, virtio-user) emulates itself.
/// `IN_ORDER` promises what the port always does: every queue's buffers are used in the
/// order they were made available (a batch is taken and returned in ring order, the chains
/// of dropped frames included; a frame that does not fit gives its chains back). A driver
/// that knows it can skip the used ring's ids: DPDK's virtio PMD then takes its in-order
/// paths (10–20 % fewer cycles per frame than its general ones, in our benchmark's
/// generator).
///
/// For live migration: `VHOST_F_LOG_ALL` (the port logs the pages it writes while the
/// frontend asks; QEMU refuses to migrate a guest whose backend lacks it) and
/// `GUEST_ANNOUNCE` (a guest that takes it announces itself after a migration, through the
/// control queue the frontend emulates; for one that does not, QEMU asks the port to with
/// `SEND_RARP`).
const BASE_FEATURES: u64 = bit(VIRTIO_F_VERSION_1)
    | bit(VIRTIO_F_IN_ORDER)
    | bit(VIRTIO_RING_F_INDIRECT_DESC)
    | bit(VIRTIO_NET_F_MTU)
    | bit(VIRTIO_NET_F_STATUS)
    | bit(VIRTIO_NET_F_GUEST_ANNOUNCE)
    | VhostUserVirtioFeatures::LOG_ALL.bits();

/// The virtio features this backend offers under `config` (the vhost-user
/// `PROTOCOL_FEATURES` bit included).
pub fn offered_features(config: &VhostPortConfig) -> u64 {
    let mut f = BASE_FEATURES | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
    if config.offloads {
        f |= OFFLOAD_FEATURES;
    }
    if config.mergeable_rx_buffers {
        f |= bit(VIRTIO_NET_F_MRG_RXBUF);
    }
    if config.event_idx {
        f |= bit(VIRTIO_RING_F_EVENT_IDX);
    }
    if config.queue_pairs > 1 {
        // The control queue that MQ needs (VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET) is the
        // frontend's: QEMU and virtio-user answer it themselves and enable or disable the
        // pairs here with SET_VRING_ENABLE.
        f |= bit(VIRTIO_NET_F_MQ);
    }
    f
}

/// The features a frontend accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Features(pub u64);

impl Features {
    /// True when feature bit `b` was accepted.
    pub const fn has(self, b: u32) -> bool {
        self.0 & bit(b) != 0
    }

    /// Length of the virtio-net header before every frame: 12 bytes with `VERSION_1` or
    /// `MRG_RXBUF`, the 10-byte legacy header otherwise.
    pub const fn header_len(self) -> usize {
        if self.has(VIRTIO_F_VERSION_1) || self.has(VIRTIO_NET_F_MRG_RXBUF) {
            virtio_net::HEADER_LEN
        } else {
            virtio_net::LEGACY_HEADER_LEN
        }
    }

    /// Mergeable receive buffers: a frame to the guest may span several descriptor chains.
    pub const fn mergeable_rx(self) -> bool {
        self.has(VIRTIO_NET_F_MRG_RXBUF)
    }

    /// Notification suppression by ring index.
    pub const fn event_idx(self) -> bool {
        self.has(VIRTIO_RING_F_EVENT_IDX)
    }

    /// The guest takes frames whose checksum is still to be computed.
    pub const fn guest_csum(self) -> bool {
        self.has(VIRTIO_NET_F_GUEST_CSUM)
    }

    /// What the port can transmit to this guest. UDP super-frames go whole only to a guest
    /// that takes them over both IPv4 and IPv6 (the core has one `uso` for both); to any
    /// other they are cut into datagrams first.
    pub fn port_caps(self, mtu: usize) -> PortCaps {
        let csum = self.guest_csum();
        let tso4 = csum && self.has(VIRTIO_NET_F_GUEST_TSO4);
        let tso6 = csum && self.has(VIRTIO_NET_F_GUEST_TSO6);
        let uso = csum && self.has(VIRTIO_NET_F_GUEST_USO4) && self.has(VIRTIO_NET_F_GUEST_USO6);
        PortCaps {
            partial_csum: csum,
            tso4,
            tso6,
            uso,
            max_gso_frame_len: if tso4 || tso6 || uso {
                MAX_FRAME_LEN
            } else {
                0
            },
            ..PortCaps::plain(mtu)
        }
    }

    /// True when the guest may ask for an offload on transmit at all (`CSUM`, `HOST_TSO4`
    /// or `HOST_TSO6`). Without one its headers are not read: they can only say "no
    /// offload" ([`virtio_net::driver_may_ask_offloads`]).
    pub const fn guest_may_ask_offloads(self) -> bool {
        virtio_net::driver_may_ask_offloads(self.0)
    }

    /// True when the guest may send a frame with this offload state: a partial checksum
    /// needs `CSUM`, TCP segmentation `HOST_TSO4`/`HOST_TSO6`, UDP segmentation `HOST_USO`
    /// (spec §5.1.6.2: a driver must not use what it did not negotiate).
    pub fn guest_may_send(self, info: &OffloadInfo) -> bool {
        virtio_net::driver_may_send(self.0, info)
    }

    /// True when the guest accepted receiving a frame with this offload state.
    #[inline]
    pub fn guest_may_receive(self, info: &OffloadInfo) -> bool {
        if !info.needs_csum && !info.is_gso() {
            // Every guest takes a plain frame (asked per frame: no caps to build for it).
            return true;
        }
        let caps = self.port_caps(MAX_FRAME_LEN);
        (!info.needs_csum || caps.partial_csum) && caps.accepts_gso(info.gso)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_packet::GsoKind;

    #[test]
    fn the_shared_offload_rule_uses_the_spec_feature_bits() {
        use virtio_bindings::bindings::virtio_net as bits;
        assert_eq!(virtio_net::feature::CSUM, bits::VIRTIO_NET_F_CSUM);
        assert_eq!(virtio_net::feature::HOST_TSO4, bits::VIRTIO_NET_F_HOST_TSO4);
        assert_eq!(virtio_net::feature::HOST_TSO6, bits::VIRTIO_NET_F_HOST_TSO6);
        assert_eq!(virtio_net::feature::HOST_USO, bits::VIRTIO_NET_F_HOST_USO);
        assert_eq!(
            virtio_net::feature::GUEST_USO4,
            bits::VIRTIO_NET_F_GUEST_USO4
        );
        assert_eq!(
            virtio_net::feature::GUEST_USO6,
            bits::VIRTIO_NET_F_GUEST_USO6
        );
    }

    #[test]
    fn offloads_are_offered_only_when_configured() {
        let on = offered_features(&VhostPortConfig::default());
        assert_eq!(on & OFFLOAD_FEATURES, OFFLOAD_FEATURES);
        let off = offered_features(&VhostPortConfig {
            offloads: false,
            mergeable_rx_buffers: false,
            event_idx: false,
            ..VhostPortConfig::default()
        });
        assert_eq!(off & OFFLOAD_FEATURES, 0);
        assert!(!Features(off).mergeable_rx());
        assert!(!Features(off).event_idx());
        assert!(Features(off).has(VIRTIO_F_VERSION_1));
        assert!(Features(off).has(VIRTIO_F_IN_ORDER));
        assert!(!Features(on).has(VIRTIO_NET_F_MQ));
    }

    #[test]
    fn multiqueue_is_offered_only_with_several_pairs() {
        let mq = offered_features(&VhostPortConfig {
            queue_pairs: 2,
            ..VhostPortConfig::default()
        });
        assert!(Features(mq).has(VIRTIO_NET_F_MQ));
    }

    #[test]
    fn header_is_legacy_without_version_1_or_mergeable_buffers() {
        assert_eq!(Features(0).header_len(), 10);
        assert_eq!(Features(bit(VIRTIO_F_VERSION_1)).header_len(), 12);
        assert_eq!(Features(bit(VIRTIO_NET_F_MRG_RXBUF)).header_len(), 12);
    }

    #[test]
    fn guest_tso_without_guest_csum_gives_no_tso_caps() {
        let f = Features(bit(VIRTIO_NET_F_GUEST_TSO4) | bit(VIRTIO_NET_F_GUEST_TSO6));
        let caps = f.port_caps(1500);
        assert!(!caps.tso4 && !caps.tso6 && !caps.partial_csum);
        assert_eq!(caps.max_gso_frame_len, 0);
        let f = Features(f.0 | bit(VIRTIO_NET_F_GUEST_CSUM));
        let caps = f.port_caps(9000);
        assert!(caps.tso4 && caps.tso6 && caps.partial_csum && !caps.uso);
        assert_eq!(caps.mtu, 9000);
        assert_eq!(caps.max_gso_frame_len, MAX_FRAME_LEN);
    }

    #[test]
    fn guest_may_only_send_negotiated_offloads() {
        let csum = OffloadInfo {
            needs_csum: true,
            ..OffloadInfo::default()
        };
        let tso4 = OffloadInfo {
            gso: GsoKind::TcpV4,
            ..csum
        };
        assert!(Features(0).guest_may_send(&OffloadInfo::default()));
        assert!(!Features(0).guest_may_send(&csum));
        let f = Features(bit(VIRTIO_NET_F_CSUM));
        assert!(f.guest_may_send(&csum));
        assert!(!f.guest_may_send(&tso4));
        assert!(Features(f.0 | bit(VIRTIO_NET_F_HOST_TSO4)).guest_may_send(&tso4));
    }

    #[test]
    fn udp_super_frames_pass_each_way_only_where_uso_was_negotiated() {
        let uso = OffloadInfo {
            needs_csum: true,
            gso: GsoKind::UdpL4,
            gso_size: 1400,
            ..OffloadInfo::default()
        };
        let csum = bit(VIRTIO_NET_F_CSUM) | bit(VIRTIO_NET_F_GUEST_CSUM);
        // From the guest: HOST_USO, and it makes the guest's headers worth reading.
        assert!(!Features(csum).guest_may_send(&uso));
        let host_uso = Features(bit(VIRTIO_NET_F_HOST_USO));
        assert!(host_uso.guest_may_ask_offloads());
        assert!(Features(csum | bit(VIRTIO_NET_F_HOST_USO)).guest_may_send(&uso));
        // To the guest: GUEST_USO4 and GUEST_USO6 with GUEST_CSUM, or the core cuts them.
        let both = csum | bit(VIRTIO_NET_F_GUEST_USO4) | bit(VIRTIO_NET_F_GUEST_USO6);
        let caps = Features(both).port_caps(1500);
        assert!(caps.uso && !caps.tso4);
        assert_eq!(caps.max_gso_frame_len, MAX_FRAME_LEN);
        assert!(Features(both).guest_may_receive(&uso));
        for partial in [
            csum | bit(VIRTIO_NET_F_GUEST_USO4),
            bit(VIRTIO_NET_F_GUEST_USO4) | bit(VIRTIO_NET_F_GUEST_USO6),
        ] {
            assert!(!Features(partial).port_caps(1500).uso, "{partial:#x}");
            assert!(!Features(partial).guest_may_receive(&uso), "{partial:#x}");
        }
    }
}
