//! The vhost-user request handler: feature negotiation, the memory table and ring setup,
//! every value the frontend sends checked before use. Runs on the port's control thread;
//! it hands rings to the data path by starting them in the shared
//! [`VringState`](crate::vring::VringState)s.

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVirtioFeatures,
    VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{Error, GpuBackend, Result, VhostUserBackendReqHandlerMut};
use vhost::VhostUserMemoryRegionBase;
use vm_memory::{Address, Bytes, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

use crate::counters::LogLimiter;
use crate::device::{DeviceShared, RingStart};
use crate::fds::eventfd_from_file;
use crate::features::{offered_features, Features};
use crate::memory::{
    max_log_bytes, DirtyLog, GuestMemoryTable, LogRefusal, MemoryTableError, RegionDesc, RingLog,
};
use crate::vring::{is_guest_tx, RingLayout};

/// Protocol features on offer (REPLY_ACK is added by the `vhost` crate, which implements
/// it): `LOG_SHMFD` (the dirty log of a live migration comes as a descriptor), `RARP`
/// (`SEND_RARP`: announce a migrated guest), `MTU` (`NET_SET_MTU`: the MTU QEMU gives its
/// guest with `host_mtu`), and `MQ` (and so `GET_QUEUE_NUM`) with several queue pairs.
fn offered_protocol_features(queue_pairs: u16) -> VhostUserProtocolFeatures {
    let always = VhostUserProtocolFeatures::LOG_SHMFD
        | VhostUserProtocolFeatures::RARP
        | VhostUserProtocolFeatures::MTU;
    if queue_pairs > 1 {
        always | VhostUserProtocolFeatures::MQ
    } else {
        always
    }
}

/// `VHOST_F_LOG_ALL`: the frontend asks for dirty page logging (live migration).
const LOG_ALL: u64 = VhostUserVirtioFeatures::LOG_ALL.bits();

/// How long `GET_VRING_BASE` waits for a batch in flight to be returned before it gives the
/// batch back to the available ring instead.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(50);

/// A ring's addresses as the frontend gave them (its own virtual addresses), and the guest
/// physical address of its used ring for dirty logging when the frontend asked for it
/// (`VHOST_VRING_F_LOG`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingAddrs {
    pub(crate) desc: u64,
    pub(crate) avail: u64,
    pub(crate) used: u64,
    pub(crate) log: Option<u64>,
}

/// What the frontend has told us about one ring.
#[derive(Default)]
pub(crate) struct RingConfig {
    pub(crate) size: Option<u16>,
    pub(crate) base: u16,
    pub(crate) addrs: Option<RingAddrs>,
    pub(crate) call: Option<EventFd>,
    /// What the last SET_VRING_ENABLE said, if one got through.
    pub(crate) enabled: Option<bool>,
    pub(crate) started: bool,
}

/// The per-connection device model.
pub(crate) struct Device {
    shared: Arc<DeviceShared>,
    acked_features: u64,
    acked_protocol: u64,
    memory: Option<GuestMemoryTable>,
    /// One per queue of the port (`2 × queue_pairs`).
    rings: Vec<RingConfig>,
    log: LogLimiter,
    /// The dirty page log of a live migration (`SET_LOG_BASE`), used while `LOG_ALL` is
    /// negotiated.
    dirty_log: Option<Arc<DirtyLog>>,
    /// When the last announcement was accepted (`SEND_RARP`).
    last_announce: Option<std::time::Instant>,
    /// Why the last request was refused (a hand-over replaying requests reports it).
    last_refusal: Option<String>,
}

/// The closest two announcements of one frontend may follow each other.
const MIN_ANNOUNCE_INTERVAL: Duration = Duration::from_millis(10);

/// Sizes of the three parts of a split ring of `size` entries (virtio 1.x §2.7).
fn ring_sizes(size: u16) -> (u64, u64, u64) {
    let n = u64::from(size);
    (16 * n, 6 + 2 * n, 6 + 8 * n)
}

/// Where a starting ring resumes: the frontend's base, unless the used ring in guest memory
/// says otherwise. They differ when the previous backend died with chains in flight (taken
/// from the available ring, never returned) and the frontend could not learn that: those
/// chains are then processed again rather than lost to the guest (DPDK's vhost library does
/// the same). QEMU itself sends the used index as the base after losing its backend.
fn resume_index(mem: &GuestMemoryMmap, used: GuestAddress, base: u16) -> u16 {
    let Some(idx_addr) = used.checked_add(2) else {
        return base;
    };
    match mem.load::<u16>(idx_addr, Ordering::Acquire) {
        Ok(used_idx) if u16::from_le(used_idx) != base => {
            let used_idx = u16::from_le(used_idx);
            tracing::info!(
                base,
                used_idx,
                "ring resumes from the used index, not the frontend's base"
            );
            used_idx
        }
        // Unreadable: the ring does not start anyway (checked when it starts).
        _ => base,
    }
}

