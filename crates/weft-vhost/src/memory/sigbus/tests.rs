//! The SIGBUS guard with real files shrunk under real mappings (memfds, and hugetlbfs
//! memfds as DPDK's are).

use std::fs::File;

use nix::sys::memfd::{memfd_create, MFdFlags};
use vm_memory::{Bytes, GuestAddress};

use super::*;
use crate::memory::{GuestMemoryTable, RegionDesc, DEFAULT_MAX_GUEST_MEMORY};
use crate::tests::testutil::memfd;

fn one_region(size: u64) -> [RegionDesc; 1] {
    [RegionDesc {
        guest_phys_addr: 0,
        size,
        user_addr: 0x7f00_0000_0000,
        mmap_offset: 0,
    }]
}

/// Maps `file` (`size` bytes) as a table, writes a pattern at `at`, shrinks the file to
/// nothing and reads `at` again: zeros instead of a dead process, and the memory tripped
/// while another table's is not.
fn shrink_under_the_mapping(file: File, size: u64, at: u64) {
    let table = GuestMemoryTable::map(
        &one_region(size),
        vec![file.try_clone().unwrap()],
        DEFAULT_MAX_GUEST_MEMORY,
    )
    .unwrap();
    let other = GuestMemoryTable::map(
        &one_region(0x1_0000),
        vec![memfd(0x1_0000)],
        DEFAULT_MAX_GUEST_MEMORY,
    )
    .unwrap();
    let guarded = table.memory_arc();
    let mem = table.memory();
    mem.write_obj(0x1234_5678_u32, GuestAddress(at)).unwrap();
    assert_eq!(mem.read_obj::<u32>(GuestAddress(at)).unwrap(), 0x1234_5678);
    assert!(!guarded.tripped());
    let before = handled();

    file.set_len(0).unwrap();
    assert_eq!(mem.read_obj::<u32>(GuestAddress(at)).unwrap(), 0);
    assert!(guarded.tripped());
    assert!(handled() > before);
    assert!(!other.memory_arc().tripped());
    // The replaced page takes writes too (the data path may still write a frame there
    // before its ring breaks).
    mem.write_obj(7_u32, GuestAddress(at)).unwrap();
    assert_eq!(mem.read_obj::<u32>(GuestAddress(at)).unwrap(), 7);
}

#[test]
fn a_memfd_shrunk_under_its_mapping_reads_zeros_and_trips_only_its_memory() {
    shrink_under_the_mapping(memfd(0x1_0000), 0x1_0000, 0x4010);
}

#[test]
fn a_hugetlbfs_memfd_shrunk_under_its_mapping_reads_zeros_and_trips_its_memory() {
    const HUGE: u64 = 2 << 20;
    let need = "needs two free 2 MB hugepages (scripts/install-test-deps reserves them)";
    let flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_HUGETLB;
    let file = File::from(memfd_create("weft-test-huge", flags).expect(need));
    file.set_len(2 * HUGE).expect(need);
    // In the second huge page, off its start.
    shrink_under_the_mapping(file, 2 * HUGE, HUGE + 0x1008);
}

#[test]
fn regions_leave_the_registry_with_the_last_holder_of_their_memory() {
    let table = GuestMemoryTable::map(
        &one_region(0x1_0000),
        vec![memfd(0x1_0000)],
        DEFAULT_MAX_GUEST_MEMORY,
    )
    .unwrap();
    let start = table.memory().iter().next().unwrap().as_ptr() as usize;
    let registered = || {
        REGISTRY.iter().any(|s| {
            s.read()
                .is_some_and(|(s0, end, _)| s0 == start && end > start)
        })
    };
    assert!(registered());
    // A ring or a batch still holding the memory keeps it guarded after the table goes.
    let held = table.memory_arc();
    drop(table);
    assert!(registered());
    drop(held);
    assert!(!registered());
}

#[test]
fn a_slot_reads_as_one_registration_or_not_at_all() {
    let slot = Slot::new();
    assert_eq!(slot.read(), None, "free");
    slot.write(0x1000, 0x3000, 4096);
    assert_eq!(slot.read(), Some((0x1000, 0x3000, 4096)));
    // Caught mid-write (an odd sequence): not read.
    slot.seq.fetch_add(1, Ordering::Relaxed);
    assert_eq!(slot.read(), None);
    slot.seq.fetch_add(1, Ordering::Relaxed);
    slot.write(0, 0, 0);
    assert_eq!(slot.read(), None, "free again");
}

#[test]
fn a_hugetlbfs_memfd_is_guarded_a_huge_page_at_a_time() {
    const HUGE: u64 = 2 << 20;
    let need = "needs a free 2 MB hugepage (scripts/install-test-deps reserves them)";
    let flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_HUGETLB;
    let file = File::from(memfd_create("weft-test-huge", flags).expect(need));
    file.set_len(HUGE).expect(need);
    let table =
        GuestMemoryTable::map(&one_region(HUGE), vec![file], DEFAULT_MAX_GUEST_MEMORY).unwrap();
    let start = table.memory().iter().next().unwrap().as_ptr() as usize;
    let page = REGISTRY
        .iter()
        .find_map(|s| s.read().filter(|(s0, _, _)| *s0 == start))
        .map(|(_, _, page)| page);
    assert_eq!(page, Some(2 << 20));
    let plain = GuestMemoryTable::map(
        &one_region(0x1_0000),
        vec![memfd(0x1_0000)],
        DEFAULT_MAX_GUEST_MEMORY,
    )
    .unwrap();
    let start = plain.memory().iter().next().unwrap().as_ptr() as usize;
    let page = REGISTRY
        .iter()
        .find_map(|s| s.read().filter(|(s0, _, _)| *s0 == start))
        .map(|(_, _, page)| page);
    assert_eq!(page, Some(4096));
}
