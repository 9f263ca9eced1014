//! How a vhost-user port is set up.

use crate::memory::DEFAULT_MAX_GUEST_MEMORY;
use crate::modes::{DispatchMode, ModeError, NotifyPolicy};

/// The largest virtqueue a split ring may have (virtio 1.x §2.7).
pub const MAX_QUEUE_SIZE: u16 = 32_768;

/// The largest Ethernet frame (without FCS) a guest may send or be sent: a 64 KB IP packet
/// behind an Ethernet header and two VLAN tags — the size of a TSO super-frame.
pub const MAX_FRAME_LEN: usize = 65_535 + 22;

/// The most queue pairs a port offers (`VIRTIO_NET_F_MQ`).
pub const MAX_QUEUE_PAIRS: u16 = 16;

/// Settings of one vhost-user port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VhostPortConfig {
    /// The port's MTU (largest L3 packet in an ordinary frame), 68..=65535.
    pub mtu: usize,
    /// The largest queue size the frontend may set (a power of two, at most
    /// [`MAX_QUEUE_SIZE`]).
    pub max_queue_size: u16,
    /// Offer checksum and TCP segmentation offloads (`CSUM`, `GUEST_CSUM`, `HOST_TSO4/6`,
    /// `GUEST_TSO4/6`). Off: every frame is complete and at most MTU-sized.
    pub offloads: bool,
    /// Offer mergeable receive buffers (`MRG_RXBUF`).
    pub mergeable_rx_buffers: bool,
    /// Offer `EVENT_IDX` (notification suppression by ring index).
    pub event_idx: bool,
    /// Lend frames that lie contiguous in guest memory to the switch: their first
    /// `SNAPSHOT_LEN` bytes (every header the switch reads) copied into the port's memory,
    /// the rest lent in place as a `SharedTail` (one copy guest to guest for the payload).
    /// Off: every frame is copied whole into the port's own buffer first (one copy more).
    /// Either way the switch decides on bytes only weft writes.
    pub lend_guest_memory: bool,
    /// The most bytes the receive half keeps in its bounce buffer (frames that are scattered
    /// in guest memory, or all frames when lending is off). At least two maximal frames.
    pub bounce_limit: usize,
    /// Who drives the receive half: the guest's kicks, the worker's polling, or adaptive.
    pub dispatch: DispatchMode,
    /// When the guest is interrupted after the port fills or completes its buffers.
    pub notify: NotifyPolicy,
    /// Queue pairs offered, 1..=[`MAX_QUEUE_PAIRS`]; above 1 the port offers
    /// `VIRTIO_NET_F_MQ` and the vhost-user protocol feature `MQ`. All pairs are served by
    /// the worker that owns the switch.
    pub queue_pairs: u16,
    /// The most bytes of guest memory one memory table may map (its regions added up). A
    /// sparse file maps without costing memory, but not without costing address space; a
    /// table above this is refused. Default [`DEFAULT_MAX_GUEST_MEMORY`] (1 TiB).
    pub max_guest_memory: u64,
}

impl Default for VhostPortConfig {
    fn default() -> Self {
        VhostPortConfig {
            mtu: 1500,
            max_queue_size: 1024,
            offloads: true,
            mergeable_rx_buffers: true,
            event_idx: true,
            lend_guest_memory: true,
            bounce_limit: 16 << 20,
            dispatch: DispatchMode::default(),
            notify: NotifyPolicy::default(),
            queue_pairs: 1,
            max_guest_memory: DEFAULT_MAX_GUEST_MEMORY,
        }
    }
}

/// A setting that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The MTU is outside 68..=65535.
    #[error("MTU {0} outside 68..=65535")]
    BadMtu(usize),
    /// The queue size limit is zero, not a power of two, or above 32768.
    #[error("maximum queue size {0} is not a power of two in 1..=32768")]
    BadQueueSize(u16),
    /// The number of queue pairs is outside 1..=16.
    #[error("queue pairs {0} outside 1..=16")]
    BadQueuePairs(u16),
    /// No guest memory may be mapped at all.
    #[error("max_guest_memory must be above zero")]
    NoGuestMemory,
    /// A dispatch mode or notification policy that cannot work.
    #[error(transparent)]
    Mode(#[from] ModeError),
}

impl VhostPortConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(68..=65_535).contains(&self.mtu) {
            return Err(ConfigError::BadMtu(self.mtu));
        }
        if self.max_queue_size == 0
            || !self.max_queue_size.is_power_of_two()
            || self.max_queue_size > MAX_QUEUE_SIZE
        {
            return Err(ConfigError::BadQueueSize(self.max_queue_size));
        }
        if !(1..=MAX_QUEUE_PAIRS).contains(&self.queue_pairs) {
            return Err(ConfigError::BadQueuePairs(self.queue_pairs));
        }
        if self.max_guest_memory == 0 {
            return Err(ConfigError::NoGuestMemory);
        }
        self.dispatch.validate()?;
        self.notify.validate()?;
        Ok(())
    }

    /// Virtqueues of the port: a receive and a transmit queue per pair.
    pub(crate) fn num_queues(&self) -> usize {
        2 * usize::from(self.queue_pairs)
    }

    /// The bounce buffer limit actually used: room for two maximal frames at least.
    pub(crate) fn effective_bounce_limit(&self) -> usize {
        self.bounce_limit.max(2 * MAX_FRAME_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid() {
        assert_eq!(VhostPortConfig::default().validate(), Ok(()));
    }

    #[test]
    fn queue_size_must_be_a_power_of_two_up_to_32768() {
        for bad in [0u16, 3, 1000, 65_535] {
            let c = VhostPortConfig {
                max_queue_size: bad,
                ..VhostPortConfig::default()
            };
            assert_eq!(c.validate(), Err(ConfigError::BadQueueSize(bad)));
        }
        let c = VhostPortConfig {
            max_queue_size: MAX_QUEUE_SIZE,
            ..VhostPortConfig::default()
        };
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn bad_modes_are_refused() {
        let c = VhostPortConfig {
            dispatch: DispatchMode::Adaptive {
                low_pps: 5,
                high_pps: 5,
                window: std::time::Duration::from_millis(5),
            },
            ..VhostPortConfig::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::Mode(_))));
        let c = VhostPortConfig {
            notify: NotifyPolicy::Coalesced {
                frames: 0,
                max_delay: std::time::Duration::from_micros(50),
            },
            ..VhostPortConfig::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::Mode(_))));
    }

    #[test]
    fn no_guest_memory_at_all_is_refused() {
        let c = VhostPortConfig {
            max_guest_memory: 0,
            ..VhostPortConfig::default()
        };
        assert_eq!(c.validate(), Err(ConfigError::NoGuestMemory));
    }

    #[test]
    fn queue_pairs_must_be_within_1_to_16() {
        for bad in [0u16, 17, 1000] {
            let c = VhostPortConfig {
                queue_pairs: bad,
                ..VhostPortConfig::default()
            };
            assert_eq!(c.validate(), Err(ConfigError::BadQueuePairs(bad)));
        }
        for good in [1u16, 2, MAX_QUEUE_PAIRS] {
            let c = VhostPortConfig {
                queue_pairs: good,
                ..VhostPortConfig::default()
            };
            assert_eq!(c.validate(), Ok(()));
        }
    }

    #[test]
    fn mtu_out_of_range_is_refused() {
        for bad in [0usize, 67, 65_536] {
            let c = VhostPortConfig {
                mtu: bad,
                ..VhostPortConfig::default()
            };
            assert_eq!(c.validate(), Err(ConfigError::BadMtu(bad)));
        }
    }
}
