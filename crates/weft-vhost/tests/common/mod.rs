//! Checks shared by weft-vhost's end-to-end tests (their setup lives in weft-testlab).

use weft_vhost::VhostPortStats;

/// The port met no broken ring and dropped nothing, in either direction; `context` is shown
/// when it did.
pub(crate) fn assert_no_faults_or_drops(s: &VhostPortStats, context: &str) {
    let faults = s.from_guest.total_faults() + s.to_guest.total_faults();
    assert_eq!(faults, 0, "faults: {context}");
    let drops = s.from_guest.total_drops() + s.to_guest.total_drops();
    assert_eq!(drops, 0, "drops: {context}");
}

/// Prints each queue pair's frames (from the guest, to the guest) and checks that the port
/// has `pairs` pairs whose counts add up to its totals.
pub(crate) fn check_pairs(s: &VhostPortStats, pairs: usize) {
    let per_pair: Vec<_> = s
        .pairs
        .iter()
        .map(|p| (p.from_guest.frames, p.to_guest.frames))
        .collect();
    eprintln!("weft port (from guest, to guest) per pair: {per_pair:?}");
    assert_eq!(s.pairs.len(), pairs, "{s:?}");
    let from: u64 = per_pair.iter().map(|p| p.0).sum();
    let to: u64 = per_pair.iter().map(|p| p.1).sum();
    assert_eq!(
        (from, to),
        (s.from_guest.frames, s.to_guest.frames),
        "{s:?}"
    );
}
