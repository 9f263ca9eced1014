//! Why the directory refused an entry, and the errors of its client.

/// Why an entry read from the store was ignored. Counted per reason in
/// [`crate::Refusals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The key is not one of the schema's shapes.
    MalformedKey,
    /// The VNI does not fit in 24 bits.
    WrongVni,
    /// The MAC of a key is a group address or zero.
    NotUnicast,
    /// The value is not the JSON the key's kind needs.
    MalformedValue,
    /// The value is longer than the directory reads.
    ValueTooLarge,
    /// The directory holds as many entries as it is allowed to.
    OverCapacity,
}

impl Refusal {
    /// Every reason, in the order of [`Refusal::index`].
    pub const ALL: [Refusal; 6] = [
        Refusal::MalformedKey,
        Refusal::WrongVni,
        Refusal::NotUnicast,
        Refusal::MalformedValue,
        Refusal::ValueTooLarge,
        Refusal::OverCapacity,
    ];

    /// A dense index for counting.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The name shown by `weft directory status` and the metrics.
    pub const fn name(self) -> &'static str {
        match self {
            Refusal::MalformedKey => "malformed_key",
            Refusal::WrongVni => "wrong_vni",
            Refusal::NotUnicast => "not_unicast",
            Refusal::MalformedValue => "malformed_value",
            Refusal::ValueTooLarge => "value_too_large",
            Refusal::OverCapacity => "over_capacity",
        }
    }
}

/// Entries refused, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals([u64; Refusal::ALL.len()]);

impl Refusals {
    /// Counts one.
    pub fn count(&mut self, why: Refusal) {
        self.0[why.index()] += 1;
    }

    /// How many for `why`.
    pub fn get(&self, why: Refusal) -> u64 {
        self.0[why.index()]
    }

    /// Every reason with its count.
    pub fn iter(&self) -> impl Iterator<Item = (Refusal, u64)> + '_ {
        Refusal::ALL.iter().map(|r| (*r, self.0[r.index()]))
    }
}

/// Why the directory client could not start or lost its session.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// A TLS file could not be read.
    #[error("reading {what} {path}: {source}")]
    TlsFile {
        /// Which file.
        what: &'static str,
        /// Where.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The settings do not make sense.
    #[error("{0}")]
    Config(String),
    /// The client's thread or runtime could not start.
    #[error("starting the directory client: {0}")]
    Runtime(#[source] std::io::Error),
    /// The store refused or failed a request.
    #[cfg(feature = "client")]
    #[error("{0}")]
    Store(#[from] etcd_client::Error),
    /// The store did not answer in time.
    #[error("the store did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The lease expired: this host's entries are gone from the store.
    #[error("the lease expired")]
    LeaseExpired,
    /// The store closed a stream.
    #[error("the store closed the {0} stream")]
    StreamClosed(&'static str),
}
