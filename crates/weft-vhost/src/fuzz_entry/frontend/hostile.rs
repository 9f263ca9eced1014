//! The hostile frontend: records of the input turned into vhost-user messages and the
//! descriptors sent with them, and the leak check over what it sent.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::memfd::{memfd_create, MFdFlags};
use vhost::vhost_user::message::VhostUserProtocolFeatures as Protocol;
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::config::VhostPortConfig;
use crate::features::offered_features;

use super::super::Input;

/// Descriptors per message (a full memory table), and per input.
const MAX_FDS: usize = 8;
const MAX_FDS_TOTAL: usize = 64;
const MAX_MEMFD: u64 = 1 << 20;
/// What our eventfds hold: not `hostile_tests`' value, by which that test counts its own.
pub(super) const TAG: u64 = 0x0f0f_f00d_f0f0;

pub(super) const VERSION: u64 = 1;
pub(super) const REPLY: u64 = 0x4;
const NEED_REPLY: u64 = 0x8;

/// Structured memory tables put region `i` at `i × STRIDE` (guest) and `USER_BASE + i ×
/// STRIDE` (frontend): no overlap unless perturbed.
const STRIDE: u64 = MAX_MEMFD;
const USER_BASE: u64 = 0x7f00_0000_0000;
/// Ring `k` lies at `k × SLOT` in a region: descriptors, avail at +0x4000, used at +0x5000
/// (room for 1024 entries), then the guest's buffer.
const SLOT: u64 = 0x8000;

mod req {
    pub(super) const SET_FEATURES: u64 = 2;
    pub(super) const SET_MEM_TABLE: u64 = 5;
    pub(super) const SET_VRING_NUM: u64 = 8;
    pub(super) const SET_VRING_ADDR: u64 = 9;
    pub(super) const SET_VRING_BASE: u64 = 10;
    pub(super) const GET_VRING_BASE: u64 = 11;
    pub(super) const SET_VRING_KICK: u64 = 12;
    pub(super) const SET_VRING_CALL: u64 = 13;
    pub(super) const SET_VRING_ERR: u64 = 14;
    pub(super) const SET_PROTOCOL_FEATURES: u64 = 16;
    pub(super) const SET_VRING_ENABLE: u64 = 18;
    pub(super) const SET_LOG_BASE: u64 = 6;
    pub(super) const SET_LOG_FD: u64 = 7;
    pub(super) const SEND_RARP: u64 = 19;
    pub(super) const NET_SET_MTU: u64 = 20;
}

/// Requests most records are: setup (table, ring size, addresses, base, kick, call, features,
/// protocol features, enable, owner), some twice; queries, SET_VRING_ERR, RESET_OWNER; a live
/// migration's (the dirty log, its descriptor, the announcement); the guest's MTU.
const FAVOURED: [u64; 25] = [
    5, 5, 8, 9, 9, 10, 12, 12, 13, 2, 2, 16, 18, 3, 1, 11, 17, 15, 14, 4, 6, 6, 7, 19, 20,
];

/// Tells runs apart in the process's descriptors (tests run them in parallel).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// The hostile frontend. It keeps its own copy of every descriptor it sent, as a real one
/// does: an eventfd's id then cannot be reused while the leak check looks for it.
pub(super) struct Frontend {
    pub(super) sock: UnixStream,
    run: u64,
    config: VhostPortConfig,
    /// Regions of the last memory table sent (rings go in one of them).
    regions: u64,
    pub(super) files: Vec<File>,
    pub(super) events: Vec<EventFd>,
    event_ids: Vec<String>,
    pub(super) codes: Vec<u64>,
}

impl Frontend {
    pub(super) fn new(sock: UnixStream, config: VhostPortConfig) -> Self {
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        Frontend {
            sock,
            run,
            config,
            regions: 1,
            files: Vec::new(),
            events: Vec::new(),
            event_ids: Vec::new(),
            codes: Vec::new(),
        }
    }

    /// A memfd of `len` bytes (at most 1 MiB): zeros, or input bytes at ring slot 0 or 1.
    pub(super) fn memfd(&mut self, len: u64, input: &mut Input<'_>) -> Option<RawFd> {
        if self.files.len() + self.events.len() >= MAX_FDS_TOTAL {
            return None;
        }
        let name = format!("weft-fuzz-frontend-{}.", self.run);
        let file = File::from(memfd_create(name.as_str(), MFdFlags::MFD_CLOEXEC).ok()?);
        let len = len.min(MAX_MEMFD);
        file.set_len(len).ok()?;
        let content = input.u8();
        let bytes = input.take(usize::from(content >> 7) * usize::from(content & 0x3f) * 4);
        let at = SLOT * u64::from((content >> 6) & 1);
        if at + 256 <= len {
            let _ = file.write_all_at(bytes, at);
        }
        let fd = file.as_raw_fd();
        self.files.push(file);
        Some(fd)
    }

