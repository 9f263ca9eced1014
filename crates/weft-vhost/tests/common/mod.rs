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
