//! The one layout of the limits: a `[limits]` table, in the file of
//! `tollgate serve` and in the file of `tollgate run --config` alike (the
//! layout the gateway's users already write). The old layout of
//! `tollgate run --config`, the same settings at the top level of the file, is
//! still read: each such setting is moved into `[limits]` before the file is
//! read, and named in a warning.

use std::borrow::Cow;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The settings of `[limits]`, which the old layout wrote at the top level.
const LIMITS_SETTINGS: [&str; 5] = [
    "default_policy",
    "tiers",
    "exempt_keys",
    "idle_eviction_s",
    "max_tracked_keys",
];

/// Moves every setting of `[limits]` written at the top level of `document`
/// into its `[limits]` table (made when there is none), and returns their
/// names, in the order of [`LIMITS_SETTINGS`]. Each value keeps its place in
/// the file, so an error in it still names its line.
///
/// # Errors
///
/// A setting written in both places, named: neither is read as the other.
pub(super) fn move_old_limits(document: &mut DeTable<'_>) -> Result<Vec<&'static str>, String> {
    let mut moved = Vec::new();
    for name in LIMITS_SETTINGS {
        let Some((key, value)) = document.remove_entry(name) else {
            continue;
        };
        let limits = document
            .entry(Spanned::new(key.span(), Cow::Borrowed("limits")))
            .or_insert_with(|| Spanned::new(key.span(), DeValue::Table(DeTable::new())));
        let DeValue::Table(limits) = limits.get_mut() else {
            // `limits` is not a table: leave the setting where it was, and
            // the file's error is about `limits`.
            document.insert(key, value);
            continue;
        };
        if limits.contains_key(name) {
            return Err(format!(
                "`{name}` is written twice: at the top level (the old layout of `tollgate run \
                 --config`) and as `limits.{name}`; keep `limits.{name}`"
            ));
        }
        limits.insert(key, value);
        moved.push(name);
    }
    Ok(moved)
}

/// The warning for a setting read from the old layout.
pub(super) fn old_layout_warning(name: &str) -> String {
    format!(
        "`{name}` at the top level is the old layout of `tollgate run --config`, read as \
         `limits.{name}`: move it into the `[limits]` table"
    )
}

#[cfg(test)]
mod tests {
    use super::super::ServeConfig;
    use tollgate_core::Policy;

    /// The same limits in the one layout and in the old one.
    const LIMITS: &str = "idle_eviction_s = 60\nmax_tracked_keys = 10\nexempt_keys = [\"sk_ops\"]\n\
        [default_policy]\nalgorithm = \"token_bucket\"\nlimit = 7\nwindow_s = 60\n\
        [tiers.gold]\nalgorithm = \"sliding_log\"\nlimit = 100\nwindow_s = 1\n";

    fn check_limits(config: &ServeConfig) {
        assert_eq!(config.limits.idle_eviction_s, 60);
        assert_eq!(config.limits.max_tracked_keys, 10);
        assert_eq!(config.limits.exempt_keys, ["sk_ops"]);
        assert_eq!(
            config.limits.default_policy,
            Policy::token_bucket(7, 60, 7).unwrap()
        );
        assert_eq!(
            config.limits.tiers["gold"],
            Policy::sliding_log(100, 1).unwrap()
        );
    }

    #[test]
    fn the_limits_table_is_read_without_a_warning() {
        let text = format!(
            "listen = \"127.0.0.1:9000\"\n{}",
            LIMITS
                .replace("idle_eviction_s", "[limits]\nidle_eviction_s")
                .replace("[default_policy]", "[limits.default_policy]")
                .replace("[tiers.gold]", "[limits.tiers.gold]")
        );
        let config = ServeConfig::from_toml_str(&text).unwrap();
        check_limits(&config);
        assert!(config.layout_warnings().is_empty());
    }

    #[test]
    fn the_old_layout_is_read_into_limits_with_a_warning_for_each_setting() {
        let config = ServeConfig::from_toml_str(LIMITS).unwrap();
        check_limits(&config);
        let warning = |name: &str| {
            format!(
                "`{name}` at the top level is the old layout of `tollgate run --config`, read \
                 as `limits.{name}`: move it into the `[limits]` table"
            )
        };
        let expected = [
            "default_policy",
            "tiers",
            "exempt_keys",
            "idle_eviction_s",
            "max_tracked_keys",
        ]
        .map(warning);
        assert_eq!(config.layout_warnings(), expected);
        // Logged at start and on reload, with the other warnings.
        assert_eq!(config.warnings(), expected);
    }

    #[test]
    fn the_two_layouts_mix_but_a_setting_is_written_once() {
        let config =
            ServeConfig::from_toml_str("idle_eviction_s = 60\n[limits]\nmax_tracked_keys = 10\n")
                .unwrap();
        assert_eq!(config.limits.idle_eviction_s, 60);
        assert_eq!(config.limits.max_tracked_keys, 10);
        assert_eq!(config.layout_warnings().len(), 1);
        let error =
            ServeConfig::from_toml_str("idle_eviction_s = 60\n[limits]\nidle_eviction_s = 61\n")
                .unwrap_err()
                .to_string();
        assert_eq!(
            error,
            "invalid configuration: `idle_eviction_s` is written twice: at the top level (the \
             old layout of `tollgate run --config`) and as `limits.idle_eviction_s`; keep \
             `limits.idle_eviction_s`"
        );
    }

    #[test]
    fn an_error_in_the_old_layout_names_its_line_and_its_setting() {
        let error = ServeConfig::from_toml_str(
            "# old layout\n[default_policy]\nalgorithm = \"fixed_window\"\nlimit = \"5\"\nwindow_s = 60\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            error,
            "invalid configuration: line 4, column 9 (`limits.default_policy.limit`): invalid \
             type: string, expected a whole number (numbers are written without quotes)"
        );
        // A `limits` that is not a table is the error, and nothing is moved.
        let error = ServeConfig::from_toml_str("limits = 3\nidle_eviction_s = 60\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("`limits`"), "{error}");
    }
}
