//! The old process's side: the port described by its control thread, with duplicates of
//! the descriptors the description names.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;

use super::{
    io, ConnectionHandover, Described, MemifHandover, MemifHandoverError, RegionHandover,
    RingHandover, HANDOVER_VERSION,
};
use crate::config::MemifConfig;
use crate::connection::Connection;
use crate::ring::RingPlace;

/// The connected peer as the control thread holds it.
pub(crate) struct Connected<'a> {
    pub(crate) socket: BorrowedFd<'a>,
    pub(crate) connection: &'a Connection,
    pub(crate) peer_name: &'a str,
    pub(crate) peer_interface: &'a str,
}

/// Descriptors in the order their indices are handed out.
#[derive(Default)]
struct Fds(Vec<OwnedFd>);

impl Fds {
    fn push(
        &mut self,
        fd: BorrowedFd<'_>,
        what: &'static str,
    ) -> Result<usize, MemifHandoverError> {
        self.0.push(fd.try_clone_to_owned().map_err(io(what))?);
        Ok(self.0.len() - 1)
    }
}

/// Describes the port (called on its control thread, with the workers paused).
pub(crate) fn describe(
    config: &MemifConfig,
    listener: Option<BorrowedFd<'_>>,
    connected: Option<Connected<'_>>,
) -> Result<Described, MemifHandoverError> {
    let mut fds = Fds::default();
    let listener = listener
        .map(|l| fds.push(l, "duplicating the listening socket"))
        .transpose()?;
    let connection = connected
        .map(|c| describe_connection(c, &mut fds))
        .transpose()?;
    Ok((
        MemifHandover {
            version: HANDOVER_VERSION,
            role: config.role,
            id: config.id,
            listener,
            connection,
        },
        fds.0,
    ))
}

fn describe_connection(
    c: Connected<'_>,
    fds: &mut Fds,
) -> Result<ConnectionHandover, MemifHandoverError> {
    let conn = c.connection;
    if conn.broken() || conn.memory.tripped() {
        return Err(MemifHandoverError::Broken(
            conn.fault().unwrap_or_else(|| "memory truncated".into()),
        ));
    }
    let socket = fds.push(c.socket, "duplicating the connection")?;
    let mut regions = Vec::with_capacity(conn.memory.regions());
    for index in 0..conn.memory.regions() {
        let index = u16::try_from(index)
            .map_err(|_| MemifHandoverError::Invalid("too many regions".into()))?;
        let (Some(file), Some(size)) = (
            conn.memory.region_file(index),
            conn.memory.region_size(index),
        ) else {
            return Err(MemifHandoverError::Invalid(format!(
                "region {index} has no file"
            )));
        };
        let fd = fds.push(file.as_fd(), "duplicating a region's file")?;
        regions.push(RegionHandover { size, fd });
    }
    let ring = |place: RingPlace, interrupt: BorrowedFd<'_>, position, offered, fds: &mut Fds| {
        Ok::<_, MemifHandoverError>(RingHandover {
            region: place.region(),
            offset: place.offset(),
            log2: place.log2(),
            interrupt: fds.push(interrupt, "duplicating an interrupt")?,
            position,
            offered,
        })
    };
    let mut rx = Vec::with_capacity(conn.rx.len());
    let mut layout = None;
    for r in &conn.rx {
        layout = layout.or(r.own.map(|o| o.layout));
        let position = r.released.load(Ordering::Acquire);
        let offered = r.own.map(|_| r.offered.load(Ordering::Acquire));
        rx.push(ring(r.place, r.interrupt.as_fd(), position, offered, fds)?);
    }
    let mut tx = Vec::with_capacity(conn.tx.len());
    for t in &conn.tx {
        let t = t.lock().unwrap_or_else(|p| p.into_inner());
        let position = t.producer.published();
        tx.push(ring(
            t.producer.place(),
            t.interrupt.as_fd(),
            position,
            None,
            fds,
        )?);
    }
    Ok(ConnectionHandover {
        socket,
        peer_name: c.peer_name.to_string(),
        peer_interface: c.peer_interface.to_string(),
        buffer_size: conn.buffer_size,
        regions,
        layout,
        rx,
        tx,
    })
}
