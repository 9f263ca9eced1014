//! The body of the `handover_messages` fuzz target: arbitrary bytes as what the running
//! weftd sends a new one (`weftd --takeover`), read through the new side's real path
//! ([`crate::takeover::take::receive_on`]: framing, the JSON of the offer and of every
//! port's device description, the descriptor checks). Checks: it never panics or hangs,
//! and anything it accepts is consistent (as many ports as the offer said, each device
//! with the descriptors it names).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::takeover::take::receive_on;

/// Feeds `input` as the old weftd's side of one hand-over; panics when a check fails.
pub fn handover_messages(input: &[u8]) {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let lock = std::env::temp_dir().join(format!("weft-fuzz-handover-{}.lock", std::process::id()));
    let _ = std::fs::write(&lock, b"");
    let bytes = input.to_vec();
    let writer = std::thread::spawn(move || {
        let mut theirs = theirs;
        let _ = theirs.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = theirs.write_all(&bytes);
        // End of input: the new side must see the peer gone, not wait.
    });
    let got = receive_on(ours, &lock);
    let _ = writer.join();
    if let Ok(received) = got {
        assert_eq!(
            received.inherited.len(),
            received.offer.ports,
            "ports lost or doubled"
        );
        for (device, fds) in received.inherited.values() {
            if let Some(count) = device.fd_count() {
                assert_eq!(count, fds.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn the_new_side_survives_any_bytes_from_the_old_one(
            input in proptest::collection::vec(any::<u8>(), 0..512)
        ) {
            handover_messages(&input);
        }

        #[test]
        fn the_new_side_survives_any_body_behind_a_well_formed_header(
            body in proptest::collection::vec(any::<u8>(), 0..256)
        ) {
            let mut input = b"WFTH".to_vec();
            input.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
            input.extend_from_slice(&body);
            handover_messages(&input);
        }
    }

    #[test]
    fn a_refusal_and_an_offer_without_its_descriptors_are_errors() {
        for body in [
            &br#"{"refuse":{"reason":"no"}}"#[..],
            br#"{"offer":{"version":"0","pid":1,"state":{"version":1,"switches":[]},"listeners":{"control_tcp":false,"metrics":false},"ports":0,"fdb":[],"notify_socket":null}}"#,
        ] {
            let mut input = b"WFTH".to_vec();
            input.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
            input.extend_from_slice(body);
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            theirs.write_all(&input).unwrap();
            drop(theirs);
            let lock = tempfile::NamedTempFile::new().unwrap();
            assert!(receive_on(ours, lock.path()).is_err());
        }
    }
}
