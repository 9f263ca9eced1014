//! A raw memif peer for tests: its own socket code and memfd regions, so that it can send
//! anything, in any order, and write anything into the rings.

#![allow(dead_code, unreachable_pub)]
// Region sizes and offsets here are small (a few hundred KiB).
#![allow(clippy::cast_possible_truncation)]

pub mod pair;

use std::fs::File;
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    connect, recvmsg, sendmsg, socket, AddressFamily, ControlMessage, ControlMessageOwned,
    MsgFlags, SockFlag, SockType, UnixAddr,
};
use weft_memif::layout::{
    ClientLayout, Desc, DESC_SIZE, RING_COOKIE, RING_HEADER, RING_HEAD_AT, RING_TAIL_AT,
};
use weft_memif::wire::{
    AddRegion, AddRing, Direction, Init, Message, Name, MODE_ETHERNET, MSG_SIZE, SECRET_LEN,
    VERSION,
};
use weft_memif::{MemifConfig, MemifPort, MemifPortRx, MemifPortTx, Role, SocketDir};
use weft_switch::{PortRx, RxBatch};

/// A temporary directory removed on drop.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("weft-memif-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    pub fn socket_dir(&self) -> Arc<SocketDir> {
        Arc::new(SocketDir::open(&self.0).unwrap())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Descriptors open in this process now.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The raw side of a connection.
pub struct RawPeer {
    pub sock: OwnedFd,
}

pub fn seqpacket() -> OwnedFd {
    socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap()
}

impl RawPeer {
    pub fn connect(path: &Path) -> RawPeer {
        let sock = seqpacket();
        connect(sock.as_raw_fd(), &UnixAddr::new(path).unwrap()).unwrap();
        RawPeer { sock }
    }

    pub fn send_bytes(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let cmsgs: Vec<ControlMessage<'_>> = if raw.is_empty() {
            vec![]
        } else {
            vec![ControlMessage::ScmRights(&raw)]
        };
        let _ = sendmsg::<()>(
            self.sock.as_raw_fd(),
            &[IoSlice::new(bytes)],
            &cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
    }

    pub fn send(&self, msg: &Message, fds: &[BorrowedFd<'_>]) {
        self.send_bytes(&msg.encode(), fds);
    }

    /// The next message, with its descriptors; `None` on timeout or close.
    pub fn recv(&self, timeout: Duration) -> Option<(Message, Vec<OwnedFd>)> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut buf = [0u8; MSG_SIZE];
            let mut cmsg = nix::cmsg_space!([RawFd; 4]);
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            match recvmsg::<()>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(m) if m.bytes == 0 => return None,
                Ok(m) => {
                    let mut fds = Vec::new();
                    for c in m.cmsgs().unwrap() {
                        if let ControlMessageOwned::ScmRights(r) = c {
                            // SAFETY: just received: this process owns them alone.
                            fds.extend(r.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
                        }
                    }
                    let n = m.bytes;
                    return Message::decode(&buf[..n]).ok().map(|msg| (msg, fds));
                }
                Err(nix::errno::Errno::EAGAIN) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(_) => return None,
            }
        }
    }

    pub fn expect(&self, kind: &str) -> Message {
        match self.recv(Duration::from_secs(5)) {
            Some((m, _)) if m.kind() == kind => m,
            other => panic!("expected {kind}, got {other:?}"),
        }
    }

    /// The reason of the DISCONNECT weft sends (then the socket closes).
    pub fn expect_disconnect(&self) -> String {
        loop {
            match self.recv(Duration::from_secs(5)) {
                Some((Message::Disconnect(d), _)) => return d.reason.printable(),
                Some((Message::Ack, _)) => continue,
                other => panic!("expected DISCONNECT, got {other:?}"),
            }
        }
    }

    /// True when weft closed the socket (within 5 s).
    pub fn closed(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.recv(Duration::from_millis(50)).is_none() {
                let mut b = [0u8; 1];
                if nix::sys::socket::recv(self.sock.as_raw_fd(), &mut b, MsgFlags::MSG_DONTWAIT)
                    == Ok(0)
                {
                    return true;
                }
            }
        }
        false
    }
}

pub fn init_msg(id: u32, secret: &[u8]) -> Message {
    let mut s = [0; SECRET_LEN];
    s[..secret.len()].copy_from_slice(secret);
    Message::Init(Init {
        version: VERSION,
        id,
        mode: MODE_ETHERNET,
        secret: s,
        name: Name::new(b"raw"),
    })
}

pub fn memfd(len: u64) -> File {
    let fd =
        nix::sys::memfd::memfd_create(c"raw-peer", nix::sys::memfd::MFdFlags::MFD_CLOEXEC).unwrap();
    let f = File::from(fd);
    f.set_len(len).unwrap();
    f
}

pub fn eventfd() -> OwnedFd {
    OwnedFd::from(nix::sys::eventfd::EventFd::new().unwrap())
}

/// A raw client's memory: one region laid out as weft's own client does (1 ring each way).
pub struct RawMemory {
    pub file: File,
    pub layout: ClientLayout,
    pub irq: [OwnedFd; 2],
}

pub const LOG2: u8 = 4;

impl RawMemory {
    pub fn new() -> RawMemory {
        let layout = ClientLayout {
            c2s: 1,
            s2c: 1,
            log2: LOG2,
            buffer_size: 2048,
        };
        let file = memfd(layout.region_size());
        let m = RawMemory {
            file,
            layout,
            irq: [eventfd(), eventfd()],
        };
        for d in [Direction::ClientToServer, Direction::ServerToClient] {
            m.write_at(m.layout.ring_offset(d, 0), &RING_COOKIE.to_ne_bytes());
        }
        m
    }

