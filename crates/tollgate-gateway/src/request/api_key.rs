//! The API key of a request: `Authorization: Bearer <key>` (scheme in any
//! case) or `X-API-Key: <key>`.

use http::header::{AUTHORIZATION, HeaderName};
use http::{HeaderMap, HeaderValue};
use tollgate_core::ApiKey;

/// The `X-API-Key` header. A `HeaderName`, not a `&str`: a map looks a name
/// up directly, where a `&str` is parsed into one on every lookup.
pub(crate) const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// The longest API key accepted, in bytes: keys are kept in memory (and in
/// Redis names, hashed), so their length is bounded.
pub(crate) const MAX_KEY_LENGTH: usize = 256;

/// Why a request has no API key to limit it by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No usable key (401): the detail says what is missing or wrong.
    Missing(&'static str),
    /// More than one credential, naming different keys or the same header
    /// twice (400): a backend reading another line than the gateway would
    /// serve a key that was never charged, so such a request is refused
    /// before any budget is used.
    Ambiguous(&'static str),
}

/// The request's API key, or why it has none (for the 401's or 400's
/// detail).
///
/// The key comes from `Authorization: Bearer <key>` or `X-API-Key: <key>`,
/// each sent once. When both are sent, `Authorization` decides, and
/// `X-API-Key` must carry the same key.
pub(crate) fn api_key(headers: &HeaderMap) -> Result<&str, KeyError> {
    // Each header looked up once (a lookup hashes its name: `X-API-Key`'s
    // byte by byte), its first two lines read from there.
    let mut authorizations = headers.get_all(AUTHORIZATION).iter();
    let authorization = authorizations.next();
    if authorizations.next().is_some() {
        return Err(KeyError::Ambiguous(
            "the request carries two Authorization headers",
        ));
    }
    let mut x_api_keys = headers.get_all(&X_API_KEY).iter();
    let x_api_key = x_api_keys.next();
    if x_api_keys.next().is_some() {
        return Err(KeyError::Ambiguous(
            "the request carries two X-API-Key headers",
        ));
    }
    let key = read_key(authorization, x_api_key).map_err(KeyError::Missing)?;
    if key.len() > MAX_KEY_LENGTH {
        return Err(KeyError::Missing("the API key is longer than 256 bytes"));
    }
    if authorization.is_some()
        && let Some(other) = x_api_key
    {
        let other = other.to_str().ok().and_then(ApiKey::parse);
        if other.is_none_or(|other| other.as_str() != key) {
            return Err(KeyError::Ambiguous(
                "Authorization and X-API-Key carry different keys: send one",
            ));
        }
    }
    Ok(key)
}

/// The key of the request's `Authorization` line when it has one, else of
/// its `X-API-Key` line; or what is wrong with the one read.
fn read_key<'a>(
    authorization: Option<&'a HeaderValue>,
    x_api_key: Option<&'a HeaderValue>,
) -> Result<&'a str, &'static str> {
    if let Some(value) = authorization {
        let text = value
            .to_str()
            .map_err(|_| "the Authorization header is not text")?;
        let scheme = text.split_whitespace().next().unwrap_or_default();
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err("the Authorization scheme must be Bearer");
        }
        return ApiKey::parse(text)
            .map(|key| key.as_str())
            .ok_or("the bearer token is empty");
    }
    match x_api_key {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(ApiKey::parse)
            .map(|key| key.as_str())
            .ok_or("the X-API-Key header is empty or not text"),
        None => Err("no API key: send Authorization: Bearer <key> or X-API-Key: <key>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &'static str, value: &str) -> Result<String, KeyError> {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        api_key(&headers).map(str::to_owned)
    }

    #[test]
    fn reads_bearer_in_any_case_and_x_api_key() {
        assert_eq!(key("authorization", "Bearer sk_a").as_deref(), Ok("sk_a"));
        assert_eq!(
            key("authorization", "bEaReR   sk_b ").as_deref(),
            Ok("sk_b")
        );
        assert_eq!(key("x-api-key", " sk_c ").as_deref(), Ok("sk_c"));
        assert!(key("authorization", "Basic dXNlcjpwYXNz").is_err());
        assert!(key("authorization", "Bearer").is_err());
        assert!(key("authorization", "Bearersk_a").is_err());
        assert!(key("authorization", "").is_err());
        assert!(key("x-api-key", "  ").is_err());
        assert!(api_key(&HeaderMap::new()).is_err());
        assert!(key("x-api-key", &"k".repeat(256)).is_ok());
        assert!(key("x-api-key", &"k".repeat(257)).is_err());
    }

    #[test]
    fn two_credentials_are_ambiguous_unless_they_name_one_key() {
        let headers = |lines: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in lines {
                headers.append(*name, HeaderValue::from_static(value));
            }
            headers
        };
        let two_bearers = headers(&[
            ("authorization", "Bearer sk_a"),
            ("authorization", "Bearer sk_b"),
        ]);
        assert_eq!(
            api_key(&two_bearers),
            Err(KeyError::Ambiguous(
                "the request carries two Authorization headers"
            ))
        );
        let two_keys = headers(&[("x-api-key", "sk_a"), ("x-api-key", "sk_a")]);
        assert_eq!(
            api_key(&two_keys),
            Err(KeyError::Ambiguous(
                "the request carries two X-API-Key headers"
            ))
        );
        let different = headers(&[("authorization", "Bearer sk_a"), ("x-api-key", "sk_b")]);
        assert_eq!(
            api_key(&different),
            Err(KeyError::Ambiguous(
                "Authorization and X-API-Key carry different keys: send one"
            ))
        );
        let same = headers(&[("authorization", "Bearer sk_a"), ("x-api-key", " sk_a ")]);
        assert_eq!(api_key(&same), Ok("sk_a"));
    }
}
