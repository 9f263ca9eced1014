use std::os::unix::fs::FileExt;

use super::*;
use crate::tests::testutil::memfd;

fn log_bytes(file: &File, offset: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    file.read_exact_at(&mut out, offset).unwrap();
    out
}

const LIMIT: u64 = 1 << 20;

#[test]
fn marks_set_one_bit_per_written_page_in_the_frontends_file() {
    let file = memfd(4096);
    let log = DirtyLog::map(file.try_clone().unwrap(), 64, 0, LIMIT).unwrap();
    // One byte of page 0; bytes spanning pages 9 and 10; a page already marked.
    assert_eq!(log.mark(0x10, 1).newly, 1);
    assert_eq!(log.mark(9 * LOG_PAGE + 4000, 200).newly, 2);
    assert_eq!(log.mark(10 * LOG_PAGE, 1).newly, 0);
    let bytes = log_bytes(&file, 0, 4);
    assert_eq!(bytes, [0b0000_0001, 0b0000_0110, 0, 0]);
}

#[test]
fn the_frontend_clearing_bits_makes_the_next_write_mark_again() {
    let file = memfd(4096);
    let log = DirtyLog::map(file.try_clone().unwrap(), 8, 0, LIMIT).unwrap();
    assert_eq!(log.mark(3 * LOG_PAGE, 8).newly, 1);
    file.write_all_at(&[0], 0).unwrap();
    assert_eq!(log.mark(3 * LOG_PAGE, 8).newly, 1);
    assert_eq!(log_bytes(&file, 0, 1), [0b0000_1000]);
}

#[test]
fn an_offset_inside_a_page_is_honoured() {
    let file = memfd(8192);
    let log = DirtyLog::map(file.try_clone().unwrap(), 16, 4100, LIMIT).unwrap();
    log.mark(0, 1);
    assert_eq!(log_bytes(&file, 4100, 1), [1]);
    assert_eq!(log_bytes(&file, 0, 1), [0]);
}

#[test]
fn pages_beyond_the_log_are_counted_not_marked() {
    let file = memfd(4096);
    let log = DirtyLog::map(file.try_clone().unwrap(), 1, 0, LIMIT).unwrap();
    let m = log.mark(7 * LOG_PAGE, 3 * LOG_PAGE);
    assert_eq!(
        m,
        Marked {
            newly: 1,
            beyond: 2
        }
    );
    assert_eq!(log.mark(u64::MAX - 10, 100).beyond, 1);
    assert_eq!(log.mark(0, 0), Marked::default());
}

#[test]
fn sizes_of_zero_or_beyond_the_limit_are_refused() {
    for size in [0, LIMIT + 1] {
        let e = DirtyLog::map(memfd(4096), size, 0, LIMIT).unwrap_err();
        assert_eq!(e.reason(), LogRefusal::BadSize, "{e}");
    }
    let e = DirtyLog::map(memfd(4096), 8, u64::MAX - 4, LIMIT).unwrap_err();
    assert_eq!(e.reason(), LogRefusal::BadSize);
}

#[test]
fn a_file_shorter_than_the_log_is_refused() {
    let e = DirtyLog::map(memfd(4096), 4096, 8, LIMIT).unwrap_err();
    assert_eq!(e.reason(), LogRefusal::FileTooShort, "{e}");
}

#[test]
fn a_file_that_is_not_shared_memory_is_refused() {
    // Admitted as guest memory is (the same check, tested on disk files there).
    let e = DirtyLog::map(File::open("/dev/null").unwrap(), 8, 0, LIMIT).unwrap_err();
    assert_eq!(e.reason(), LogRefusal::NotSharedMemory, "{e}");
}

#[test]
fn the_default_limit_covers_twice_a_terabyte_of_addresses() {
    assert_eq!(max_log_bytes(1 << 40), 64 << 20);
    assert_eq!(max_log_bytes(1 << 20), 1 << 20);
}
