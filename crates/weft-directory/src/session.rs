//! One store session after another: connect, keep a lease, read the VNIs carried at one
//! revision, watch from the next, write this host's entries as they change. Any failure
//! ends the session; the next one starts after a backoff and reads everything again, and
//! the sink is given the whole of each VNI at once, so forwarding never sees a gap.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Certificate, Client, ConnectOptions, GetOptions, Identity, PutOptions, TlsOptions, Txn, TxnOp,
    WatchOptions,
};
use weft_packet::{MacAddr, Vni};

use crate::client::{lock, Shared, Sink};
use crate::config::DirectoryConfig;
use crate::error::DirectoryError;
use crate::keys::{all_vnis_prefix, vni_prefix};
use crate::publish::{Publisher, Write};
use crate::view::{Change, Entry, View};

/// Keys read per range request while reading a VNI.
const PAGE: i64 = 1000;
/// Operations per transaction (etcd's default limit is 128).
const TXN_OPS: usize = 64;
/// Largest message taken from the store (a watch response may carry many events).
const MAX_MESSAGE: usize = 16 << 20;
/// Backoff between sessions.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A session that lasted this long resets the backoff.
const STABLE: Duration = Duration::from_secs(10);

/// How to connect, checked (and its files read) before the thread starts.
pub(crate) struct ConnectSettings {
    options: ConnectOptions,
}

impl ConnectSettings {
    pub(crate) fn new(config: &DirectoryConfig) -> Result<ConnectSettings, DirectoryError> {
        if config.endpoints.is_empty() {
            return Err(DirectoryError::Config("no endpoints".into()));
        }
        crate::keys::check_prefix(&config.prefix).map_err(DirectoryError::Config)?;
        if config.lease_ttl < Duration::from_secs(2) {
            return Err(DirectoryError::Config("lease TTL below 2 s".into()));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.request_timeout)
            // Finds a store that went away even while nothing is asked of it.
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        if let Some((user, password)) = &config.user {
            options = options.with_user(user.clone(), password.clone());
        }
        if let Some(tls) = &config.tls {
            let read = |what: &'static str, path: &std::path::Path| {
                std::fs::read(path).map_err(|source| DirectoryError::TlsFile {
                    what,
                    path: path.to_path_buf(),
                    source,
                })
            };
            let mut t = TlsOptions::new();
            if let Some(ca) = &tls.ca {
                t = t.ca_certificate(Certificate::from_pem(read("CA certificate", ca)?));
            }
            match (&tls.cert, &tls.key) {
                (Some(cert), Some(key)) => {
                    t = t.identity(Identity::from_pem(
                        read("client certificate", cert)?,
                        read("client key", key)?,
                    ));
                }
                (None, None) => {}
                _ => {
                    return Err(DirectoryError::Config(
                        "a client certificate needs its key, and a key its certificate".into(),
                    ))
                }
            }
            options = options.with_tls(t);
        }
        Ok(ConnectSettings { options })
    }
}

