//! A memif port's configuration, checked once when the port opens.

use std::time::Duration;

use crate::layout::{ClientLayout, RING_ALIGN};
use crate::wire::{NAME_LEN, SECRET_LEN};

/// Which end of the memif connection weft is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// memif's master: weft listens, the peer (client) brings the memory.
    Server,
    /// memif's slave: weft connects, and allocates the regions and rings.
    Client,
}

/// Most queue pairs a port takes (rings per direction).
pub const MAX_QUEUE_PAIRS: u16 = 16;
/// Largest ring, as log2 of its slots (DPDK's limit too).
pub const MAX_LOG2_RING_SIZE: u8 = 14;
/// Most regions a peer may bring (as a server).
pub const MAX_REGIONS: u16 = 16;
/// Longest descriptor chain read or written for one frame.
pub const MAX_CHAIN: usize = 64;
/// Largest frame (Ethernet header included) a port carries.
pub const MAX_FRAME_LEN: usize = 65_535;

/// A memif port's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemifConfig {
    /// Which end weft is.
    pub role: Role,
    /// The interface id (DPDK `id=`): one port is one id.
    pub id: u32,
    /// The shared secret (DPDK `secret=`), at most 23 bytes; `None`: no secret asked.
    pub secret: Option<Vec<u8>>,
    /// Queue pairs wanted; fewer may be negotiated.
    pub queue_pairs: u16,
    /// Slots per ring, as log2 (DPDK `rsize=`; default 10).
    pub log2_ring_size: u8,
    /// Bytes per buffer (DPDK `bsize=`; default 2048). As a server, the room weft uses in
    /// a buffer the client offers, and the most a received descriptor may hold.
    pub buffer_size: u32,
    /// The largest L3 packet carried (frames up to `mtu + 22` bytes); larger frames are
    /// chained over several buffers.
    pub mtu: u32,
    /// Application name sent in HELLO / INIT.
    pub name: String,
    /// Interface name sent in CONNECT / CONNECTED.
    pub interface_name: String,
    /// Most bytes of shared memory a peer may hand over (server), or weft allocates.
    pub max_region_bytes: u64,
    /// A peer that has not finished its handshake within this is dropped.
    pub handshake_timeout: Duration,
}

impl Default for MemifConfig {
    fn default() -> Self {
        MemifConfig {
            role: Role::Server,
            id: 0,
            secret: None,
            queue_pairs: 1,
            log2_ring_size: 10,
            buffer_size: 2048,
            mtu: 1500,
            name: "weft".into(),
            interface_name: "weft".into(),
            max_region_bytes: 256 << 20,
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Queue pairs outside 1..=16.
    #[error("queue_pairs {0} is outside 1..={MAX_QUEUE_PAIRS}")]
    QueuePairs(u16),
    /// Ring size outside 1..=14 (log2).
    #[error("log2_ring_size {0} is outside 1..={MAX_LOG2_RING_SIZE}")]
    RingSize(u8),
    /// A buffer size that is zero, over 64 KiB or not a multiple of 16.
    #[error("buffer_size {0} must be a multiple of 16 in 16..=65535")]
    BufferSize(u32),
    /// An MTU that makes frames larger than 64 KiB, or below 68.
    #[error("mtu {0} is outside 68..=65513")]
    Mtu(u32),
    /// A secret longer than 23 bytes or holding a NUL.
    #[error("a secret is at most {} bytes, without NUL", SECRET_LEN - 1)]
    Secret,
    /// A name longer than 31 bytes or holding a NUL.
    #[error("name {0:?} is longer than 31 bytes or holds a NUL")]
    Name(String),
    /// The region weft would allocate is larger than `max_region_bytes` or 4 GiB.
    #[error("the rings and buffers take {needed} bytes, over the limit of {limit}")]
    RegionTooLarge {
        /// Bytes the layout needs.
        needed: u64,
        /// The limit.
        limit: u64,
    },
}

impl MemifConfig {
    /// Checks every setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_QUEUE_PAIRS).contains(&self.queue_pairs) {
            return Err(ConfigError::QueuePairs(self.queue_pairs));
        }
        if !(1..=MAX_LOG2_RING_SIZE).contains(&self.log2_ring_size) {
            return Err(ConfigError::RingSize(self.log2_ring_size));
        }
        if self.buffer_size == 0
            || self.buffer_size > 65_535
            || u64::from(self.buffer_size) % RING_ALIGN != 0
        {
            return Err(ConfigError::BufferSize(self.buffer_size));
        }
        if !(68..=65_513).contains(&self.mtu) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        if let Some(s) = &self.secret {
            if s.len() >= SECRET_LEN || s.contains(&0) {
                return Err(ConfigError::Secret);
            }
        }
        for n in [&self.name, &self.interface_name] {
            if n.len() >= NAME_LEN || n.as_bytes().contains(&0) {
                return Err(ConfigError::Name(n.clone()));
            }
        }
        // A client allocates its region: it must fit the limit (and descriptor offsets,
        // which are 32-bit). A server's limit bounds what peers bring.
        if self.role == Role::Client {
            let layout =
                self.client_layout(self.queue_pairs, self.queue_pairs, self.log2_ring_size);
            let needed = layout.region_size();
            let limit = self.max_region_bytes.min(u64::from(u32::MAX));
            if needed > limit {
                return Err(ConfigError::RegionTooLarge { needed, limit });
            }
        }
        Ok(())
    }

