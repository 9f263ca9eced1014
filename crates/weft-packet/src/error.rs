//! The one error type every packet view returns.

use thiserror::Error;

/// Why a frame (or one of its headers) could not be parsed.
///
/// Every view's `new_checked` returns one of these instead of panicking; the switch
/// counts drops by the variant, so variants name *what* is wrong, not where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum ParseError {
    /// The buffer ends before the header (or the length the header claims) does.
    #[error("truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes the buffer holds.
        available: usize,
    },
    /// A length field is inconsistent (smaller than the fixed header, larger than the buffer...).
    #[error("bad length field")]
    BadLength,
    /// The IP version nibble does not match the view.
    #[error("bad IP version")]
    BadVersion,
    /// IPv4 header length below 5 words, or past the total length.
    #[error("bad IPv4 header length (IHL)")]
    BadIhl,
    /// An IPv6 extension-header chain that is too long or malformed.
    #[error("bad IPv6 extension header chain")]
    BadExtensionHeader,
    /// A field holds a value the protocol forbids (reserved bits set, bad flags, ...).
    #[error("malformed header field")]
    Malformed,
    /// The frame uses a feature this view does not support.
    #[error("unsupported")]
    Unsupported,
}

impl ParseError {
    /// Shorthand for [`ParseError::Truncated`].
    pub const fn truncated(needed: usize, available: usize) -> Self {
        ParseError::Truncated { needed, available }
    }
}

/// Result type used by the views.
pub type Result<T> = core::result::Result<T, ParseError>;
