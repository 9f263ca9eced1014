//! The body of the `handover_messages` fuzz target: arbitrary bytes as what the running
//! weftd sends a new one (`weftd --takeover`). The first byte chooses what is read: the
//! whole conversation through the new side's real path ([`receive_on`]: framing, the
//! offer, the descriptor checks), or a run of port messages (bytes cannot carry the
//! descriptors an offer needs, so this is how the device descriptions — vhost-user
//! snapshots, overlay hand-overs, TAPs — are reached). Checks: it never panics or hangs,
//! and anything accepted is consistent (as many ports as the offer said, each device with
//! the descriptors it names).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::takeover::protocol::PortOffer;
use crate::takeover::take::receive_on;
use crate::takeover::HandoverChannel;

/// Feeds `input` as the old weftd's side of one hand-over; panics when a check fails.
pub fn handover_messages(input: &[u8]) {
    match input.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => port_messages(rest),
        Some((_, rest)) => conversation(rest),
        None => conversation(input),
    }
}

/// `input` as port messages, read one after the other until one fails.
fn port_messages(input: &[u8]) {
    let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
    let bytes = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = theirs.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = theirs.write_all(&bytes);
    });
    let mut channel =
        HandoverChannel::new(ours, Duration::from_secs(1)).expect("channel on a socketpair");
    while let Ok((port, fds)) = channel.recv::<PortOffer>() {
        assert!(fds.is_empty(), "bytes alone brought descriptors");
        // What the new side checks before a driver sees the device.
        let _ = port.device.fd_count();
        let again: PortOffer =
            serde_json::from_slice(&serde_json::to_vec(&port).expect("a port message serializes"))
                .expect("a port message read back");
        assert_eq!(again, port, "a port message does not round-trip");
    }
    let _ = writer.join();
}

/// `input` as the whole conversation.
fn conversation(input: &[u8]) {
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
    fn port_messages_of_every_kind_are_read_and_round_trip() {
        let ports = [
            r#"{"switch":"br0","port":"t","device":{"kind":"tap","ifname":"t","mtu":1500,"csum":true,"tso":true,"uso":false,"owned":true}}"#,
            r#"{"switch":"br0","port":"a","device":{"kind":"reopen"}}"#,
        ];
        let mut input = vec![1u8];
        for body in ports {
            input.extend_from_slice(b"WFTH");
            input.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
            input.extend_from_slice(body.as_bytes());
        }
        handover_messages(&input);
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