    /// An eventfd holding [`TAG`], blocking: the port must make its copy non-blocking.
    pub(super) fn eventfd(&mut self) -> Option<RawFd> {
        if self.files.len() + self.events.len() >= MAX_FDS_TOTAL {
            return None;
        }
        let e = EventFd::new(0).ok()?;
        e.write(TAG).ok()?;
        let fd = e.as_raw_fd();
        self.event_ids.extend(eventfd_id(fd));
        self.events.push(e);
        Some(fd)
    }

    /// Decodes and sends one message; false when there is nothing more to send.
    pub(super) fn message(&mut self, input: &mut Input<'_>) -> bool {
        let sel = input.u8();
        let code = match sel {
            0..=0xcf => FAVOURED[usize::from(sel) % FAVOURED.len()],
            0xd0..=0xdf => {
                // A ring in one record (random bytes seldom set one up message by message):
                // a table of one 256 KiB region, then ring `q`'s size, addresses and kick.
                let q = input.u8();
                let script = [0, 0, 0, 0, 0, 2, 0, q, 8, 3, 0, q, 0, 6, 0, q];
                let mut script = Input(&script);
                return (0..4).all(|_| self.message(&mut script));
            }
            0xe0..=0xf7 => 1 + u64::from(sel) % 40,
            _ => input.num(4),
        };
        // Low half: the flags. High half: one in four messages is in trouble, one way.
        let shape = input.u8();
        let flags = match shape & 15 {
            0..=10 => VERSION,
            11..=13 => VERSION | NEED_REPLY,
            14 => VERSION | REPLY,
            _ => input.num(4),
        };
        let trouble = shape >> 4;
        let mut fds = Vec::new();
        let body: Vec<u8> = if trouble == 12 {
            let len = usize::from(input.u8());
            input.take(len).to_vec()
        } else {
            let Some(words) = self.body(code, trouble == 15, input, &mut fds) else {
                return false;
            };
            words.iter().flat_map(|w| w.to_le_bytes()).collect()
        };
        if trouble == 14 {
            // Descriptors the request may not take.
            let extra = input.u8();
            for k in 0..1 + extra % 4 {
                let fd = if (extra >> (k + 2)) & 1 == 0 {
                    self.eventfd()
                } else {
                    self.memfd(0x1000, input)
                };
                fds.extend(fd);
            }
        }
        fds.truncate(MAX_FDS);
        let size = match trouble {
            13 => input.num(2) & 0x1fff,
            _ => u64::try_from(body.len()).unwrap_or(0),
        };
        let mut bytes: Vec<u8> = [code, flags, size]
            .iter()
            .flat_map(|w| u32::try_from(*w).unwrap_or(u32::MAX).to_le_bytes())
            .collect();
        bytes.extend_from_slice(&body);
        // Non-blocking: a full socket buffer ends the input rather than waiting.
        let sent = self.sock.send_with_fds(&[&bytes[..]], &fds) == Ok(bytes.len());
        if sent {
            self.codes.push(code);
        }
        sent
    }

