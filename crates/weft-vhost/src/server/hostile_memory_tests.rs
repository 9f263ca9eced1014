//! A hostile frontend's memory tables: files that are not shared memory, more address
//! space than a port may take, regions aliasing one file's pages, and a table replaced while
//! the data path still holds frames lent from it, then cut short. Each is refused (and
//! counted) or survived; afterwards the port serves a well-behaved frontend.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::process::Command;

use nix::sys::statfs::{statfs, HUGETLBFS_MAGIC, TMPFS_MAGIC};
use vhost::vhost_user::message::{VhostUserHeaderFlag, VhostUserProtocolFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo};
use weft_switch::{PortRx, RxBatch};

use super::tests::{assert_traffic, socket_path, wait_for, Guest};
use super::*;
use crate::memory::sigbus::{self, SigbusGuard};
use crate::memory::MemoryRefusal;
use crate::rx::SNAPSHOT_LEN;
use crate::tests::testutil::{ether_frame, memfd, GUEST_MEM};

const VA: u64 = 0x7f00_0000_0000;
const TIB: u64 = 1 << 40;

fn region(gpa: u64, size: u64, va: u64, offset: u64, fd: RawFd) -> VhostUserMemoryRegionInfo {
    VhostUserMemoryRegionInfo {
        guest_phys_addr: gpa,
        memory_size: size,
        userspace_addr: va,
        mmap_offset: offset,
        mmap_handle: fd,
    }
}

/// A frontend that negotiated everything and sends `regions` as its memory table; the
/// port's answer.
fn send_table(path: &Path, regions: &[VhostUserMemoryRegionInfo]) -> vhost::Result<()> {
    let mut fe = Frontend::connect(path, 2).unwrap();
    fe.set_owner().unwrap();
    let features = fe.get_features().unwrap();
    fe.set_features(features).unwrap();
    let protocol = fe.get_protocol_features().unwrap();
    assert!(protocol.contains(VhostUserProtocolFeatures::REPLY_ACK));
    fe.set_protocol_features(protocol).unwrap();
    fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    fe.set_mem_table(regions).map(|_| ())
}

/// Sends `regions` to a fresh port and checks it is refused for `reason` (counted once,
/// the frontend dropped), and that the port then serves a good memfd table.
fn refused_then_served(tag: &str, regions: &[VhostUserMemoryRegionInfo], reason: MemoryRefusal) {
    let path = socket_path(tag);
    let mut port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let (mut rx, mut tx) = port.take_halves().unwrap();
    assert!(
        send_table(&path, regions).is_err(),
        "a {reason:?} table is refused"
    );
    wait_for("the hostile frontend to be dropped", || {
        !port.is_connected()
    });
    let refusals = port.stats().memory_refusals;
    assert_eq!(refusals[reason.index()], 1, "{refusals:?}");
    assert_eq!(refusals.iter().sum::<u64>(), 1, "{refusals:?}");

    let mut good = Guest::connect(&path);
    good.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    assert_traffic(&mut good, &mut rx, &mut tx, 1);
}

/// The process's peak address space (`VmPeak`), in bytes.
fn peak_address_space() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmPeak:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn eight_sparse_16_tib_memfds_are_refused_without_growing_the_address_space() {
    // Alone in its process: other tests map guest memory (one of them 1 TiB), and the
    // peak address space measured here is the process's.
    in_child_process(
        "eight_sparse_16_tib_memfds_are_refused_without_growing_the_address_space",
        || {
            // 128 TiB: the whole of a process's address space on x86-64. Mapped, every
            // later mmap, thread stack and allocation of the process would fail.
            let files: Vec<File> = (0..8)
                .map(|_| {
                    let f = memfd(0);
                    f.set_len(16 * TIB).unwrap();
                    f
                })
                .collect();
            let regions: Vec<_> = files
                .iter()
                .zip(0u64..)
                .map(|(f, i)| region(i * 16 * TIB, 16 * TIB, i * 16 * TIB, 0, f.as_raw_fd()))
                .collect();
            let before = peak_address_space();
            refused_then_served("huge", &regions, MemoryRefusal::TooLarge);
            // The port's threads and the good frontend's 8 MiB: far below one 16 TiB region.
            let grown = peak_address_space().saturating_sub(before);
            assert!(
                grown < 1 << 30,
                "the peak address space grew by {grown} bytes"
            );
        },
    );
}