/// Runs sessions until the client is stopped.
pub(crate) async fn run(
    config: DirectoryConfig,
    connect: ConnectSettings,
    shared: Arc<Shared>,
    sink: Arc<dyn Sink>,
) {
    let mut publisher = Publisher::new(&config.prefix, config.host.clone());
    let mut lease = None;
    let mut backoff = BACKOFF_MIN;
    while !shared.stop.load(Ordering::Acquire) {
        lock(&shared.status).sessions += 1;
        let started = Instant::now();
        let mut session = Session {
            config: &config,
            shared: &shared,
            sink: &*sink,
            publisher: &mut publisher,
            lease: &mut lease,
        };
        let result = session.run(&connect).await;
        {
            let mut status = lock(&shared.status);
            status.connected = false;
            if let Err(e) = &result {
                status.last_error = Some(e.to_string());
            }
        }
        match result {
            Ok(()) => return,
            Err(e) => tracing::warn!(error = %e, "directory session ended; retrying"),
        }
        if started.elapsed() > STABLE {
            backoff = BACKOFF_MIN;
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shared.wake.notified() => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One session's state.
struct Session<'a> {
    config: &'a DirectoryConfig,
    shared: &'a Shared,
    sink: &'a dyn Sink,
    publisher: &'a mut Publisher,
    /// The lease of this host's entries, kept across sessions while it lives.
    lease: &'a mut Option<i64>,
}

impl Session<'_> {
    async fn timed<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, DirectoryError> {
        let limit = self.config.request_timeout;
        Ok(tokio::time::timeout(limit, f)
            .await
            .map_err(|_| DirectoryError::Timeout(limit))??)
    }

    async fn run(&mut self, connect: &ConnectSettings) -> Result<(), DirectoryError> {
        let endpoints = self.config.endpoints.clone();
        let mut client = self
            .timed(Client::connect(endpoints, Some(connect.options.clone())))
            .await?;
        let lease = self.lease_for(&mut client).await?;
        let (mut keeper, mut kept) = self.timed(client.lease_keep_alive(lease)).await?;
        {
            let mut status = lock(&self.shared.status);
            status.connected = true;
            status.lease = lease;
            status.last_error = None;
        }
        tracing::info!(lease, "directory session up");
        let ttl = self.config.lease_ttl;
        let mut keepalive = tokio::time::interval(ttl / 3);
        let mut publish = tokio::time::interval(self.config.publish_interval);
        let mut last_kept = Instant::now();
        'resync: loop {
            let carried: HashSet<Vni> =
                lock(&self.shared.desired).1.vteps.keys().copied().collect();
            let (mut view, revision) = self.read(&mut client, carried.clone()).await?;
            self.note_view(&view, revision, true);
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(revision + 1);
            let mut watcher = client.watch_client().max_decoding_message_size(MAX_MESSAGE);
            let mut watch = self
                .timed(watcher.watch(all_vnis_prefix(&self.config.prefix), Some(options)))
                .await?;
            loop {
                tokio::select! {
                    _ = publish.tick() => {
                        if self.shared.stop.load(Ordering::Acquire) {
                            let _ = self.timed(client.lease_revoke(lease)).await;
                            *self.lease = None;
                            return Ok(());
                        }
                        let desired = lock(&self.shared.desired).1.clone();
                        let now: HashSet<Vni> = desired.vteps.keys().copied().collect();
                        if now != carried {
                            continue 'resync;
                        }
                        self.publisher.prune_lost(&desired);
                        let writes =
                            self.publisher.plan(&desired, &view, self.config.max_writes_per_interval);
                        self.write(&mut client, lease, &writes).await?;
                    }
                    () = self.shared.wake.notified() => {
                        // Stop or news: the next publish tick looks.
                        publish.reset_immediately();
                    }
                    _ = keepalive.tick() => {
                        if last_kept.elapsed() > ttl {
                            *self.lease = None;
                            return Err(DirectoryError::LeaseExpired);
                        }
                        self.timed(keeper.keep_alive()).await?;
                    }
                    answer = kept.message() => {
                        match answer? {
                            Some(a) if a.ttl() > 0 => last_kept = Instant::now(),
                            Some(_) => {
                                *self.lease = None;
                                return Err(DirectoryError::LeaseExpired);
                            }
                            None => return Err(DirectoryError::StreamClosed("lease keep-alive")),
                        }
                    }
                    news = watch.message() => {
                        let Some(news) = news? else {
                            return Err(DirectoryError::StreamClosed("watch"));
                        };
                        if news.canceled() || news.compact_revision() != 0 {
                            tracing::info!(
                                compacted = news.compact_revision(),
                                reason = news.cancel_reason(),
                                "directory watch cancelled; reading the VNIs again"
                            );
                            continue 'resync;
                        }
                        let revision = news.header().map_or(0, |h| h.revision());
                        self.apply(&mut view, &news);
                        self.note_view(&view, revision, false);
                    }
                }
            }
        }
    }

    /// The lease from the previous session if it still lives, else a new one (and then
    /// everything this host wrote is gone and written again).
    async fn lease_for(&mut self, client: &mut Client) -> Result<i64, DirectoryError> {
        if let Some(id) = *self.lease {
            let alive = self
                .timed(client.lease_time_to_live(id, None))
                .await
                .is_ok_and(|t| t.ttl() > 0);
            if alive {
                return Ok(id);
            }
        }
        let ttl = i64::try_from(self.config.lease_ttl.as_secs()).unwrap_or(i64::MAX);
        let granted = self.timed(client.lease_grant(ttl, None)).await?;
        *self.lease = Some(granted.id());
        self.publisher.forget_written();
        Ok(granted.id())
    }

    /// Reads every carried VNI at one revision, page by page; the view and the revision.
    async fn read(
        &mut self,
        client: &mut Client,
        carried: HashSet<Vni>,
    ) -> Result<(View, i64), DirectoryError> {
        let c = self.config;
        let mut view = View::new(&c.prefix, c.host.clone(), carried.clone(), c.max_entries);
        let mut revision = 0;
        let mut kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
        let mut vnis: Vec<Vni> = carried.into_iter().collect();
        vnis.sort();
        for vni in vnis {
            let prefix = vni_prefix(&c.prefix, vni);
            let end = prefix_end(prefix.as_bytes());
            let mut from = prefix.clone().into_bytes();
            loop {
                let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
                if revision != 0 {
                    options = options.with_revision(revision);
                }
                let page = self.timed(kv.get(from.clone(), Some(options))).await?;
                if revision == 0 {
                    revision = page.header().map_or(0, |h| h.revision());
                }
                for kv in page.kvs() {
                    view.apply(Entry::Put {
                        key: kv.key(),
                        value: kv.value(),
                    });
                }
                match page.kvs().last() {
                    Some(last) if page.more() => {
                        from = last.key().to_vec();
                        from.push(0);
                    }
                    _ => break,
                }
            }
        }
        if revision == 0 {
            // Nothing carried: the store's current revision, to watch from.
            let any = self.timed(kv.get(vec![0u8], None)).await?;
            revision = any.header().map_or(0, |h| h.revision());
        }
        lock(&self.shared.status).resyncs += 1;
        let vnis: Vec<Vni> = view.carried().iter().copied().collect();
        for vni in vnis {
            self.sink
                .replace(vni, &view.remotes(vni), &view.remote_macs(vni));
        }
        Ok((view, revision))
    }

    /// Applies a watch response's events and tells the sink what changed, VNI by VNI.
    fn apply(&self, view: &mut View, news: &etcd_client::WatchResponse) {
        let mut remotes: Vec<Vni> = Vec::new();
        let mut macs: BTreeMap<Vni, Vec<(MacAddr, Option<IpAddr>)>> = BTreeMap::new();
        for event in news.events() {
            let Some(kv) = event.kv() else { continue };
            // The raw type: the crate's accessor panics on a type it does not know.
            let entry = match event.0.r#type {
                0 => Entry::Put {
                    key: kv.key(),
                    value: kv.value(),
                },
                1 => Entry::Delete { key: kv.key() },
                _ => continue,
            };
            match view.apply(entry) {
                Some(Change::Remotes(vni)) if !remotes.contains(&vni) => remotes.push(vni),
                Some(Change::Mac(vni, mac, to)) => {
                    let list = macs.entry(vni).or_default();
                    list.retain(|(m, _)| *m != mac);
                    list.push((mac, to));
                }
                Some(Change::Remotes(_)) | None => {}
            }
        }
        for vni in remotes {
            self.sink.remotes(vni, &view.remotes(vni));
        }
        for (vni, changes) in macs {
            self.sink.macs(vni, &changes);
        }
    }

    fn note_view(&self, view: &View, revision: i64, _full: bool) {
        let (vteps, claims) = view.entries_by_kind();
        let mut status = lock(&self.shared.status);
        status.revision = status.revision.max(revision);
        status.vteps = vteps;
        status.macs = claims;
        status.published = self.publisher.claims();
        status.refused = view
            .refusals()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.name(), n))
            .collect();
    }

    /// Writes, in transactions of at most [`TXN_OPS`], recording each that the store took.
    async fn write(
        &mut self,
        client: &mut Client,
        lease: i64,
        writes: &[Write],
    ) -> Result<(), DirectoryError> {
        for chunk in writes.chunks(TXN_OPS) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|w| match w {
                    Write::Put { key, value } => TxnOp::put(
                        key.clone(),
                        value.clone(),
                        Some(PutOptions::new().with_lease(lease)),
                    ),
                    Write::Delete { key } => TxnOp::delete(key.clone(), None),
                })
                .collect();
            self.timed(client.txn(Txn::new().and_then(ops))).await?;
            self.publisher.written(chunk);
            let mut status = lock(&self.shared.status);
            status.writes += chunk.len() as u64;
            status.published = self.publisher.claims();
        }
        Ok(())
    }
}

/// The first key after every key that starts with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn the_end_of_a_prefix_is_its_last_byte_plus_one() {
        assert_eq!(prefix_end(b"/weft/vni/5/"), b"/weft/vni/50".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
    }
}
