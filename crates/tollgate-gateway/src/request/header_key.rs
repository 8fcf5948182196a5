//! A request header's value as the key of a limit (a route's
//! `key = "header:NAME"`, its `in_flight_key`).

use http::HeaderMap;

use crate::request::api_key::MAX_KEY_LENGTH;

/// The value of header `name` as a route key: the header sent once (a second
/// one, as from a client beside a proxy that appends, is refused rather than
/// either trusted), trimmed, 1 to [`MAX_KEY_LENGTH`] bytes of visible ASCII
/// (no spaces).
pub(crate) fn header_key<'a>(headers: &'a HeaderMap, name: &http::HeaderName) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim();
    let usable = (1..=MAX_KEY_LENGTH).contains(&value.len())
        && value.bytes().all(|byte| byte.is_ascii_graphic());
    usable.then_some(value)
}
