//! `sendmmsg` / `recvmmsg` batches. An [`MmsgBatch`] owns the message headers, iovecs,
//! addresses and control-message buffers and keeps them (and their capacity) from one batch
//! to the next: no allocation per datagram. Each batch is a use of it ([`SendMsgs`],
//! [`RecvMsgs`]) whose iovecs borrow the memory they describe for the use's lifetime, so the
//! system call reads or writes only live memory. The pointers in the headers are set right
//! before each call, from storage that no longer moves.

use std::ffi::c_int;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd};

use crate::addr::{socklen, SockAddr};
use crate::iovec::{IoVec, IoVecMut};

/// Room for a received datagram's control messages: a few `int`-sized ones
/// (`CMSG_SPACE(4)` is 24 bytes on 64-bit Linux).
pub const CONTROL_LEN: usize = 64;

/// A control-message buffer, aligned for `cmsghdr`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u8; CONTROL_LEN]);

/// Where one message's iovecs lie in the batch's iovec list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Iovecs {
    first: usize,
    count: usize,
}

/// One message: its iovecs and whether it has an address.
#[derive(Clone, Copy)]
struct Message {
    iovecs: Iovecs,
    named: bool,
}

/// A message's address: none, where it goes, or room for where it came from.
#[derive(Clone, Copy)]
enum Name<'s> {
    None,
    To(&'s SockAddr),
    Room,
}

/// Storage for `sendmmsg` / `recvmmsg` batches, reused from batch to batch.
///
/// `headers` and `addrs` keep their entries from batch to batch (only `messages` says how
/// many the current batch has): `link` sets every header field the kernel reads right
/// before each call, and an address is written only where a message has one to send, so a
/// batch of 64 receive buffers does not zero 64 headers and addresses on every poll.
pub struct MmsgBatch {
    headers: Vec<libc::mmsghdr>,
    iovecs: Vec<libc::iovec>,
    messages: Vec<Message>,
    addrs: Vec<SockAddr>,
    controls: Vec<Control>,
    /// Messages the last `recvmmsg` filled in.
    received: usize,
}

// SAFETY: the raw pointers in `headers` and `iovecs` are set right before a system call,
// from storage owned by the batch or borrowed by the current use (`SendMsgs`/`RecvMsgs`, which
// hold `IoVec`s/`IoVecMut`s, both Send); between uses they are stale and never read.
unsafe impl Send for MmsgBatch {}
// SAFETY: a shared `&MmsgBatch` reads only integers and storage the batch owns (`received`);
// the raw pointers are used only through `&mut` (a use).
unsafe impl Sync for MmsgBatch {}

impl std::fmt::Debug for MmsgBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmsgBatch")
            .field("messages", &self.messages.len())
            .field("iovecs", &self.iovecs.len())
            .field("received", &self.received)
            .finish()
    }
}

fn empty_header() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain old data; null pointers and zero lengths are a valid value.
    unsafe { std::mem::zeroed() }
}

impl MmsgBatch {
    /// Room for `messages` messages and `iovecs` iovecs in all (more grows the storage).
    pub fn new(messages: usize, iovecs: usize) -> Self {
        MmsgBatch {
            headers: Vec::with_capacity(messages),
            iovecs: Vec::with_capacity(iovecs),
            messages: Vec::with_capacity(messages),
            addrs: Vec::with_capacity(messages),
            controls: vec![Control([0; CONTROL_LEN]); messages],
            received: 0,
        }
    }

    fn clear(&mut self) {
        self.iovecs.clear();
        self.messages.clear();
        self.received = 0;
    }

