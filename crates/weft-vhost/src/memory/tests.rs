use super::*;
use crate::tests::testutil::memfd;
use vm_memory::{Bytes, GuestMemoryBackend};

fn region(gpa: u64, size: u64, va: u64, off: u64) -> RegionDesc {
    RegionDesc {
        guest_phys_addr: gpa,
        size,
        user_addr: va,
        mmap_offset: off,
    }
}

#[test]
fn valid_table_maps_and_translates_frontend_addresses() {
    let regions = [
        region(0, 0x10000, 0x7f00_0000_0000, 0),
        region(0x100000, 0x10000, 0x7f00_1000_0000, 0x10000),
    ];
    let t = GuestMemoryTable::map(
        &regions,
        vec![memfd(0x10000), memfd(0x20000)],
        DEFAULT_MAX_GUEST_MEMORY,
    )
    .unwrap();
    assert_eq!(t.memory().num_regions(), 2);
    assert_eq!(t.va_to_gpa(0x7f00_0000_0100, 16), Some(GuestAddress(0x100)));
    assert_eq!(
        t.va_to_gpa(0x7f00_1000_0000, 0x10000),
        Some(GuestAddress(0x100000))
    );
    // Straddling the end of a region, or outside every region.
    assert_eq!(t.va_to_gpa(0x7f00_0000_fff0, 32), None);
    assert_eq!(t.va_to_gpa(0x1000, 1), None);
    assert_eq!(t.va_to_gpa(u64::MAX, 2), None);
}

#[test]
fn mapped_memory_is_shared_with_the_frontend() {
    let file = memfd(0x10000);
    let frontend = GuestMemoryMmap::<()>::from_ranges_with_files([(
        GuestAddress(0),
        0x10000,
        Some(FileOffset::new(file.try_clone().unwrap(), 0)),
    )])
    .unwrap();
    let t = GuestMemoryTable::map(
        &[region(0, 0x10000, 0x1000_0000, 0)],
        vec![file],
        DEFAULT_MAX_GUEST_MEMORY,
    )
    .unwrap();
    frontend
        .write_obj(0xdead_beef_u32, GuestAddress(0x40))
        .unwrap();
    assert_eq!(
        t.memory().read_obj::<u32>(GuestAddress(0x40)).unwrap(),
        0xdead_beef
    );
}

#[test]
fn region_count_outside_one_to_eight_is_refused() {
    assert!(matches!(
        GuestMemoryTable::map(&[], vec![], DEFAULT_MAX_GUEST_MEMORY),
        Err(MemoryTableError::RegionCount(0))
    ));
    let many: Vec<_> = (0..9u64)
        .map(|i| region(i * 0x1000, 0x1000, i * 0x1000, 0))
        .collect();
    let files = (0..9).map(|_| memfd(0x1000)).collect();
    assert!(matches!(
        GuestMemoryTable::map(&many, files, DEFAULT_MAX_GUEST_MEMORY),
        Err(MemoryTableError::RegionCount(9))
    ));
}

#[test]
fn fd_count_must_match_regions() {
    let r = [region(0, 0x1000, 0, 0)];
    assert!(matches!(
        GuestMemoryTable::map(
            &r,
            vec![memfd(0x1000), memfd(0x1000)],
            DEFAULT_MAX_GUEST_MEMORY
        ),
        Err(MemoryTableError::FdCount {
            regions: 1,
            files: 2
        })
    ));
}

