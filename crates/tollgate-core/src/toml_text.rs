//! Reading TOML settings with errors a person can act on, that never show
//! a value: [`parse_toml`], [`parse_toml_with`], [`describe_toml_error`].

/// Parses TOML `text` into a `T`. The error names the line and column, and
/// the setting by its path (`upstream.timeout`, `routes[0].prefix`), but never
/// a value: see [`describe_toml_error`].
///
/// # Errors
///
/// That description, when `text` is not TOML or not a `T`.
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    parse_toml_with(text, |_| Ok(())).map(|(value, ())| value)
}

/// [`parse_toml`], with `edit` given the parsed document before it becomes a
/// `T`: a caller can move a setting written in an older layout to its place
/// (values keep their place in `text`, so an error in a moved value still
/// names its line and column, and the setting by its new path). `edit`'s own
/// error is returned as it is, and so is what it returns otherwise.
///
/// # Errors
///
/// As [`parse_toml`], or `edit`'s.
pub fn parse_toml_with<T: serde::de::DeserializeOwned, E>(
    text: &str,
    edit: impl FnOnce(&mut toml::de::DeTable<'_>) -> Result<E, String>,
) -> Result<(T, E), String> {
    let mut document =
        toml::de::DeTable::parse(text).map_err(|error| describe_toml_error(text, &error))?;
    let edited = edit(document.get_mut())?;
    let value =
        serde_path_to_error::deserialize(toml::Deserializer::from(document)).map_err(|error| {
            let path = error.path().to_string();
            // `.` is the document itself, `?` a place serde could not name.
            let setting = (!matches!(path.as_str(), "" | "." | "?")).then_some(path.as_str());
            describe(text, error.inner(), setting)
        })?;
    Ok((value, edited))
}

/// A TOML error on one line: `line L, column C: message`. The text goes to
/// logs, so it never shows a value, which may be a secret (an admin token, an
/// API key, a password in a URL): not the line, and not the value serde's
/// `invalid type` / `invalid value` messages quote.
pub fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    describe(text, error, None)
}

/// [`describe_toml_error`], naming `setting` (a path such as
/// `upstream.timeout`) after the place when there is one.
fn describe(text: &str, error: &toml::de::Error, setting: Option<&str>) -> String {
    let mut message = with_ranges(&without_value(&error.message().trim().replace('\n', " ")));
    // A duplicate key is a setting's name (never a value): name it.
    if message == "duplicate key"
        && let Some(key) = error.span().and_then(|span| text.get(span))
    {
        message = format!("duplicate key `{}`", key.trim());
    }
    let Some(span) = error.span() else {
        return match setting {
            Some(setting) => format!("`{setting}`: {message}"),
            None => message,
        };
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |line| line.chars().count())
        + 1;
    match setting {
        Some(setting) => format!("line {line}, column {column} (`{setting}`): {message}"),
        None => format!("line {line}, column {column}: {message}"),
    }
}

/// `message` with serde's integer type names (`expected u64`) replaced by
/// words: a whole number, with the range of the small types (a setting's
/// own range, 1 to 2^32 say, is checked and told after it is read; 0 to
/// 2^64-1 would only mislead), and a hint that numbers are written
/// unquoted.
fn with_ranges(message: &str) -> String {
    let ranges = [
        ("expected u64", "expected a whole number"),
        ("expected usize", "expected a whole number"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u16", "expected a whole number from 0 to 65535"),
        ("expected u8", "expected a whole number from 0 to 255"),
    ];
    for (serde, range) in ranges {
        if let Some(start) = message.strip_suffix(serde) {
            let unquoted = if start.contains("string") {
                " (numbers are written without quotes)"
            } else {
                ""
            };
            return format!("{start}{range}{unquoted}");
        }
    }
    message.to_owned()
}

/// `message` without the value serde quotes in `invalid type: string "x",
/// expected ...` (and `invalid value: ...`): `invalid type: string, expected
/// ...`.
fn without_value(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            let kind = found.split_whitespace().next().unwrap_or("value");
            return format!("{prefix}{kind}, expected {expected}");
        }
    }
    message.to_owned()
}
