//! The hop-by-hop header fields (RFC 9110 section 7.6.1): the one list of
//! them, and their removal from a message a proxy passes on. (A WebSocket
//! upgrade puts back its own two, `Connection: upgrade` and `Upgrade`: see
//! `upgrade.rs`.)

use http::HeaderMap;
use http::header::{CONNECTION, HeaderName};

/// The headers that describe one connection and are never forwarded, besides
/// those `Connection` names (RFC 9110 section 7.6.1; `Keep-Alive`,
/// `Proxy-Connection` from older practice). `Transfer-Encoding` is not among
/// them: hyper reads it to frame each body and writes it again for the next
/// connection (dropping it where HTTP/1.0, HTTP/2, `HEAD`, 204 or 304 have no
/// such framing), so an HTTP/1.1 peer gets codings other than `chunked` too.
pub(crate) const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// [`HOP_BY_HOP`] as header names, in the same order: a map removes a name
/// directly, where a `&str` is parsed into one first.
static HOP_BY_HOP_NAMES: [HeaderName; 8] = [
    HeaderName::from_static("connection"),
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("proxy-authenticate"),
    HeaderName::from_static("proxy-authorization"),
    HeaderName::from_static("te"),
    HeaderName::from_static("trailer"),
    HeaderName::from_static("upgrade"),
];

// One bit per name in `remove_hop_by_hop`.
const _: () = assert!(HOP_BY_HOP.len() <= 32);

/// Where `name` (lowercase) stands in [`HOP_BY_HOP`], if it is there.
fn hop_by_hop_index(name: &str) -> Option<usize> {
    HOP_BY_HOP.iter().position(|hop| *hop == name)
}

/// Whether `name` (lowercase) is one of [`HOP_BY_HOP`].
pub(crate) fn is_hop_by_hop(name: &str) -> bool {
    hop_by_hop_index(name).is_some()
}

/// Removes the hop-by-hop headers, including those `Connection` names.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the names, noting which of HOP_BY_HOP are present (bit i
    // for HOP_BY_HOP[i]): usually none, or `Connection` alone.
    let mut present = 0u32;
    for name in headers.keys() {
        if let Some(index) = hop_by_hop_index(name.as_str()) {
            present |= 1 << index;
        }
    }
    if present == 0 {
        return;
    }
    // Names `Connection` lists besides the hop-by-hop ones and its `close`
    // and `keep-alive` options: usually none, so nothing is allocated.
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter(|value| !is_plain_connection_option(value.as_bytes()))
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|token| !is_plain_connection_option(token.as_bytes()))
        .filter_map(|token| HeaderName::from_bytes(token.as_bytes()).ok())
        .filter(|name| hop_by_hop_index(name.as_str()).is_none())
        .collect();
    for name in &named {
        headers.remove(name);
    }
    for (index, name) in HOP_BY_HOP_NAMES.iter().enumerate() {
        if present & (1 << index) != 0 {
            headers.remove(name);
        }
    }
}

/// Whether a `Connection` value (or one of its options) is `close` or
/// `keep-alive` alone, in any case: the usual values, naming no header.
fn is_plain_connection_option(option: &[u8]) -> bool {
    option.eq_ignore_ascii_case(b"keep-alive") || option.eq_ignore_ascii_case(b"close")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_names_are_the_list() {
        let names: Vec<&str> = super::HOP_BY_HOP_NAMES
            .iter()
            .map(http::HeaderName::as_str)
            .collect();
        assert_eq!(names, super::HOP_BY_HOP);
    }

    use super::*;
    use http::HeaderValue;

    #[test]
    fn hop_by_hop_headers_and_those_named_in_connection_go() {
        let mut headers = HeaderMap::new();
        headers.insert("connection", HeaderValue::from_static("close, x-secret"));
        headers.insert("x-secret", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        headers.insert("content-type", HeaderValue::from_static("text/plain"));
        remove_hop_by_hop(&mut headers);
        let names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type"]);
    }

    #[test]
    fn names_in_every_connection_line_go_whatever_their_case() {
        let mut headers = HeaderMap::new();
        headers.append("connection", HeaderValue::from_static("keep-alive"));
        headers.append("connection", HeaderValue::from_static("X-A"));
        headers.append("connection", HeaderValue::from_static("Keep-Alive, x-b"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-a", HeaderValue::from_static("1"));
        headers.insert("x-b", HeaderValue::from_static("2"));
        headers.insert(
            "transfer-encoding",
            HeaderValue::from_static("gzip, chunked"),
        );
        headers.insert("x-kept", HeaderValue::from_static("3"));
        remove_hop_by_hop(&mut headers);
        let names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["transfer-encoding", "x-kept"]);
        // Nothing hop-by-hop: nothing changes.
        let mut plain = HeaderMap::new();
        plain.insert("content-length", HeaderValue::from_static("3"));
        remove_hop_by_hop(&mut plain);
        assert_eq!(plain.len(), 1);
    }
}