    /// Largest frame carried, Ethernet header and two VLAN tags included.
    pub fn max_frame_len(&self) -> usize {
        usize::try_from(self.mtu)
            .unwrap_or(MAX_FRAME_LEN)
            .saturating_add(22)
            .min(MAX_FRAME_LEN)
    }

    /// The layout of weft's region for these ring counts.
    pub(crate) fn client_layout(&self, c2s: u16, s2c: u16, log2: u8) -> ClientLayout {
        ClientLayout {
            c2s,
            s2c,
            log2,
            buffer_size: self.buffer_size,
        }
    }

    /// The secret as INIT carries it (zero padded).
    pub(crate) fn secret_field(&self) -> [u8; SECRET_LEN] {
        let mut field = [0; SECRET_LEN];
        if let Some(s) = &self.secret {
            let n = s.len().min(SECRET_LEN - 1);
            field[..n].copy_from_slice(&s[..n]);
        }
        field
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_dpdks_default_and_valid() {
        let c = MemifConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!((c.log2_ring_size, c.buffer_size), (10, 2048));
        assert_eq!(c.max_frame_len(), 1522);
    }

    #[test]
    fn out_of_range_settings_are_refused() {
        let bad = |f: fn(&mut MemifConfig)| {
            let mut c = MemifConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.queue_pairs = 0), ConfigError::QueuePairs(0));
        assert_eq!(bad(|c| c.queue_pairs = 17), ConfigError::QueuePairs(17));
        assert_eq!(bad(|c| c.log2_ring_size = 15), ConfigError::RingSize(15));
        assert_eq!(bad(|c| c.buffer_size = 100), ConfigError::BufferSize(100));
        assert_eq!(bad(|c| c.mtu = 70_000), ConfigError::Mtu(70_000));
        assert_eq!(
            bad(|c| c.secret = Some(vec![b'x'; 24])),
            ConfigError::Secret
        );
        assert_eq!(
            bad(|c| c.secret = Some(b"a\0b".to_vec())),
            ConfigError::Secret
        );
        assert!(matches!(
            bad(|c| c.name = "n".repeat(32)),
            ConfigError::Name(_)
        ));
        assert!(matches!(
            bad(|c| {
                c.role = Role::Client;
                c.max_region_bytes = 4096
            }),
            ConfigError::RegionTooLarge { .. }
        ));
    }
}