#[test]
fn two_regions_of_one_memfd_at_overlapping_offsets_are_refused() {
    let file = memfd(GUEST_MEM);
    let fd = file.as_raw_fd();
    let half = GUEST_MEM / 2;
    // Disjoint in guest and frontend addresses, but the second maps the first's upper half
    // again.
    let regions = [
        region(0, half + 0x1000, VA, 0, fd),
        region(1 << 32, half, VA + (1 << 32), half, fd),
    ];
    refused_then_served("alias", &regions, MemoryRefusal::FileAlias);
    // The same through a second descriptor of the file.
    let again = file.try_clone().unwrap();
    let regions = [
        region(0, half, VA, 0, fd),
        region(1 << 32, half, VA + (1 << 32), 0, again.as_raw_fd()),
    ];
    refused_then_served("alias-dup", &regions, MemoryRefusal::FileAlias);
}

/// A directory on a disk filesystem (not tmpfs nor hugetlbfs) to make a file in: where
/// the test binary is, or /var/tmp.
fn disk_dir() -> PathBuf {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    let candidates = exe_dir.into_iter().chain([PathBuf::from("/var/tmp")]);
    for dir in candidates {
        if let Ok(fs) = statfs(&dir) {
            let t = fs.filesystem_type();
            if t != TMPFS_MAGIC && t != HUGETLBFS_MAGIC {
                return dir;
            }
        }
    }
    panic!("no disk filesystem to make a test file on: the test binary's directory and /var/tmp are in memory");
}

#[test]
fn a_regular_file_on_a_disk_filesystem_is_refused() {
    let path = disk_dir().join(format!("weft-vhost-disk-{}.mem", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    file.set_len(GUEST_MEM).unwrap();
    let regions = [region(0, GUEST_MEM, VA, 0, file.as_raw_fd())];
    refused_then_served("disk", &regions, MemoryRefusal::NotSharedMemory);
}

#[test]
fn a_device_is_refused() {
    let zero = File::options()
        .read(true)
        .write(true)
        .open("/dev/zero")
        .unwrap();
    let regions = [region(0, GUEST_MEM, VA, 0, zero.as_raw_fd())];
    refused_then_served("dev-zero", &regions, MemoryRefusal::NotSharedMemory);
}

/// Runs the test `name` of this module alone in a child process: it fills the whole
/// process's guard registry, or (without the guard) dies of SIGBUS, neither of which the
/// tests running beside it in this process must meet. The child runs `body`.
fn in_child_process(name: &str, body: impl FnOnce()) {
    const CHILD: &str = "WEFT_VHOST_ISOLATED_TEST";
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, m)| m);
    let test = format!("{module}::{name}");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{test} in a child process: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("1 passed"), "{test} did not run:\n{stdout}");
}

/// The data path takes a frame lent from the frontend's memory and holds it; the frontend
/// lets go of that memory (`let_go`, which returns how many regions stay guarded while
/// the frame is held) and cuts the file away; then the held frame is read and
/// finished. Its head was copied when it was received; its tail, still lent, reads as
/// zeros where the pages were, a SIGBUS caught and counted — not a dead process — and the
/// guard leaves with the data path's hold. Without the guard living as long as the
/// mapping, the process dies of SIGBUS here.
fn held_frame_survives_truncation(
    tag: &str,
    let_go: impl FnOnce(&mut Option<Guest>, &VhostUserPort) -> usize,
) {
    let path = socket_path(tag);
    let mut port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
    let (mut rx, _tx) = port.take_halves().unwrap();
    let mut guest = Guest::connect(&path);
    guest.start();
    assert!(port.wait_running(Duration::from_secs(5)));
    assert_eq!(sigbus::guarded_regions(), 1, "the frontend's table");
    // Longer than the snapshot, so that part of it stays lent from the guest's memory.
    let frame = ether_frame(1, 2, 1000, 7);
    guest.txq.send(&[0; 12], &frame, &[]);
    let mut batch = RxBatch::new(8);
    rx.receive(&mut batch);
    assert_eq!(batch.len(), 1);
    let handle = batch.descs()[0].handle;
    assert_eq!(rx.frame(handle).to_vec(), frame[..]);

    let file = guest.file.try_clone().unwrap();
    let mut guest = Some(guest);
    let guarded = let_go(&mut guest, &port);
    assert_eq!(
        sigbus::guarded_regions(),
        guarded,
        "still guarded while held"
    );
    file.set_len(0).unwrap();

    let before = sigbus::handled();
    let held = rx.frame(handle).to_vec();
    assert_eq!(
        held[..SNAPSHOT_LEN],
        frame[..SNAPSHOT_LEN],
        "the head was copied"
    );
    assert!(
        held[SNAPSHOT_LEN..].iter().all(|b| *b == 0),
        "the tail reads as zeros"
    );
    assert!(sigbus::handled() > before, "the fault was caught");
    rx.finish();
    // The next batch lets go of the old memory: its guard leaves with its mapping.
    batch.clear();
    rx.receive(&mut batch);
    rx.finish();
    assert_eq!(sigbus::guarded_regions(), guarded - 1);
    drop(guest);
}

