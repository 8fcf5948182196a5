//! Request paths in one normal form, so that a route cannot be dodged with a
//! path the upstream reads differently: percent-encoded unreserved characters
//! decoded, `.` and `..` segments resolved, `//` collapsed (RFC 3986 sections
//! 6.2.2 and 5.2.4). Paths that cannot be made unambiguous are refused.

use std::borrow::Cow;

/// `path` in normal form, or why it is refused (an encoded `/`, `\` or NUL, a
/// `\`, a `..` above the root, a broken `%` escape).
pub(crate) fn normalize(path: &str) -> Result<Cow<'_, str>, &'static str> {
    if !path.contains(['%', '\\']) && !path.contains("//") && !path.contains("/.") {
        return Ok(Cow::Borrowed(path));
    }
    if path.contains('\\') {
        return Err("the path contains a backslash");
    }
    let decoded = decode_unreserved(path)?;
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/').skip(1) {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err("the path goes above the root");
                }
            }
            segment => segments.push(segment),
        }
    }
    let mut normal = String::with_capacity(decoded.len());
    for segment in &segments {
        normal.push('/');
        normal.push_str(segment);
    }
    let ends_in_directory =
        decoded.ends_with('/') || decoded.ends_with("/.") || decoded.ends_with("/..");
    if normal.is_empty() || ends_in_directory {
        normal.push('/');
    }
    Ok(Cow::Owned(normal))
}

/// Decodes `%XX` of unreserved characters (letters, digits, `-._~`); keeps the
/// others encoded, upper-cased; refuses an encoded `/`, `\` or NUL.
fn decode_unreserved(path: &str) -> Result<String, &'static str> {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'%' {
            let next = path[index..]
                .find('%')
                .map_or(bytes.len(), |offset| index + offset);
            out.push_str(&path[index..next]);
            index = next;
            continue;
        }
        let hex = path
            .get(index + 1..index + 3)
            .ok_or("the path has a broken % escape")?;
        let byte = u8::from_str_radix(hex, 16).map_err(|_| "the path has a broken % escape")?;
        match byte {
            b'/' | b'\\' | 0 => return Err("the path encodes a separator or NUL"),
            byte if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) => {
                out.push(char::from(byte));
            }
            _ => {
                out.push('%');
                out.push_str(&hex.to_ascii_uppercase());
            }
        }
        index += 3;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equivalent_spellings_become_one_path() {
        for (path, normal) in [
            ("/api/search", "/api/search"),
            ("/api/x/../search", "/api/search"),
            ("/api/%73earch", "/api/search"),
            ("/api//search", "/api/search"),
            ("/api/./search/", "/api/search/"),
            ("/api/search/..", "/api/"),
            ("/%7Euser/a%2cb", "/~user/a%2Cb"),
            ("//", "/"),
        ] {
            assert_eq!(normalize(path).as_deref(), Ok(normal), "{path}");
        }
    }

    #[test]
    fn ambiguous_paths_are_refused() {
        for path in [
            "/api/..%2F..",
            "/a%2fb",
            "/a%5cb",
            "/a\\b",
            "/..",
            "/a/../..",
            "/a%zz",
            "/a%4",
            "/a%00",
        ] {
            assert!(normalize(path).is_err(), "{path}");
        }
    }
}
