//! The hand-over channel over a real socket pair, with real descriptors.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Note {
    n: u32,
    text: String,
}

fn pair() -> (HandoverChannel, HandoverChannel) {
    let (a, b) = UnixStream::pair().unwrap();
    let timeout = Duration::from_secs(5);
    (
        HandoverChannel::new(a, timeout).unwrap(),
        HandoverChannel::new(b, timeout).unwrap(),
    )
}

fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().unwrap()
}

#[test]
fn a_message_and_its_descriptors_cross_and_the_descriptors_are_live() {
    let (mut old, mut new) = pair();
    let pipes: Vec<(OwnedFd, OwnedFd)> = (0..3).map(|_| pipe()).collect();
    let write_ends: Vec<_> = pipes.iter().map(|(_, w)| w.as_fd()).collect();
    let note = Note {
        n: 7,
        text: "three pipes".into(),
    };
    old.send(&note, &write_ends).unwrap();
    let (got, fds): (Note, _) = new.recv().unwrap();
    assert_eq!(got, note);
    assert_eq!(fds.len(), 3);
    // Each received descriptor is the same pipe: what is written through it comes out of
    // the read end this side kept.
    for (i, (fd, (read_end, _))) in (0u8..).zip(fds.into_iter().zip(pipes)) {
        let mut w = std::fs::File::from(fd);
        w.write_all(&[i; 4]).unwrap();
        let mut r = std::fs::File::from(read_end);
        let mut buf = [0u8; 4];
        r.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [i; 4]);
    }
}

#[test]
fn messages_keep_their_boundaries_and_their_own_descriptors() {
    let (mut old, mut new) = pair();
    let (r, w) = pipe();
    old.send(
        &Note {
            n: 1,
            text: "a".into(),
        },
        &[],
    )
    .unwrap();
    old.send(
        &Note {
            n: 2,
            text: "b".repeat(100_000),
        },
        &[r.as_fd(), w.as_fd()],
    )
    .unwrap();
    old.send(
        &Note {
            n: 3,
            text: "c".into(),
        },
        &[],
    )
    .unwrap();
    let (first, fds1): (Note, _) = new.recv().unwrap();
    let (second, fds2): (Note, _) = new.recv().unwrap();
    let (third, fds3): (Note, _) = new.recv().unwrap();
    assert_eq!((first.n, second.n, third.n), (1, 2, 3));
    assert_eq!(second.text.len(), 100_000);
    assert_eq!((fds1.len(), fds2.len(), fds3.len()), (0, 2, 0));
}

#[test]
fn more_descriptors_than_one_message_carries_are_refused_before_anything_is_sent() {
    let (mut old, _new) = pair();
    let (r, _w) = pipe();
    let many = vec![r.as_fd(); MAX_FDS_PER_MESSAGE + 1];
    let err = old.send(
        &Note {
            n: 0,
            text: String::new(),
        },
        &many,
    );
    assert!(
        matches!(err, Err(HandoverError::TooManyFds(254))),
        "{err:?}"
    );
    // The most one message may carry do cross.
    let (mut old, mut new) = pair();
    let most = vec![r.as_fd(); MAX_FDS_PER_MESSAGE];
    old.send(
        &Note {
            n: 0,
            text: String::new(),
        },
        &most,
    )
    .unwrap();
    let (_, fds): (Note, _) = new.recv().unwrap();
    assert_eq!(fds.len(), MAX_FDS_PER_MESSAGE);
}

#[test]
fn a_peer_that_closes_mid_message_ends_the_hand_over_with_an_error() {
    let (mut old, mut new) = pair();
    let mut header = Vec::from(*b"WFTH");
    header.extend_from_slice(&100u32.to_le_bytes());
    old.stream_mut().write_all(&header).unwrap();
    old.stream_mut().write_all(b"{\"n\":").unwrap();
    drop(old);
    let err = new.recv::<Note>();
    assert!(matches!(err, Err(HandoverError::Closed)), "{err:?}");
    // And one that closes before a whole header.
    let (mut old, mut new) = pair();
    old.stream_mut().write_all(b"WFT").unwrap();
    drop(old);
    assert!(matches!(new.recv::<Note>(), Err(HandoverError::Closed)));
}

#[test]
fn another_framing_or_an_oversized_length_is_refused_without_reading_on() {
    let (mut old, mut new) = pair();
    old.stream_mut().write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
    assert!(matches!(new.recv::<Note>(), Err(HandoverError::BadMagic)));
    let (mut old, mut new) = pair();
    let mut header = Vec::from(*b"WFTH");
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    old.stream_mut().write_all(&header).unwrap();
    let err = new.recv::<Note>();
    assert!(matches!(err, Err(HandoverError::TooLarge(_))), "{err:?}");
}

#[test]
fn a_body_that_is_not_the_message_expected_is_a_decode_error() {
    let (mut old, mut new) = pair();
    old.send(&vec![1, 2, 3], &[]).unwrap();
    assert!(matches!(new.recv::<Note>(), Err(HandoverError::Decode(_))));
}

#[test]
fn a_silent_peer_times_out_instead_of_hanging() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut new = HandoverChannel::new(b, Duration::from_millis(200)).unwrap();
    let started = Instant::now();
    let err = new.recv::<Note>();
    assert!(matches!(err, Err(HandoverError::Io(_))), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(a);
}