#[test]
fn a_frame_held_from_a_replaced_table_survives_the_old_file_being_truncated() {
    in_child_process(
        "a_frame_held_from_a_replaced_table_survives_the_old_file_being_truncated",
        || {
            held_frame_survives_truncation("replaced", |guest, _| {
                // Table B: the same layout in another memfd.
                let b = memfd(GUEST_MEM);
                let table_b = [region(0, GUEST_MEM, VA, 0, b.as_raw_fd())];
                guest.as_mut().unwrap().fe.set_mem_table(&table_b).unwrap();
                2
            });
        },
    );
}

#[test]
fn a_frame_held_past_a_reset_survives_the_file_being_truncated() {
    in_child_process(
        "a_frame_held_past_a_reset_survives_the_file_being_truncated",
        || {
            held_frame_survives_truncation("reset", |guest, _| {
                let fe = &mut guest.as_mut().unwrap().fe;
                fe.reset_owner().unwrap();
                // Answered after the reset was handled.
                fe.get_features().unwrap();
                1
            });
        },
    );
}

#[test]
fn a_frame_held_past_a_disconnect_survives_the_file_being_truncated() {
    in_child_process(
        "a_frame_held_past_a_disconnect_survives_the_file_being_truncated",
        || {
            held_frame_survives_truncation("gone", |guest, port| {
                // The frontend goes, and its table and rings with it.
                drop(guest.take());
                wait_for("the disconnect", || !port.is_connected());
                1
            });
        },
    );
}

#[test]
fn a_table_finding_no_free_guard_slot_is_refused_and_counted() {
    in_child_process(
        "a_table_finding_no_free_guard_slot_is_refused_and_counted",
        || {
            let path = socket_path("no-slot");
            let mut port = VhostUserPort::listen(&path, VhostPortConfig::default()).unwrap();
            let (mut rx, mut tx) = port.take_halves().unwrap();
            // Other guest memory takes every slot of the registry.
            let free = sigbus::GUARD_SLOTS - sigbus::guarded_regions();
            let ranges: Vec<_> = (0..free as u64)
                .map(|i| (vm_memory::GuestAddress(i * 0x2000), 0x1000))
                .collect();
            let others = vm_memory::GuestMemoryMmap::<()>::from_ranges(&ranges).unwrap();
            let occupied = SigbusGuard::register(&others, &vec![0x1000; free]).unwrap();
            assert_eq!(sigbus::guarded_regions(), sigbus::GUARD_SLOTS);

            let table = memfd(GUEST_MEM);
            let regions = [region(0, GUEST_MEM, VA, 0, table.as_raw_fd())];
            assert!(send_table(&path, &regions).is_err(), "unguarded: refused");
            wait_for("the frontend to be dropped", || !port.is_connected());
            let refusals = port.stats().memory_refusals;
            assert_eq!(
                refusals[MemoryRefusal::Unguarded.index()],
                1,
                "{refusals:?}"
            );

            // Slots freed: the next frontend is served (and guarded).
            drop(occupied);
            let mut good = Guest::connect(&path);
            good.start();
            assert!(port.wait_running(Duration::from_secs(5)));
            assert_traffic(&mut good, &mut rx, &mut tx, 2);
            assert_eq!(sigbus::guarded_regions(), 1);
        },
    );
}