    pub fn write_at(&self, at: u64, bytes: &[u8]) {
        self.file.write_all_at(bytes, at).unwrap();
    }

    pub fn ring(&self, d: Direction) -> u64 {
        self.layout.ring_offset(d, 0)
    }

    pub fn add_region(&self) -> Message {
        Message::AddRegion(AddRegion {
            index: 0,
            size: self.layout.region_size(),
        })
    }

    pub fn add_ring(&self, d: Direction) -> Message {
        Message::AddRing(AddRing {
            direction: d,
            index: 0,
            region: 0,
            offset: self.ring(d) as u32,
            log2_ring_size: LOG2,
            private_hdr_size: 0,
        })
    }

    pub fn desc(&self, d: Direction, slot: u16, desc: Desc) {
        let at = self.ring(d) + RING_HEADER + u64::from(slot % (1 << LOG2)) * DESC_SIZE;
        self.write_at(at, &desc.to_bytes());
    }

    pub fn set_head(&self, d: Direction, head: u16) {
        self.write_at(self.ring(d) + RING_HEAD_AT, &head.to_ne_bytes());
    }

    pub fn set_tail(&self, d: Direction, tail: u16) {
        self.write_at(self.ring(d) + RING_TAIL_AT, &tail.to_ne_bytes());
    }

    /// A frame in slot `slot` of the C2S ring, in its own buffer.
    pub fn put_frame(&self, slot: u16, bytes: &[u8], flags: u16) {
        let off = self
            .layout
            .buffer_offset(Direction::ClientToServer, 0, slot);
        self.write_at(off, bytes);
        self.desc(
            Direction::ClientToServer,
            slot,
            Desc {
                flags,
                region: 0,
                length: bytes.len() as u32,
                offset: off as u32,
            },
        );
    }
}

/// A weft server port on `m.sock` with its halves.
pub struct Server {
    pub dir: Dir,
    pub port: MemifPort,
    pub rx: MemifPortRx,
    pub tx: MemifPortTx,
}

impl Server {
    pub fn start(tag: &str, config: MemifConfig) -> Server {
        let dir = Dir::new(tag);
        let mut port = MemifPort::open(
            dir.socket_dir(),
            "m.sock".as_ref(),
            MemifConfig {
                role: Role::Server,
                ..config
            },
        )
        .unwrap();
        let (rx, tx) = port.take_halves().unwrap();
        Server { dir, port, rx, tx }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.0.join("m.sock")
    }

    /// A raw peer that completed a well-formed handshake up to (not including) CONNECT.
    pub fn raw_setup(&self, mem: &RawMemory) -> RawPeer {
        let p = RawPeer::connect(&self.path());
        p.expect("HELLO");
        p.send(&init_msg(self.port.config().id, b""), &[]);
        p.expect("ACK");
        p.send(&mem.add_region(), &[mem.file.as_fd()]);
        p.expect("ACK");
        p.send(
            &mem.add_ring(Direction::ClientToServer),
            &[mem.irq[0].as_fd()],
        );
        p.expect("ACK");
        p.send(
            &mem.add_ring(Direction::ServerToClient),
            &[mem.irq[1].as_fd()],
        );
        p.expect("ACK");
        p
    }

    /// A raw peer connected (CONNECTED received).
    pub fn raw_connected(&self, mem: &RawMemory) -> RawPeer {
        let p = self.raw_setup(mem);
        p.send(&Message::Connect(Name::new(b"raw0")), &[]);
        p.expect("CONNECTED");
        assert!(self.port.wait_connected(Duration::from_secs(5)));
        p
    }

    /// Polls the receive half `passes` times; returns the frames received.
    pub fn poll(&mut self, passes: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut batch = RxBatch::new(32);
        for _ in 0..passes {
            batch.clear();
            self.rx.receive(&mut batch);
            for d in batch.descs() {
                got.push(self.rx.frame(d.handle).to_vec());
            }
            self.rx.finish();
            std::thread::sleep(Duration::from_millis(2));
        }
        got
    }

    pub fn wait_disconnected(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.port.is_connected() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// A well-behaved peer (a weft client port) connects and its frame arrives: the
    /// server survived whatever came before.
    pub fn assert_serves_a_good_peer(&mut self) {
        assert!(
            self.wait_disconnected(),
            "the hostile peer is still connected"
        );
        let mut client = MemifPort::open(
            self.dir.socket_dir(),
            "m.sock".as_ref(),
            MemifConfig {
                role: Role::Client,
                ..self.port.config().clone()
            },
        )
        .unwrap();
        assert!(
            client.wait_connected(Duration::from_secs(5)),
            "a good peer could not connect: {:?}",
            self.port.status()
        );
        assert!(self.port.wait_connected(Duration::from_secs(5)));
        let (_crx, mut ctx) = client.take_halves().unwrap();
        let frame = vec![0x5a; 60];
        let f = [weft_switch::TxFrame::whole(&frame, Default::default())];
        use weft_switch::PortTx;
        // The server's receive half picks the new connection up on its next look.
        let mut got = Vec::new();
        for _ in 0..200 {
            got = self.poll(1);
            if !got.is_empty() {
                break;
            }
            ctx.transmit(&f);
        }
        assert!(got.contains(&frame), "the good peer's frame never arrived");
        drop(client);
        assert!(self.wait_disconnected());
    }
}
