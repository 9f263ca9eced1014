//! Which files a frontend may hand over as guest memory, and how much of them: checked on
//! the descriptors themselves, before anything is mapped.

use std::fs::{File, FileType};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use nix::sys::statfs::{fstatfs, FsType, HUGETLBFS_MAGIC, TMPFS_MAGIC};

use super::{MemoryTableError, RegionDesc};

/// The page size of ordinary (tmpfs, memfd) mappings.
const BASE_PAGE: usize = 4096;

/// What was learned about one region's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AdmittedFile {
    /// Device and inode: two descriptors of one file have the same.
    pub(super) id: (u64, u64),
    /// The page size its mappings use: a hugetlbfs file's huge page, else the base page.
    pub(super) page: usize,
}

/// Admits the file of region `index`: a regular file in shared memory (a memfd, or a file
/// on tmpfs or hugetlbfs) at least `mmap_offset + size` long.
///
/// Shared memory only: a file on a disk filesystem would have the guest's memory traffic
/// written back to that disk by us, and devices (`/dev/zero`, `/dev/mem`, a GPU) map
/// memory that is not the guest's, or fail in ways regular files do not.
pub(super) fn admit_file(
    index: usize,
    r: &RegionDesc,
    file: &File,
) -> Result<AdmittedFile, MemoryTableError> {
    let meta = file
        .metadata()
        .map_err(|source| MemoryTableError::Stat { index, source })?;
    if !meta.file_type().is_file() {
        return Err(MemoryTableError::NotRegularFile {
            index,
            kind: kind_of(meta.file_type()),
        });
    }
    let fs = fstatfs(file).map_err(|e| MemoryTableError::Stat {
        index,
        source: e.into(),
    })?;
    let page = match fs.filesystem_type() {
        t if t == TMPFS_MAGIC => BASE_PAGE,
        t if t == HUGETLBFS_MAGIC => usize::try_from(fs.block_size())
            .unwrap_or(BASE_PAGE)
            .max(BASE_PAGE),
        other => {
            return Err(MemoryTableError::NotSharedMemory {
                index,
                filesystem: filesystem_name(other),
            })
        }
    };
    // Mapping past the end of a file succeeds, but touching those pages raises SIGBUS.
    let needed = r.mmap_offset.saturating_add(r.size);
    if meta.len() < needed {
        return Err(MemoryTableError::FileTooShort {
            index,
            needed,
            len: meta.len(),
        });
    }
    Ok(AdmittedFile {
        id: (meta.dev(), meta.ino()),
        page,
    })
}

/// Refuses a table that maps more than `limit` bytes in all. Mapping a sparse file costs
/// no memory, only address space — but that is finite (128 TiB for a process on x86-64),
/// and a frontend that could take it all would make every later mmap, thread stack and
/// allocation of the process fail.
pub(super) fn check_total(regions: &[RegionDesc], limit: u64) -> Result<(), MemoryTableError> {
    let total = regions
        .iter()
        .try_fold(0u64, |sum, r| sum.checked_add(r.size))
        .unwrap_or(u64::MAX);
    if total > limit {
        return Err(MemoryTableError::TooLarge { total, limit });
    }
    Ok(())
}

/// Refuses two regions that map the same pages of one file (the same device and inode,
/// file ranges overlapping). They would be two host mappings of the same memory: a frame
/// lent from one could lie under a receive buffer in the other, and the check made before
/// each copy (`buffer_overlaps_frame`, which compares host addresses) would not see it —
/// the copy (`copy_nonoverlapping`) would then run with its source and destination on the
/// same pages, writing into the frame it reads. Disjoint parts of one file are fine (QEMU
/// maps the RAM below and above 4 GiB from one memfd at two offsets).
pub(super) fn check_aliasing(
    regions: &[RegionDesc],
    files: &[AdmittedFile],
) -> Result<(), MemoryTableError> {
    let described = regions.iter().zip(files).enumerate();
    for (i, (a, fa)) in described.clone() {
        for (j, (b, fb)) in described.clone().skip(i + 1) {
            // Ends do not overflow (`validate_layout`).
            let overlap = a.mmap_offset < b.mmap_offset.saturating_add(b.size)
                && b.mmap_offset < a.mmap_offset.saturating_add(a.size);
            if fa.id == fb.id && overlap {
                return Err(MemoryTableError::FileAlias {
                    first: i,
                    second: j,
                });
            }
        }
    }
    Ok(())
}

/// A file type in words, for errors.
fn kind_of(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_fifo() {
        "a pipe"
    } else {
        "not a regular file"
    }
}

/// A filesystem type in words, for errors.
fn filesystem_name(t: FsType) -> String {
    use nix::sys::statfs::{
        BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, FUSE_SUPER_MAGIC, NFS_SUPER_MAGIC,
        OVERLAYFS_SUPER_MAGIC, XFS_SUPER_MAGIC,
    };
    let known = [
        (EXT4_SUPER_MAGIC, "ext2/3/4"),
        (XFS_SUPER_MAGIC, "xfs"),
        (BTRFS_SUPER_MAGIC, "btrfs"),
        (OVERLAYFS_SUPER_MAGIC, "overlayfs"),
        (NFS_SUPER_MAGIC, "nfs"),
        (FUSE_SUPER_MAGIC, "fuse"),
    ];
    known.iter().find(|(magic, _)| *magic == t).map_or_else(
        || format!("type {:#x}", t.0),
        |(_, name)| (*name).to_string(),
    )
}
