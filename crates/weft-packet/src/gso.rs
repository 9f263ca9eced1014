//! Software segmentation of TSO/USO super-frames and completion of partial checksums.

/// Most segments one super-frame may be split into. A 64 KiB frame at an MSS of 128 needs 512;
/// anything beyond is a hostile or broken sender, not a real workload.
pub const MAX_SEGMENTS: usize = 512;
