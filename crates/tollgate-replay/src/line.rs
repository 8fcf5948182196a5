//! One request read from an access log, in whichever format
//! ([`LogLine`]), and the decision the log says it got ([`Logged`]).

/// One request of a log. Its `Debug` never shows the key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LogLine {
    /// When it arrived, in nanoseconds since the epoch.
    pub time: u64,
    /// Its route, when the log names it (tollgate's own).
    pub route: Option<String>,
    /// Its path, without the query.
    pub path: Option<String>,
    /// Its API key: a fingerprint (tollgate's log) or the key itself.
    pub key: Option<String>,
    /// The client's address.
    pub client: Option<String>,
    /// Its plan's tier, when the log names it (tollgate's own).
    pub tier: Option<String>,
    /// What the log says was decided (tollgate's own).
    pub logged: Option<Logged>,
}

impl std::fmt::Debug for LogLine {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LogLine")
            .field("time", &self.time)
            .field("route", &self.route)
            .field("path", &self.path)
            .field("key", &self.key.as_ref().map(|_| "(a key)"))
            .field("client", &self.client)
            .field("tier", &self.tier)
            .field("logged", &self.logged)
            .finish()
    }
}

/// A decision as tollgate's access log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logged {
    /// `allowed` or `delayed`: every limit let it through.
    Allowed,
    /// `refused` or `shadow_refused`: a limit refused it.
    Refused,
    /// `exempt`: no limit applied.
    Exempt,
    /// `none`, `in_flight_refused` or `unavailable`: no rate was decided
    /// (no route, no key, a slot refused first, the store down), so the
    /// request used no budget and is not replayed.
    Undecided,
}

impl Logged {
    /// The `decision` field's value read.
    pub fn of(decision: &str) -> Option<Logged> {
        match decision {
            "allowed" | "delayed" => Some(Logged::Allowed),
            "refused" | "shadow_refused" | "shadow" => Some(Logged::Refused),
            "exempt" => Some(Logged::Exempt),
            "none" | "in_flight_refused" | "unavailable" => Some(Logged::Undecided),
            _ => None,
        }
    }
}

/// The API key of an `Authorization` value or a plain field: `Bearer X`
/// gives `X`; `-` and empty give none.
pub(crate) fn key_of(value: &str) -> Option<String> {
    let value = value.trim();
    let key = match value.split_once(char::is_whitespace) {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => value,
    };
    (!key.is_empty() && key != "-").then(|| key.to_owned())
}
