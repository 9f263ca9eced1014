use super::*;

#[test]
fn a_region_weft_allocates_is_sealed_to_its_size() {
    let (mem, file) = SharedMemory::create(1 << 16).unwrap();
    assert_eq!(mem.region_size(0), Some(1 << 16));
    // The peer gets this file: it can neither shrink nor grow it.
    assert!(file.set_len(4096).is_err());
    assert!(file.set_len(1 << 20).is_err());
    assert_eq!(file.metadata().unwrap().len(), 1 << 16);
}

#[test]
fn accesses_outside_a_region_or_to_a_missing_region_are_refused() {
    let (mem, _file) = SharedMemory::create(8192).unwrap();
    assert!(mem.slice(0, 8192 - 16, 16).is_some());
    assert!(mem.slice(0, 8192 - 15, 16).is_none());
    assert!(mem.slice(0, u64::MAX, 2).is_none());
    assert!(mem.slice(1, 0, 1).is_none());
    assert!(mem.load_u16(0, 8191, Ordering::Acquire).is_none());
}

#[test]
fn a_peer_file_shorter_than_its_region_or_not_in_shared_memory_is_refused() {
    let (_mem, file) = SharedMemory::create(4096).unwrap();
    let short = SharedMemory::map_peer(vec![(8192, OwnedFd::from(file))]);
    assert!(matches!(short, Err(MemoryError::FileTooShort { .. })));
    let (r, _w) = nix::unistd::pipe().unwrap();
    let pipe = SharedMemory::map_peer(vec![(4096, r)]);
    assert!(matches!(
        pipe,
        Err(MemoryError::NotSharedMemory { index: 0 })
    ));
}