    /// A new batch to send, from memory borrowed for `'a`.
    pub fn sending<'a>(&mut self) -> SendMsgs<'_, 'a> {
        self.clear();
        SendMsgs {
            batch: self,
            memory: PhantomData,
        }
    }

    /// A new batch to receive into memory borrowed for `'a`.
    pub fn receiving<'a>(&mut self) -> RecvMsgs<'_, 'a> {
        self.clear();
        RecvMsgs {
            batch: self,
            memory: PhantomData,
        }
    }

    /// Message `i` of the last `recvmmsg`, if it received that many.
    pub fn received(&self, i: usize) -> Option<Received<'_>> {
        if i >= self.received {
            return None;
        }
        let header = self.headers.get(i)?;
        let hdr = &header.msg_hdr;
        let mut addr = *self.addrs.get(i)?;
        addr.len = hdr.msg_namelen;
        let control = self.controls.get(i)?;
        Some(Received {
            len: usize::try_from(header.msg_len).unwrap_or(0),
            flags: hdr.msg_flags,
            source: addr.to_socket_addr(),
            control: control.0.get(..hdr.msg_controllen).unwrap_or(&control.0),
        })
    }

    /// Points headers `range` at their iovecs, addresses and (when `control`) control
    /// buffers. Returns the range clamped to the messages there are.
    fn link(&mut self, range: Range<usize>, control: bool) -> Range<usize> {
        let end = range.end.min(self.messages.len());
        let start = range.start.min(end);
        for i in start..end {
            let m = self.messages[i];
            let header = &mut self.headers[i].msg_hdr;
            // Checked when the message was added: `first + count <= iovecs.len()`.
            header.msg_iov = self.iovecs[m.iovecs.first..].as_mut_ptr();
            header.msg_iovlen = m.iovecs.count;
            if m.named {
                let addr = &mut self.addrs[i];
                header.msg_name = std::ptr::from_mut(&mut addr.storage).cast();
                header.msg_namelen = addr.len;
            } else {
                header.msg_name = std::ptr::null_mut();
                header.msg_namelen = 0;
            }
            if control {
                let c = &mut self.controls[i];
                header.msg_control = c.0.as_mut_ptr().cast();
                header.msg_controllen = CONTROL_LEN;
            } else {
                header.msg_control = std::ptr::null_mut();
                header.msg_controllen = 0;
            }
            header.msg_flags = 0;
        }
        start..end
    }

    fn add_message(&mut self, iovecs: Iovecs, name: Name<'_>) {
        let iovecs = if iovecs
            .first
            .checked_add(iovecs.count)
            .is_some_and(|end| end <= self.iovecs.len())
        {
            iovecs
        } else {
            Iovecs::default()
        };
        let i = self.messages.len();
        if self.headers.len() <= i {
            self.headers.push(empty_header());
        }
        if self.addrs.len() <= i {
            self.addrs.push(SockAddr::empty());
        }
        match name {
            Name::None => {}
            Name::To(to) => self.addrs[i] = *to,
            // The kernel writes the sender's address and its length: only the room is set.
            Name::Room => self.addrs[i].len = socklen::<libc::sockaddr_storage>(),
        }
        self.messages.push(Message {
            iovecs,
            named: !matches!(name, Name::None),
        });
    }
}

/// What `recvmmsg` left for one message.
#[derive(Debug, Clone, Copy)]
pub struct Received<'b> {
    /// Bytes received (more than the buffer when `MSG_TRUNC` is in `flags`).
    pub len: usize,
    /// `MSG_TRUNC`, `MSG_CTRUNC`, ...
    pub flags: c_int,
    /// The sender, if it was IPv4 or IPv6.
    pub source: Option<SocketAddr>,
    /// The control messages, as the kernel wrote them.
    pub control: &'b [u8],
}

/// A batch being sent: messages whose iovecs borrow memory for `'a`.
pub struct SendMsgs<'b, 'a> {
    batch: &'b mut MmsgBatch,
    memory: PhantomData<IoVec<'a>>,
}

