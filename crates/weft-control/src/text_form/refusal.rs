//! Which error a request that does not decode gets. The protocol has always answered a
//! request of the wrong shape (unknown op or field, wrong type) with `bad_request` and a
//! well-formed one whose address or MAC is not one with `invalid`; clients branch on that.
//! Now that those values are checked while decoding, a refused value is decoded again
//! leniently (a placeholder in its place) to tell the two apart: a request that is broken
//! besides is a bad request, whatever field serde happened to read first.

use std::cell::Cell;

thread_local! {
    /// During the second, lenient decode: refused values become placeholders.
    static LENIENT: Cell<bool> = const { Cell::new(false) };
    /// A value was refused during the current decode.
    static REFUSED: Cell<bool> = const { Cell::new(false) };
}

/// A parsed field, or its refusal with `message` (a placeholder in a lenient decode).
pub(super) fn parse_field<T, P, E: serde::de::Error>(
    parsed: Result<T, P>,
    placeholder: T,
    message: impl FnOnce(P) -> String,
) -> Result<T, E> {
    parsed.or_else(|e| {
        if LENIENT.get() {
            Ok(placeholder)
        } else {
            REFUSED.set(true);
            Err(E::custom(message(e)))
        }
    })
}

/// Runs `decode`; when it fails, says whether the request is of the right shape and only a
/// value in it was refused (`true`: answer `invalid` with the error; `false`: a bad request).
pub(crate) fn decode_shape_first<T, E>(decode: impl Fn() -> Result<T, E>) -> Result<T, (E, bool)> {
    REFUSED.set(false);
    let error = match decode() {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    if !REFUSED.replace(false) {
        return Err((error, false));
    }
    LENIENT.set(true);
    let shape = decode();
    LENIENT.set(false);
    match shape {
        Ok(_) => Err((error, true)),
        Err(broken) => Err((broken, false)),
    }
}