#[test]
fn zero_sized_and_overflowing_regions_are_refused() {
    for bad in [
        region(0, 0, 0, 0),
        region(u64::MAX - 0xfff, 0x1000, 0, 0),
        region(0, 0x1000, u64::MAX - 0x10, 0),
        region(0, 0x1000, 0, u64::MAX - 0x10),
        region(0, 0x1000, 0, 1 << 63),
    ] {
        assert!(
            matches!(
                GuestMemoryTable::map(&[bad], vec![memfd(0x1000)], DEFAULT_MAX_GUEST_MEMORY),
                Err(MemoryTableError::BadRegion(0))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn overlapping_regions_are_refused() {
    let guest = [
        region(0, 0x2000, 0x10_0000, 0),
        region(0x1000, 0x2000, 0x20_0000, 0),
    ];
    assert!(matches!(
        GuestMemoryTable::map(
            &guest,
            vec![memfd(0x2000), memfd(0x2000)],
            DEFAULT_MAX_GUEST_MEMORY
        ),
        Err(MemoryTableError::GuestOverlap)
    ));
    let user = [
        region(0, 0x2000, 0x10_0000, 0),
        region(0x10_0000, 0x2000, 0x10_1000, 0),
    ];
    assert!(matches!(
        GuestMemoryTable::map(
            &user,
            vec![memfd(0x2000), memfd(0x2000)],
            DEFAULT_MAX_GUEST_MEMORY
        ),
        Err(MemoryTableError::UserOverlap)
    ));
}

#[test]
fn file_shorter_than_its_region_is_refused() {
    let r = [region(0, 0x2000, 0, 0x1000)];
    assert!(matches!(
        GuestMemoryTable::map(&r, vec![memfd(0x2000)], DEFAULT_MAX_GUEST_MEMORY),
        Err(MemoryTableError::FileTooShort {
            index: 0,
            needed: 0x3000,
            len: 0x2000
        })
    ));
}

#[test]
fn unaligned_file_offset_is_refused_by_mmap() {
    let r = [region(0, 0x1000, 0, 0x10)];
    assert!(matches!(
        GuestMemoryTable::map(&r, vec![memfd(0x2000)], DEFAULT_MAX_GUEST_MEMORY),
        Err(MemoryTableError::Map { index: 0, .. })
    ));
}

#[test]
fn a_table_above_the_limit_is_refused_before_anything_is_mapped() {
    let r = [
        region(0, 0x2000, 0x10_0000, 0),
        region(0x10_0000, 0x1000, 0x20_0000, 0),
    ];
    let files = || vec![memfd(0x2000), memfd(0x1000)];
    assert!(GuestMemoryTable::map(&r, files(), 0x3000).is_ok());
    let refused = GuestMemoryTable::map(&r, files(), 0x2fff).unwrap_err();
    assert!(matches!(
        refused,
        MemoryTableError::TooLarge {
            total: 0x3000,
            limit: 0x2fff
        }
    ));
    assert!(
        refused.to_string().contains("max_guest_memory"),
        "{refused}"
    );
}

#[test]
fn a_one_tib_vm_fits_the_default_limit() {
    // Sparse: mapping it costs address space, not memory. QEMU sends a 1 TiB VM's memory
    // as two regions of one memfd (below and above 4 GiB), disjoint in the file.
    const TIB: u64 = 1 << 40;
    const LOW: u64 = 2 << 30;
    let file = memfd(TIB);
    let r = [
        region(0, LOW, 0x7f00_0000_0000, 0),
        region(4 << 30, TIB - LOW, 0x7f00_0000_0000 + LOW, LOW),
    ];
    let files = vec![file.try_clone().unwrap(), file];
    let t = GuestMemoryTable::map(&r, files, DEFAULT_MAX_GUEST_MEMORY).unwrap();
    assert_eq!(t.memory().num_regions(), 2);
    t.memory()
        .write_obj(7u32, GuestAddress((4 << 30) + 0x1000))
        .unwrap();
}

#[test]
fn regions_mapping_the_same_pages_of_one_file_are_refused() {
    let file = memfd(0x4000);
    let second = || file.try_clone().unwrap();
    // Overlapping file ranges, whatever the guest and frontend addresses.
    let aliased = [
        region(0, 0x2000, 0x10_0000, 0),
        region(0x10_0000, 0x2000, 0x20_0000, 0x1000),
    ];
    assert!(matches!(
        GuestMemoryTable::map(&aliased, vec![second(), second()], DEFAULT_MAX_GUEST_MEMORY),
        Err(MemoryTableError::FileAlias {
            first: 0,
            second: 1
        })
    ));
    // Disjoint parts of one file are two regions of guest memory.
    let disjoint = [
        region(0, 0x2000, 0x10_0000, 0),
        region(0x10_0000, 0x2000, 0x20_0000, 0x2000),
    ];
    assert!(GuestMemoryTable::map(
        &disjoint,
        vec![second(), second()],
        DEFAULT_MAX_GUEST_MEMORY
    )
    .is_ok());
    // The same offsets of two different files are not aliases.
    let r = [
        region(0, 0x2000, 0x10_0000, 0),
        region(0x10_0000, 0x2000, 0x20_0000, 0),
    ];
    assert!(GuestMemoryTable::map(
        &r,
        vec![memfd(0x2000), memfd(0x2000)],
        DEFAULT_MAX_GUEST_MEMORY
    )
    .is_ok());
}

#[test]
fn files_that_are_not_shared_memory_are_refused() {
    let r = [region(0, 0x1000, 0, 0)];
    let map = |file: std::fs::File| GuestMemoryTable::map(&r, vec![file], DEFAULT_MAX_GUEST_MEMORY);
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let refused = map(zero).unwrap_err();
    assert!(
        matches!(
            refused,
            MemoryTableError::NotRegularFile {
                index: 0,
                kind: "a character device"
            }
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("memfd"), "{refused}");
    let dir = std::fs::File::open("/").unwrap();
    assert!(matches!(
        map(dir),
        Err(MemoryTableError::NotRegularFile {
            kind: "a directory",
            ..
        })
    ));
    // A regular file, but on procfs.
    let proc_file = std::fs::File::open("/proc/self/status").unwrap();
    let refused = map(proc_file).unwrap_err();
    assert!(
        matches!(refused, MemoryTableError::NotSharedMemory { index: 0, .. }),
        "{refused}"
    );
    assert_eq!(refused.reason(), MemoryRefusal::NotSharedMemory);
}
