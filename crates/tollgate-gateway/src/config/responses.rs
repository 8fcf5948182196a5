//! `[responses]`: which rate-limit headers a response carries. Every
//! admitted or refused response of a key that is not exempt carries the IETF
//! draft's `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers)
//! and the `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`
//! that clients read today; `rate_limit_headers` keeps one family or none.
//! A refusal's `Retry-After` (RFC 6585, RFC 9110 section 10.2.3) and its
//! problem+json body are sent whatever this says.

use serde::Deserialize;

/// Which rate-limit headers responses carry. Read from a string only (not
/// TOML's table form of an enum); an error names the values allowed, never
/// the one written.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(try_from = "String")]
pub enum RateLimitHeaderSet {
    /// `RateLimit-Policy`, `RateLimit` and the three `X-RateLimit-*` (the
    /// default): the draft's fields for clients that follow the standard,
    /// the `X-` ones for the many that read only those.
    #[default]
    All,
    /// `RateLimit-Policy` and `RateLimit` only.
    Ietf,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`
    /// only.
    XRateLimit,
    /// None of them (as nginx `limit_req` and envoyproxy/ratelimit answer
    /// by default).
    None,
}

impl RateLimitHeaderSet {
    /// Whether `RateLimit-Policy` and `RateLimit` are sent.
    pub(crate) fn ietf(self) -> bool {
        matches!(self, RateLimitHeaderSet::All | RateLimitHeaderSet::Ietf)
    }

    /// Whether the three `X-RateLimit-*` headers are sent.
    pub(crate) fn x_ratelimit(self) -> bool {
        matches!(
            self,
            RateLimitHeaderSet::All | RateLimitHeaderSet::XRateLimit
        )
    }

    /// The setting's value as written in the file.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RateLimitHeaderSet::All => "all",
            RateLimitHeaderSet::Ietf => "ietf",
            RateLimitHeaderSet::XRateLimit => "x-ratelimit",
            RateLimitHeaderSet::None => "none",
        }
    }
}

impl TryFrom<String> for RateLimitHeaderSet {
    type Error = &'static str;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        match text.as_str() {
            "all" => Ok(RateLimitHeaderSet::All),
            "ietf" => Ok(RateLimitHeaderSet::Ietf),
            "x-ratelimit" => Ok(RateLimitHeaderSet::XRateLimit),
            "none" => Ok(RateLimitHeaderSet::None),
            _ => Err("must be \"all\", \"ietf\", \"x-ratelimit\" or \"none\""),
        }
    }
}

/// The `[responses]` section.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ResponsesConfig {
    /// Which rate-limit headers are sent: `"all"` (the default), `"ietf"`,
    /// `"x-ratelimit"` or `"none"`.
    #[serde(default)]
    pub rate_limit_headers: RateLimitHeaderSet,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<ResponsesConfig, String> {
        toml::from_str(text).map_err(|error| error.message().to_owned())
    }

    #[test]
    fn each_value_reads_as_its_set() {
        assert_eq!(
            read("").unwrap().rate_limit_headers,
            RateLimitHeaderSet::All
        );
        for (text, set, ietf, x_ratelimit) in [
            ("all", RateLimitHeaderSet::All, true, true),
            ("ietf", RateLimitHeaderSet::Ietf, true, false),
            ("x-ratelimit", RateLimitHeaderSet::XRateLimit, false, true),
            ("none", RateLimitHeaderSet::None, false, false),
        ] {
            let read = read(&format!("rate_limit_headers = \"{text}\"")).unwrap();
            assert_eq!(read.rate_limit_headers, set);
            assert_eq!(
                (set.ietf(), set.x_ratelimit()),
                (ietf, x_ratelimit),
                "{text}"
            );
            assert_eq!(set.as_str(), text);
        }
    }

    #[test]
    fn another_value_is_refused_without_quoting_it() {
        let allowed = "must be \"all\", \"ietf\", \"x-ratelimit\" or \"none\"";
        for written in ["\"draft\"", "\"ALL\"", "{ ietf = {} }", "{ all = {} }"] {
            let error = read(&format!("rate_limit_headers = {written}")).unwrap_err();
            assert!(
                error.contains(allowed) || error.contains("expected a string"),
                "{written}: {error}"
            );
            assert!(
                !error.contains("draft") && !error.contains("ALL"),
                "{error}"
            );
        }
        assert!(read("rate_limit_headers = true").is_err());
        assert!(read("headers = \"all\"").is_err());
    }
}
