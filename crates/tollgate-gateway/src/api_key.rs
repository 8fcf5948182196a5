//! The API key of a request: `Authorization: Bearer <key>` (scheme in any
//! case) or `X-API-Key: <key>`.

use http::HeaderMap;
use http::header::AUTHORIZATION;
use tollgate_core::ApiKey;

/// The `X-API-Key` header.
pub(crate) const X_API_KEY: &str = "x-api-key";

/// The longest API key accepted, in bytes: keys are kept in memory (and in
/// Redis names, hashed), so their length is bounded.
pub(crate) const MAX_KEY_LENGTH: usize = 256;

/// The request's API key, or why it has none (for the 401's detail).
pub(crate) fn api_key(headers: &HeaderMap) -> Result<&str, &'static str> {
    let key = read_key(headers)?;
    if key.len() > MAX_KEY_LENGTH {
        return Err("the API key is longer than 256 bytes");
    }
    Ok(key)
}

fn read_key(headers: &HeaderMap) -> Result<&str, &'static str> {
    if let Some(value) = headers.get(AUTHORIZATION) {
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
    match headers.get(X_API_KEY) {
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
    use http::HeaderValue;

    fn key(name: &'static str, value: &str) -> Result<String, &'static str> {
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
}