    /// The 64-bit words of a body shaped for `code` (a queue index and a value share one);
    /// `None` when out of descriptors. Perturbed: indexes and values anything.
    fn body(
        &mut self,
        code: u64,
        perturb: bool,
        input: &mut Input<'_>,
        fds: &mut Vec<RawFd>,
    ) -> Option<Vec<u64>> {
        let queues = 2 * u64::from(self.config.queue_pairs);
        let index = match code {
            8..=14 | 18 if perturb => u64::from(input.u8()),
            8..=14 | 18 => u64::from(input.u8()) % queues,
            _ => 0,
        };
        Some(match code {
            req::SET_FEATURES | req::SET_PROTOCOL_FEATURES if perturb => vec![input.num(8)],
            req::SET_FEATURES => {
                let dropped = u64::from(input.u8()) << (input.u8() % 57);
                vec![offered_features(&self.config) & !dropped]
            }
            req::SET_PROTOCOL_FEATURES => {
                let mq = match self.config.queue_pairs {
                    1 => Protocol::empty(),
                    _ => Protocol::MQ,
                };
                let migration = Protocol::LOG_SHMFD | Protocol::RARP;
                vec![(Protocol::REPLY_ACK | migration | mq).bits() & u64::from(input.u8())]
            }
            req::SET_VRING_NUM
            | req::SET_VRING_BASE
            | req::GET_VRING_BASE
            | req::SET_VRING_ENABLE => {
                let num = match code {
                    _ if perturb => input.num(4),
                    req::SET_VRING_NUM => 1 << (input.u8() % 11),
                    req::SET_VRING_BASE => u64::from(input.u8()),
                    req::SET_VRING_ENABLE => u64::from(input.u8() & 1),
                    _ => 0,
                };
                vec![index | (num << 32)]
            }
            req::SET_VRING_ADDR => {
                let region = u64::from(input.u8()) % self.regions;
                let ring = USER_BASE + region * STRIDE + (index % 16) * SLOT;
                if perturb {
                    // Logging asked for (its used ring logged anywhere near); the parts
                    // anywhere near (misaligned, overlapping).
                    let flags = u64::from(input.u8() & 1) << 32;
                    let mut near = || ring + input.num(2);
                    vec![index | flags, near(), near(), near(), near()]
                } else {
                    vec![index, ring, ring + 0x5000, ring + 0x4000, 0]
                }
            }
            req::SET_LOG_BASE => {
                // Size and offset: a log for the tables' memory at 0, or anything.
                let (size, offset) = if perturb {
                    (input.num(8), input.num(8))
                } else {
                    (u64::from(input.u8()) * 8 + 8, 0)
                };
                fds.push(self.memfd(0x1000, input)?);
                vec![size, offset]
            }
            req::SET_LOG_FD => {
                fds.push(if perturb {
                    self.memfd(0x1000, input)?
                } else {
                    self.eventfd()?
                });
                Vec::new()
            }
            req::SEND_RARP if perturb => vec![input.num(8)],
            req::SEND_RARP => vec![0x5634_1200_5452 | (u64::from(input.u8()) << 40)],
            req::NET_SET_MTU if perturb => vec![input.num(8)],
            req::NET_SET_MTU => vec![1280 + u64::from(input.u8())],
            req::SET_VRING_KICK | req::SET_VRING_CALL | req::SET_VRING_ERR => {
                // Perturbed: 1, "no descriptor" and none; 2, that and one; 3, a memfd.
                let how = if perturb { input.u8() % 4 } else { 0 };
                match how {
                    1 => {}
                    3 => fds.push(self.memfd(0x1000, input)?),
                    _ => fds.push(self.eventfd()?),
                }
                vec![index | if how == 1 || how == 2 { 0x100 } else { 0 }]
            }
            req::SET_MEM_TABLE => self.mem_table(perturb, input, fds)?,
            _ => Vec::new(),
        })
    }

    /// One or two regions, each a memfd sent with the table. Perturbed: up to 8 regions,
    /// one word anything (the region count too), maybe a descriptor short.
    fn mem_table(
        &mut self,
        perturb: bool,
        input: &mut Input<'_>,
        fds: &mut Vec<RawFd>,
    ) -> Option<Vec<u64>> {
        let n = if perturb { 0 } else { 1 } + input.u8() % if perturb { 9 } else { 2 };
        let mut words = vec![u64::from(n)];
        for i in 0..u64::from(n) {
            let size = match input.u8() {
                0 => 0x40000,
                pages => u64::from(pages) * 0x1000,
            };
            fds.push(self.memfd(size, input)?);
            words.extend([i * STRIDE, size, USER_BASE + i * STRIDE, 0]);
        }
        if perturb {
            let (at, value) = (usize::from(input.u8()) % words.len(), input.num(8));
            if let Some(w) = words.get_mut(at) {
                *w = value;
            }
            if input.u8() & 1 != 0 {
                fds.pop();
            }
        }
        self.regions = u64::from(n.max(1));
        Some(words)
    }

    /// Descriptors of this run's memfds and eventfds open in the process, but the
    /// frontend's own copies; and mappings of its memfds.
    pub(super) fn leftovers(&self) -> (usize, usize) {
        let needle = format!("memfd:weft-fuzz-frontend-{}.", self.run);
        let own: Vec<RawFd> = (self.files.iter().map(AsRawFd::as_raw_fd))
            .chain(self.events.iter().map(AsRawFd::as_raw_fd))
            .collect();
        let dir = std::fs::read_dir("/proc/self/fd").into_iter().flatten();
        let open = dir.flatten().filter(|e| {
            let fd = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok());
            let Some(fd) = fd.filter(|fd| !own.contains(fd)) else {
                return false;
            };
            let link = std::fs::read_link(e.path()).unwrap_or_default();
            let link = link.to_string_lossy();
            link.contains(&needle)
                || (link == "anon_inode:[eventfd]"
                    && eventfd_id(fd).is_some_and(|id| self.event_ids.contains(&id)))
        });
        let open = open.count();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        (open, maps.lines().filter(|l| l.contains(&needle)).count())
    }
}

/// An eventfd's id, unique among the eventfds alive (Linux 5.2 and later).
fn eventfd_id(fd: RawFd) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    let id = info.lines().find_map(|l| l.strip_prefix("eventfd-id:"))?;
    Some(id.trim().to_owned())
}
