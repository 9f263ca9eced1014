//! Why an AF_XDP port could not be opened: each error says what was wrong and what to do.

use std::io;

/// Why [`crate::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// An option is out of range.
    #[error("{0}")]
    BadOption(String),
    /// No interface of that name in this network namespace.
    #[error("no interface {ifname} here: check the name with `ip link show`")]
    NoInterface {
        /// The name asked for.
        ifname: String,
    },
    /// The queue is not one of the interface's receive queues.
    #[error(
        "{ifname} has {queues} receive queue(s), no queue {queue}: pick one below {queues} \
         (`ethtool -l {ifname}` shows them)"
    )]
    NoQueue {
        /// The interface.
        ifname: String,
        /// The queue asked for.
        queue: u32,
        /// How many it has.
        queues: u32,
    },
    /// This process already has an AF_XDP port on the interface.
    #[error(
        "an AF_XDP port is already open on {ifname}: one AF_XDP port per interface \
         (delete that port first)"
    )]
    Busy {
        /// The interface.
        ifname: String,
    },
    /// The interface carries frames larger than a UMEM chunk holds.
    #[error(
        "{ifname} has MTU {mtu}, but an AF_XDP chunk holds frames of an MTU up to {max}: \
         lower it (`ip link set dev {ifname} mtu {max}`) or use an af-packet port"
    )]
    MtuTooLarge {
        /// The interface.
        ifname: String,
        /// Its MTU.
        mtu: u32,
        /// The largest the port takes.
        max: u32,
    },
    /// The embedded XDP program could not be loaded.
    #[error(
        "loading the XDP program failed: {reason} (needs root, or CAP_BPF, CAP_NET_ADMIN \
         and CAP_NET_RAW)"
    )]
    Program {
        /// What the loader said.
        reason: String,
    },
    /// The interface already has an XDP program (another tool's or process's).
    #[error(
        "{ifname} already has an XDP program: remove it first (`ip link show dev {ifname}` \
         shows it; `ip link set dev {ifname} xdp off` removes one not held by a process)"
    )]
    ProgramPresent {
        /// The interface.
        ifname: String,
    },
    /// The program could not be attached in the mode asked for.
    #[error("attaching XDP to {ifname} in {mode} mode failed: {reason}{hint}")]
    Attach {
        /// The interface.
        ifname: String,
        /// `native` or `generic`.
        mode: &'static str,
        /// What the kernel said.
        reason: String,
        /// What to try instead.
        hint: &'static str,
    },
    /// A step of setting up the XDP socket failed.
    #[error("{what} for {ifname} failed: {source}{hint}")]
    Socket {
        /// The step (`socket(AF_XDP)`, `XDP_UMEM_REG`, `bind`, ...).
        what: &'static str,
        /// The interface.
        ifname: String,
        /// The system's error.
        #[source]
        source: io::Error,
        /// What to try.
        hint: &'static str,
    },
}

impl XdpError {
    pub(crate) fn socket(what: &'static str, ifname: &str, source: io::Error) -> XdpError {
        let hint = match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                " (AF_XDP sockets need root, or CAP_NET_RAW and CAP_IPC_LOCK)"
            }
            Some(libc::ENOMEM) => {
                " (the UMEM is locked memory: raise `ulimit -l` or use fewer frames)"
            }
            Some(libc::EBUSY) => " (another AF_XDP socket serves that queue)",
            Some(libc::EAFNOSUPPORT) => " (the kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
            _ => "",
        };
        XdpError::Socket {
            what,
            ifname: ifname.to_string(),
            source,
            hint,
        }
    }
}