impl<'a> SendMsgs<'_, 'a> {
    /// Adds iovecs that messages can share (one frame sent to several remotes).
    pub fn add_iovecs(&mut self, iovs: &[IoVec<'a>]) -> Iovecs {
        let first = self.batch.iovecs.len();
        self.batch.iovecs.extend(iovs.iter().map(IoVec::raw));
        Iovecs {
            first,
            count: iovs.len(),
        }
    }

    /// Adds a message made of `iovecs` (from [`SendMsgs::add_iovecs`] in this batch; others
    /// make an empty message), to `to` (`None` for a connected or packet socket).
    pub fn push(&mut self, iovecs: Iovecs, to: Option<&SockAddr>) {
        self.batch
            .add_message(iovecs, to.map_or(Name::None, Name::To));
    }

    /// Messages so far.
    pub fn len(&self) -> usize {
        self.batch.messages.len()
    }

    /// True before the first message.
    pub fn is_empty(&self) -> bool {
        self.batch.messages.is_empty()
    }

    /// One `sendmmsg(MSG_DONTWAIT)` of messages `range`: how many went, or the error of the
    /// first.
    pub fn send(&mut self, fd: impl AsFd, range: Range<usize>) -> io::Result<usize> {
        let range = self.batch.link(range, false);
        if range.is_empty() {
            return Ok(0);
        }
        let msgs = &mut self.batch.headers[range];
        let n = libc::c_uint::try_from(msgs.len()).unwrap_or(libc::c_uint::MAX);
        // SAFETY: `msgs` is a live, exclusively borrowed array of at least `n` headers; each
        // points (set by `link` just now) at iovecs of this batch, which describe memory
        // borrowed for `'a` (the `IoVec`s added), and at an address the batch owns. The
        // kernel reads those and writes only the headers' `msg_len`.
        let ret = unsafe {
            libc::sendmmsg(
                fd.as_fd().as_raw_fd(),
                msgs.as_mut_ptr(),
                n,
                libc::MSG_DONTWAIT,
            )
        };
        usize::try_from(ret).map_err(|_| io::Error::last_os_error())
    }
}

/// A batch being received: one buffer per message, borrowed for `'a`.
pub struct RecvMsgs<'b, 'a> {
    batch: &'b mut MmsgBatch,
    memory: PhantomData<IoVecMut<'a>>,
}

impl<'a> RecvMsgs<'_, 'a> {
    /// Adds a message that receives into `buf`, with room for its sender's address and
    /// [`CONTROL_LEN`] bytes of control messages.
    pub fn push(&mut self, buf: IoVecMut<'a>) {
        let first = self.batch.iovecs.len();
        self.batch.iovecs.push(buf.raw());
        let i = self.batch.messages.len();
        self.batch
            .add_message(Iovecs { first, count: 1 }, Name::Room);
        if self.batch.controls.len() <= i {
            self.batch.controls.push(Control([0; CONTROL_LEN]));
        }
    }

    /// Messages so far.
    pub fn len(&self) -> usize {
        self.batch.messages.len()
    }

    /// True before the first message.
    pub fn is_empty(&self) -> bool {
        self.batch.messages.is_empty()
    }

    /// One `recvmmsg(MSG_DONTWAIT)` into every message: how many came (read each with
    /// [`MmsgBatch::received`]), or the error.
    pub fn receive(&mut self, fd: impl AsFd) -> io::Result<usize> {
        let range = self.batch.link(0..self.batch.messages.len(), true);
        let msgs = &mut self.batch.headers[range];
        let n = libc::c_uint::try_from(msgs.len()).unwrap_or(libc::c_uint::MAX);
        // SAFETY: `msgs` is a live, exclusively borrowed array of at least `n` headers; each
        // points (set by `link` just now) at one iovec describing a buffer exclusively
        // borrowed for `'a` (the `IoVecMut` pushed), an address and a control buffer the
        // batch owns, each with its true length. The kernel writes within those lengths.
        let ret = unsafe {
            libc::recvmmsg(
                fd.as_fd().as_raw_fd(),
                msgs.as_mut_ptr(),
                n,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let got = usize::try_from(ret).map_err(|_| io::Error::last_os_error())?;
        self.batch.received = got.min(self.batch.messages.len());
        Ok(self.batch.received)
    }
}

#[cfg(test)]
mod tests;
