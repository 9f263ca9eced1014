use std::net::UdpSocket;

use vm_memory::VolatileSlice;

use super::*;

fn receiver() -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    sock
}

#[test]
fn a_sendmmsg_batch_reaches_a_recvmmsg_batch_whole_and_in_order() {
    let (a, b) = (receiver(), receiver());
    let to_a = SockAddr::new(a.local_addr().unwrap());
    let to_b = SockAddr::new(b.local_addr().unwrap());
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut shared = [9u8; 3];
    let mut batch = MmsgBatch::new(4, 8);
    {
        let mut out = batch.sending();
        let first = out.add_iovecs(&[IoVec::new(b"he"), IoVec::new(b"llo")]);
        let second = out.add_iovecs(&[
            IoVec::new(b"x"),
            IoVec::shared(VolatileSlice::from(&mut shared[..])),
        ]);
        out.push(first, Some(&to_a));
        // One frame to two remotes: both messages share its iovecs.
        out.push(second, Some(&to_a));
        out.push(second, Some(&to_b));
        assert_eq!(out.send(&tx, 0..out.len()).unwrap(), 3);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));

    let mut buffers = [[0u8; 16]; 3];
    let got = {
        let mut input = batch.receiving();
        for buf in &mut buffers {
            input.push(IoVecMut::new(buf));
        }
        input.receive(&a).unwrap()
    };
    assert_eq!(got, 2);
    let first = batch.received(0).unwrap();
    assert_eq!(&buffers[0][..first.len], b"hello");
    assert_eq!(first.source, Some(tx.local_addr().unwrap()));
    assert_eq!(first.flags & libc::MSG_TRUNC, 0);
    assert!(first.control.is_empty());
    let second = batch.received(1).unwrap();
    assert_eq!(&buffers[1][..second.len], b"x\x09\x09\x09");
    assert!(batch.received(2).is_none());

    let mut buf = [0u8; 8];
    assert_eq!(b.recv(&mut buf).unwrap(), 4);
}

#[test]
fn a_datagram_longer_than_its_buffer_is_flagged_truncated() {
    let rx = receiver();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(&[1; 32], rx.local_addr().unwrap()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut batch = MmsgBatch::new(1, 1);
    let mut buf = [0u8; 8];
    {
        let mut input = batch.receiving();
        input.push(IoVecMut::new(&mut buf));
        assert_eq!(input.receive(&rx).unwrap(), 1);
    }
    let r = batch.received(0).unwrap();
    assert_ne!(r.flags & libc::MSG_TRUNC, 0);
    assert_eq!(buf, [1; 8]);
}

#[test]
fn an_empty_socket_would_block_and_reports_nothing_received() {
    let rx = receiver();
    let mut batch = MmsgBatch::new(2, 2);
    let mut buf = [0u8; 8];
    let mut input = batch.receiving();
    input.push(IoVecMut::new(&mut buf));
    let e = input.receive(&rx).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    assert!(batch.received(0).is_none());
}

#[test]
fn iovecs_of_another_batch_make_an_empty_message() {
    let rx = receiver();
    let to = SockAddr::new(rx.local_addr().unwrap());
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut batch = MmsgBatch::new(2, 2);
    let stale = {
        let mut out = batch.sending();
        out.add_iovecs(&[IoVec::new(b"abc"), IoVec::new(b"def")])
    };
    let mut out = batch.sending();
    out.push(stale, Some(&to));
    assert_eq!(out.send(&tx, 0..1).unwrap(), 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut buf = [0u8; 8];
    assert_eq!(rx.recv(&mut buf).unwrap(), 0);
}

#[test]
fn a_send_range_past_the_end_is_clamped() {
    let rx = receiver();
    let to = SockAddr::new(rx.local_addr().unwrap());
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut batch = MmsgBatch::new(1, 1);
    let mut out = batch.sending();
    let iov = out.add_iovecs(&[IoVec::new(b"a")]);
    out.push(iov, Some(&to));
    assert_eq!(out.send(&tx, 0..10).unwrap(), 1);
    assert_eq!(out.send(&tx, 5..10).unwrap(), 0);
}

/// One `recvmmsg` from `sock` into `buffers`, a message each.
fn receive_into(batch: &mut MmsgBatch, buffers: &mut [[u8; 8]], sock: &UdpSocket) -> usize {
    let mut input = batch.receiving();
    for buf in buffers {
        input.push(IoVecMut::new(buf));
    }
    input.receive(sock).unwrap()
}

/// Headers and addresses are kept from batch to batch: a receive reports each batch's own
/// senders (an IPv6 one after IPv4 ones), and an unnamed message sent after named ones goes
/// where its connected socket points, not to a name left from before.
#[test]
fn a_reused_batch_reports_each_batchs_own_senders_and_sends_unnamed_messages_unnamed() {
    let rx4 = receiver();
    let tx4 = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut batch = MmsgBatch::new(2, 2);
    let mut buffers = [[0u8; 8]; 2];
    tx4.send_to(b"v4", rx4.local_addr().unwrap()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(receive_into(&mut batch, &mut buffers, &rx4), 1);
    assert_eq!(
        batch.received(0).unwrap().source,
        Some(tx4.local_addr().unwrap())
    );
    assert!(batch.received(1).is_none());

    let Ok(rx6) = UdpSocket::bind("[::1]:0") else {
        return; // no IPv6 loopback here
    };
    rx6.set_nonblocking(true).unwrap();
    let tx6 = UdpSocket::bind("[::1]:0").unwrap();
    tx6.send_to(b"v6", rx6.local_addr().unwrap()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(receive_into(&mut batch, &mut buffers, &rx6), 1);
    let got = batch.received(0).unwrap();
    assert_eq!(got.source, Some(tx6.local_addr().unwrap()));
    assert_eq!(&buffers[0][..got.len], b"v6");

    // Named to rx4 first, then unnamed on a socket connected to another receiver.
    let other = receiver();
    let connected = UdpSocket::bind("127.0.0.1:0").unwrap();
    connected.connect(other.local_addr().unwrap()).unwrap();
    let to_rx4 = SockAddr::new(rx4.local_addr().unwrap());
    {
        let mut out = batch.sending();
        let m = out.add_iovecs(&[IoVec::new(b"named")]);
        out.push(m, Some(&to_rx4));
        assert_eq!(out.send(&tx4, 0..1).unwrap(), 1);
    }
    {
        let mut out = batch.sending();
        let m = out.add_iovecs(&[IoVec::new(b"plain")]);
        out.push(m, None);
        assert_eq!(out.send(&connected, 0..1).unwrap(), 1);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut buf = [0u8; 8];
    assert_eq!(other.recv(&mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"plain");
    assert_eq!(rx4.recv(&mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"named");
}