impl Device {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        let rings = Self::fresh_rings(&shared);
        Device {
            shared,
            acked_features: 0,
            acked_protocol: 0,
            memory: None,
            rings,
            log: LogLimiter::new(),
            dirty_log: None,
            last_announce: None,
            last_refusal: None,
        }
    }

    /// The features the frontend acknowledged.
    pub(crate) fn acked_features(&self) -> u64 {
        self.acked_features
    }

    /// The protocol features the frontend acknowledged.
    pub(crate) fn acked_protocol(&self) -> u64 {
        self.acked_protocol
    }

    /// The memory table in force, if any.
    pub(crate) fn memory(&self) -> Option<&GuestMemoryTable> {
        self.memory.as_ref()
    }

    /// What the frontend has told us about each ring.
    pub(crate) fn rings(&self) -> &[RingConfig] {
        &self.rings
    }

    /// Why the last request was refused, taken (`None` when none was, or it was taken).
    pub(crate) fn take_refusal(&mut self) -> Option<String> {
        self.last_refusal.take()
    }

    fn refuse(&mut self, what: &str, why: &dyn std::fmt::Display) -> Error {
        self.last_refusal = Some(format!("{what}: {why}"));
        if let Some(held_back) = self.log.allow() {
            tracing::warn!(request = what, reason = %why, held_back, "vhost-user request refused");
        }
        Error::InvalidParam
    }

    fn fresh_rings(shared: &DeviceShared) -> Vec<RingConfig> {
        (0..shared.vrings.len())
            .map(|_| RingConfig::default())
            .collect()
    }

    /// Ring `index`, which must be one of the port's `2 × queue_pairs` queues.
    fn ring(&mut self, index: u32) -> Result<(usize, &mut RingConfig)> {
        let count = self.rings.len();
        let found = usize::try_from(index).ok().filter(|i| *i < count);
        let Some(i) = found else {
            return Err(self.refuse(
                "ring request",
                &format_args!("queue index {index} outside the port's {count} queues"),
            ));
        };
        let ring = self.rings.get_mut(i).ok_or(Error::InvalidParam)?;
        Ok((i, ring))
    }

    /// The frontend is gone (or reset us): stop every ring, forget everything.
    pub(crate) fn reset(&mut self) {
        for (index, vring) in self.shared.vrings.iter().enumerate() {
            let mut st = vring.lock();
            st.stop(&vring.counters);
            self.shared.replace_kick(index, &mut st, None);
            st.call = None;
            st.enabled = false;
            st.fault = None;
        }
        self.rings = Self::fresh_rings(&self.shared);
        self.memory = None;
        self.acked_features = 0;
        self.acked_protocol = 0;
        self.shared.set_features(Features(0));
        self.dirty_log = None;
        self.sync_logging();
    }

    /// Whether the frontend acknowledged protocol feature `f`.
    pub(crate) fn protocol_acked(&self, f: VhostUserProtocolFeatures) -> bool {
        self.acked_protocol & f.bits() != 0
    }

    /// A request read outside the `vhost` crate (`server/side_requests.rs`) refused.
    pub(crate) fn refuse_side(
        &mut self,
        what: &str,
        reason: LogRefusal,
        why: &dyn std::fmt::Display,
    ) {
        self.refuse_logging(what, reason, why);
    }

    /// A request refused for a logging reason: counted, and the frontend dropped.
    fn refuse_logging(
        &mut self,
        what: &str,
        reason: LogRefusal,
        why: &dyn std::fmt::Display,
    ) -> Error {
        self.shared.log_refusals.count(reason.index());
        self.refuse(what, why)
    }

    /// How ring `index` logs now: with the log while `LOG_ALL` is negotiated and a log is
    /// mapped; its used ring only if the frontend gave its log address.
    fn ring_log(&self, index: usize) -> Option<RingLog> {
        if self.acked_features & LOG_ALL == 0 {
            return None;
        }
        let log = self.dirty_log.as_ref()?;
        Some(RingLog {
            log: Arc::clone(log),
            used: self
                .rings
                .get(index)
                .and_then(|r| r.addrs)
                .and_then(|a| a.log),
            counters: Arc::clone(&self.shared.log_counters),
        })
    }

    /// Puts the logging in force on every ring, each under its lock, so that when this
    /// returns no ring writes without logging (or into a log it replaced): the frontend
    /// may fetch and free a replaced log as soon as it is answered.
    fn sync_logging(&mut self) {
        for (index, vring) in self.shared.vrings.iter().enumerate() {
            let dirty = self.ring_log(index);
            vring.lock().dirty = dirty;
        }
        let on = self.acked_features & LOG_ALL != 0 && self.dirty_log.is_some();
        self.shared.set_logging(on, self.dirty_log.as_deref());
    }

    /// `SET_LOG_FD`: the descriptor the frontend would have us signal when the log changes.
    /// Nothing in this port needs it (it writes the log as it goes); it must be an eventfd
    /// and is closed.
    pub(crate) fn set_log_fd(&mut self, fd: Option<File>) -> Result<()> {
        match fd.map(eventfd_from_file) {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.refuse_logging("SET_LOG_FD", LogRefusal::BadLogFd, &e)),
            None => Err(self.refuse_logging(
                "SET_LOG_FD",
                LogRefusal::BadLogFd,
                &"no descriptor attached",
            )),
        }
    }

    /// `NET_SET_MTU`: the MTU the frontend gives its guest (QEMU `host_mtu`). Taken when
    /// the `MTU` protocol feature was negotiated and the port carries frames that large
    /// (68 up to the port's MTU); otherwise refused and counted (QEMU then says the backend
    /// does not support that MTU).
    pub(crate) fn set_guest_mtu(&mut self, mtu: u64) -> Result<()> {
        let port_mtu = u64::try_from(self.shared.config.mtu).unwrap_or(u64::MAX);
        let why = if !self.protocol_acked(VhostUserProtocolFeatures::MTU) {
            Some("the MTU protocol feature was not negotiated".to_string())
        } else if !(68..=port_mtu).contains(&mtu) {
            Some(format!(
                "MTU {mtu} outside 68..={} (the port's MTU: `weft port add ... --mtu`)",
                self.shared.config.mtu
            ))
        } else {
            None
        };
        match why {
            Some(why) => {
                self.refuse_mtu(&why);
                Err(Error::InvalidParam)
            }
            None => {
                let mtu = u32::try_from(mtu).map_err(|_| Error::InvalidParam)?;
                self.shared.guest_mtu.store(mtu, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// A `NET_SET_MTU` refused: counted and logged.
    pub(crate) fn refuse_mtu(&mut self, why: &str) {
        self.shared.mtu_refusals.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%why, "NET_SET_MTU refused");
    }

    /// `SEND_RARP`: the guest with MAC `mac` now runs behind this port (a live migration
    /// completed): announce it from here, as though the guest had sent it, at once.
    pub(crate) fn send_rarp(&mut self, mac: [u8; 6]) -> Result<()> {
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return Err(self.refuse_logging(
                "SEND_RARP",
                LogRefusal::BadAnnounce,
                &"the MAC to announce is not a station's (multicast or zero)",
            ));
        }
        // QEMU announces a few times, 50 ms apart at the closest; a frontend asking faster
        // would have the port broadcast as fast as its worker polls.
        let now = std::time::Instant::now();
        if self
            .last_announce
            .is_some_and(|at| now.duration_since(at) < MIN_ANNOUNCE_INTERVAL)
        {
            self.shared
                .log_refusals
                .count(LogRefusal::AnnounceTooFast.index());
            return Ok(());
        }
        self.last_announce = Some(now);
        tracing::info!(
            mac = %weft_packet::MacAddr(mac),
            "announcing a migrated guest (RARP)"
        );
        self.shared.request_announce(mac);
        Ok(())
    }

    /// Validates, admits and maps a memory table (`SET_MEM_TABLE`, and a hand-over
    /// restoring one), refusals counted by reason; running rings move to the new memory.
    pub(crate) fn map_memory(
        &mut self,
        descs: &[RegionDesc],
        files: Vec<File>,
    ) -> std::result::Result<(), MemoryTableError> {
        let limit = self.shared.config.max_guest_memory;
        let table = match GuestMemoryTable::map(descs, files, limit) {
            Ok(t) => t,
            Err(e) => {
                self.shared.memory_refusals.count(e.reason().index());
                return Err(e);
            }
        };
        // Running rings move to the new memory; a ring the new table no longer covers stops
        // being served. The data path keeps the old mapping, and its SIGBUS guard, until its
        // batch is finished (`memory/guarded.rs`).
        let mem = table.memory_arc();
        for vring in &self.shared.vrings {
            let mut st = vring.lock();
            if !st.running {
                continue;
            }
            if virtio_queue::QueueT::is_valid(&st.queue, &*mem) {
                st.mem = Some(Arc::clone(&mem));
            } else {
                st.mem = Some(Arc::clone(&mem));
                st.fault(
                    crate::counters::QueueFault::RingInaccessible,
                    &vring.counters,
                    vring.name,
                );
            }
        }
        self.memory = Some(table);
        Ok(())
    }

    /// Starts ring `index` with the kick descriptor just received.
    fn start_ring(&mut self, index: usize, kick: Option<EventFd>) -> Result<()> {
        let features = Features(self.acked_features);
        let ring = self.rings.get(index).ok_or(Error::InvalidParam)?;
        let (Some(size), Some(addrs)) = (ring.size, ring.addrs) else {
            return Err(self.refuse("SET_VRING_KICK", &"ring size or addresses not set"));
        };
        let Some(table) = &self.memory else {
            return Err(self.refuse("SET_VRING_KICK", &"no memory table"));
        };
        let (desc_len, avail_len, used_len) = ring_sizes(size);
        let (Some(desc), Some(avail), Some(used)) = (
            table.va_to_gpa(addrs.desc, desc_len),
            table.va_to_gpa(addrs.avail, avail_len),
            table.va_to_gpa(addrs.used, used_len),
        ) else {
            return Err(self.refuse("SET_VRING_KICK", &"ring outside the memory table"));
        };
        let call = match &ring.call {
            Some(c) => Some(c.try_clone().map_err(|_| Error::BackendInternalError)?),
            None => None,
        };
        let mem = table.memory_arc();
        let base = resume_index(&mem, used, ring.base);
        let start = RingStart {
            mem,
            layout: RingLayout {
                size,
                desc,
                avail,
                used,
                base,
            },
            features,
            // The spec starts a ring disabled when PROTOCOL_FEATURES is negotiated, until
            // SET_VRING_ENABLE. QEMU 7.2's virtio-net sends that enable before SET_FEATURES,
            // which the `vhost` crate refuses (see `server.rs`), and does not repeat it: a
            // ring therefore starts enabled unless the frontend disabled it explicitly.
            enabled: ring.enabled.unwrap_or(true),
            kick,
            call,
        };
        let dirty = self.ring_log(index);
        if let Err(e) = self.shared.start_ring(index, start, dirty) {
            return Err(self.refuse("SET_VRING_KICK", &e));
        }
        if let Some(ring) = self.rings.get_mut(index) {
            ring.started = true;
        }
        Ok(())
    }
}

impl VhostUserBackendReqHandlerMut for Device {
    fn set_owner(&mut self) -> Result<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> Result<()> {
        self.reset();
        Ok(())
    }

    fn reset_device(&mut self) -> Result<()> {
        self.reset();
        Ok(())
    }

    fn get_features(&mut self) -> Result<u64> {
        Ok(offered_features(&self.shared.config))
    }

    fn set_features(&mut self, features: u64) -> Result<()> {
        let offered = offered_features(&self.shared.config);
        if features & !offered != 0 {
            return Err(self.refuse(
                "SET_FEATURES",
                &format_args!("features {:#x} not offered", features & !offered),
            ));
        }
        // Logging goes on and off while the rings run (a live migration); nothing else may
        // change under them.
        if self.rings.iter().any(|r| r.started) && (features ^ self.acked_features) & !LOG_ALL != 0
        {
            return Err(self.refuse("SET_FEATURES", &"features changed while rings run"));
        }
        self.acked_features = features;
        self.shared.set_features(Features(features));
        self.sync_logging();
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        regions: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> Result<Option<Vec<VhostUserMemoryRegionBase>>> {
        let descs: Vec<RegionDesc> = regions
            .iter()
            .map(|r| RegionDesc {
                guest_phys_addr: r.guest_phys_addr,
                size: r.memory_size,
                user_addr: r.user_addr,
                mmap_offset: r.mmap_offset,
            })
            .collect();
        match self.map_memory(&descs, files) {
            Ok(()) => Ok(None),
            Err(e) => Err(self.refuse("SET_MEM_TABLE", &e)),
        }
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> Result<()> {
        let max = self.shared.config.max_queue_size;
        let (_, ring) = self.ring(index)?;
        if ring.started {
            return Err(Error::InvalidOperation("ring size changed while running"));
        }
        match u16::try_from(num) {
            Ok(n) if n != 0 && n.is_power_of_two() && n <= max => {
                ring.size = Some(n);
                Ok(())
            }
            _ => Err(self.refuse(
                "SET_VRING_NUM",
                &format_args!("size {num} is not a power of two in 1..={max}"),
            )),
        }
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        log: u64,
    ) -> Result<()> {
        let logged = flags.contains(VhostUserVringAddrFlags::VHOST_VRING_F_LOG);
        let addrs = RingAddrs {
            desc: descriptor,
            avail: available,
            used,
            log: logged.then_some(log),
        };
        if logged && log.checked_add(ring_sizes(u16::MAX).2).is_none() {
            return Err(self.refuse_logging(
                "SET_VRING_ADDR",
                LogRefusal::BadRingLog,
                &format_args!("used ring log address {log:#x} wraps the address space"),
            ));
        }
        let (i, ring) = self.ring(index)?;
        if ring.started {
            // A running ring may only have its logging turned on or off (a live migration
            // starting or ending), its addresses as they are.
            let same = ring
                .addrs
                .is_some_and(|a| (a.desc, a.avail, a.used) == (descriptor, available, used));
            if !same {
                return Err(Error::InvalidOperation(
                    "ring addresses changed while running",
                ));
            }
            ring.addrs = Some(addrs);
            let dirty = self.ring_log(i);
            if let Some(vring) = self.shared.vrings.get(i) {
                vring.lock().dirty = dirty;
            }
            return Ok(());
        }
        ring.addrs = Some(addrs);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> Result<()> {
        let (_, ring) = self.ring(index)?;
        if ring.started {
            return Err(Error::InvalidOperation("ring base changed while running"));
        }
        match u16::try_from(base) {
            Ok(b) => {
                ring.base = b;
                Ok(())
            }
            Err(_) => Err(self.refuse("SET_VRING_BASE", &format_args!("base {base} above 65535"))),
        }
    }

    fn get_vring_base(&mut self, index: u32) -> Result<VhostUserVringState> {
        let (i, ring) = self.ring(index)?;
        if !ring.started {
            // Never started (or stopped already): the base is what the frontend set.
            return Ok(VhostUserVringState::new(index, u32::from(ring.base)));
        }
        let vring = self.shared.vrings.get(i).ok_or(Error::InvalidParam)?;
        let deadline = std::time::Instant::now() + IN_FLIGHT_WAIT;
        let mut st = vring.lock();
        if st.in_flight > 0 {
            // Chains lent to a batch are returned by the worker's next look at the port
            // (its `finish`, or the `receive` after it, when `finish` found the ring locked):
            // wake a worker that sleeps, so that they are completed — and logged, during a
            // migration — before the ring stops, rather than given back and sent twice.
            if let Some(kick) = &st.kick {
                let _ = kick.write(1);
            }
        }
        while st.in_flight > 0 && st.running && std::time::Instant::now() < deadline {
            drop(st);
            std::thread::sleep(Duration::from_micros(200));
            st = vring.lock();
        }
        let base = st.stop(&vring.counters);
        self.shared.replace_kick(i, &mut st, None);
        st.call = None;
        st.fault = None;
        drop(st);
        if let Some(ring) = self.rings.get_mut(i) {
            ring.started = false;
            ring.base = base;
            ring.call = None;
        }
        Ok(VhostUserVringState::new(index, u32::from(base)))
    }

    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        let (i, ring) = self.ring(u32::from(index))?;
        let started = ring.started;
        let kick = match fd.map(eventfd_from_file).transpose() {
            Ok(k) => k,
            Err(e) => return Err(self.refuse("SET_VRING_KICK", &e)),
        };
        if started {
            // A new kick descriptor for a running ring: swap it in.
            let vring = self.shared.vrings.get(i).ok_or(Error::InvalidParam)?;
            let mut st = vring.lock();
            self.shared.replace_kick(i, &mut st, kick);
            return Ok(());
        }
        self.start_ring(i, kick)
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        let (i, _) = self.ring(u32::from(index))?;
        let call = match fd.map(eventfd_from_file).transpose() {
            Ok(c) => c,
            Err(e) => return Err(self.refuse("SET_VRING_CALL", &e)),
        };
        let for_ring = match &call {
            Some(c) => Some(c.try_clone().map_err(|_| Error::BackendInternalError)?),
            None => None,
        };
        let (_, ring) = self.ring(u32::from(index))?;
        ring.call = call;
        if ring.started {
            let vring = self.shared.vrings.get(i).ok_or(Error::InvalidParam)?;
            vring.lock().call = for_ring;
        }
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, fd: Option<File>) -> Result<()> {
        self.ring(u32::from(index))?;
        // Validated and closed: the port reports errors through its counters instead.
        if let Some(Err(e)) = fd.map(eventfd_from_file) {
            return Err(self.refuse("SET_VRING_ERR", &e));
        }
        Ok(())
    }

    fn get_protocol_features(&mut self) -> Result<VhostUserProtocolFeatures> {
        Ok(offered_protocol_features(self.shared.config.queue_pairs))
    }

    fn set_protocol_features(&mut self, features: u64) -> Result<()> {
        let offered = (offered_protocol_features(self.shared.config.queue_pairs)
            | VhostUserProtocolFeatures::REPLY_ACK)
            .bits();
        if features & !offered != 0 {
            return Err(self.refuse(
                "SET_PROTOCOL_FEATURES",
                &format_args!("protocol features {:#x} not offered", features & !offered),
            ));
        }
        self.acked_protocol = features;
        Ok(())
    }

    /// Queue pairs, as DPDK's vhost library answers: QEMU's vhost-user netdev compares it
    /// with its `queues=` (pairs) and refuses to start with more.
    fn get_queue_num(&mut self) -> Result<u64> {
        Ok(u64::from(self.shared.config.queue_pairs))
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> Result<()> {
        let (i, ring) = self.ring(index)?;
        ring.enabled = Some(enable);
        if ring.started {
            let vring = self.shared.vrings.get(i).ok_or(Error::InvalidParam)?;
            let mut st = vring.lock();
            st.enabled = enable;
            if enable && is_guest_tx(i) {
                if let Some(kick) = &st.kick {
                    // Wake the worker: the guest may have queued frames already.
                    let _ = kick.write(1);
                }
            }
        }
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> Result<Vec<u8>> {
        Err(Error::InvalidOperation("config space not offered"))
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> Result<()> {
        Err(Error::InvalidOperation("config space not offered"))
    }

    fn set_gpu_socket(&mut self, _: GpuBackend) -> Result<()> {
        Err(Error::InvalidOperation("not a GPU"))
    }

    fn get_shared_object(&mut self, _: VhostUserSharedMsg) -> Result<File> {
        Err(Error::InvalidOperation("shared objects not offered"))
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> Result<(VhostUserInflight, File)> {
        Err(Error::InvalidOperation("inflight tracking not offered"))
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _: File) -> Result<()> {
        Err(Error::InvalidOperation("inflight tracking not offered"))
    }

    fn get_max_mem_slots(&mut self) -> Result<u64> {
        Err(Error::InvalidOperation("memory slots not offered"))
    }

    fn add_mem_region(
        &mut self,
        _: &VhostUserSingleMemoryRegion,
        _: File,
        _: Option<bool>,
    ) -> Result<Option<VhostUserMemoryRegionBase>> {
        Err(Error::InvalidOperation("memory slots not offered"))
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> Result<()> {
        Err(Error::InvalidOperation("memory slots not offered"))
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _: File,
    ) -> Result<Option<File>> {
        Err(Error::InvalidOperation("device state transfer not offered"))
    }

    fn check_device_state(&mut self) -> Result<()> {
        Err(Error::InvalidOperation("device state transfer not offered"))
    }

    fn get_shmem_config(&mut self) -> Result<VhostUserShMemConfig> {
        Err(Error::InvalidOperation("shared memory regions not offered"))
    }

    /// The dirty log of a live migration, new or replacing the last (QEMU grows it with
    /// the guest's memory while logging): in force on every ring before the answer.
    fn set_log_base(&mut self, log: &VhostUserLog, file: File) -> Result<()> {
        let limit = max_log_bytes(self.shared.config.max_guest_memory);
        let (size, offset) = (log.mmap_size, log.mmap_offset);
        match DirtyLog::map(file, size, offset, limit) {
            Ok(mapped) => {
                tracing::info!(bytes = size, "dirty page log mapped");
                self.dirty_log = Some(Arc::new(mapped));
                self.sync_logging();
                Ok(())
            }
            Err(e) => Err(self.refuse_logging("SET_LOG_BASE", e.reason(), &e)),
        }
    }
}

#[cfg(test)]
mod tests;
