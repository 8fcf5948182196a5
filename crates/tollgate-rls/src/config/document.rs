//! One configuration file as written, before any rule is checked: the shape of
//! envoyproxy/ratelimit's `YamlRoot`, `YamlDescriptor`, `YamlRateLimit` and
//! `yamlReplaces` (config_impl.go), plus tollgate's opt-in `algorithm`, `burst`
//! and `window` inside `rate_limit`, decoded with yaml.v2's rules.

use crate::config::yaml::decode::Decoder;
use crate::config::yaml::go_value::GoValue;
use crate::config::yaml::node::Node;

/// A file: `domain` and its top-level `descriptors`.
#[derive(Clone, Debug, Default)]
pub(crate) struct YamlRoot {
    pub(crate) domain: String,
    pub(crate) descriptors: Vec<YamlDescriptor>,
}

/// One `descriptors` entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct YamlDescriptor {
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) rate_limit: Option<YamlRateLimit>,
    pub(crate) descriptors: Vec<YamlDescriptor>,
    pub(crate) shadow_mode: bool,
    pub(crate) quota_mode: bool,
    pub(crate) detailed_metric: bool,
    pub(crate) value_to_metric: bool,
    pub(crate) share_threshold: bool,
    pub(crate) metadata: Option<Vec<(String, GoValue)>>,
}

/// A `rate_limit` block.
#[derive(Clone, Debug, Default)]
pub(crate) struct YamlRateLimit {
    pub(crate) requests_per_unit: u64,
    pub(crate) unit: String,
    pub(crate) unlimited: bool,
    pub(crate) name: String,
    pub(crate) replaces: Vec<String>,
    /// Extension: `fixed_window` (the default), `sliding_log` or `token_bucket`.
    pub(crate) algorithm: String,
    /// Extension: the token bucket's capacity.
    pub(crate) burst: Option<u64>,
    /// Extension: a window of any length (`30s`, `5m`) instead of `unit`.
    pub(crate) window: String,
    /// Extension: a calendar window (`day`, `week`, `month`, `year`) instead
    /// of `unit`.
    pub(crate) calendar: String,
    /// Extension: the calendar window's IANA time zone (default UTC).
    pub(crate) time_zone: String,
    /// Extension: a calendar week's first day (default Monday).
    pub(crate) week_starts: String,
    /// Extension: hits charged whatever is left, into a debt of at most
    /// this many units (usage reported when a stream is done).
    pub(crate) overdraft: Option<u64>,
}

/// Decodes a file's document (`None`: an empty file).
///
/// # Errors
///
/// yaml.v2's `yaml: unmarshal errors:\n  line N: cannot unmarshal ...`.
pub(crate) fn decode_root(node: Option<&Node>, extensions: bool) -> Result<YamlRoot, String> {
    let mut root = YamlRoot::default();
    let mut decoder = Decoder::default();
    if let Some(node) = node {
        decoder.structure(
            node,
            &mut root,
            "config.YamlRoot",
            |d, name, value, root| match name {
                "domain" => {
                    d.string(value, &mut root.domain);
                }
                "descriptors" => {
                    descriptors(d, value, &mut root.descriptors, extensions);
                }
                _ => {}
            },
        );
    }
    decoder.finish().map(|()| root)
}

fn descriptors(d: &mut Decoder, node: &Node, out: &mut Vec<YamlDescriptor>, extensions: bool) {
    d.slice(
        node,
        out,
        "[]config.YamlDescriptor",
        |d, item, descriptor| {
            d.structure(
                item,
                descriptor,
                "config.YamlDescriptor",
                |d, name, value, out| {
                    descriptor_field(d, name, value, out, extensions);
                },
            )
        },
    );
}

fn descriptor_field(
    d: &mut Decoder,
    name: &str,
    value: &Node,
    out: &mut YamlDescriptor,
    extensions: bool,
) {
    match name {
        "key" => {
            d.string(value, &mut out.key);
        }
        "value" => {
            d.string(value, &mut out.value);
        }
        "rate_limit" => {
            d.pointer(
                value,
                &mut out.rate_limit,
                "config.YamlRateLimit",
                |d, name, value, out| {
                    rate_limit_field(d, name, value, out, extensions);
                },
            );
        }
        "descriptors" => descriptors(d, value, &mut out.descriptors, extensions),
        "shadow_mode" => {
            d.bool(value, &mut out.shadow_mode);
        }
        "quota_mode" => {
            d.bool(value, &mut out.quota_mode);
        }
        "detailed_metric" => {
            d.bool(value, &mut out.detailed_metric);
        }
        "value_to_metric" => {
            d.bool(value, &mut out.value_to_metric);
        }
        "share_threshold" => {
            d.bool(value, &mut out.share_threshold);
        }
        "metadata" => {
            d.string_map(value, &mut out.metadata, "map[string]interface {}");
        }
        _ => {}
    }
}

fn rate_limit_field(
    d: &mut Decoder,
    name: &str,
    value: &Node,
    out: &mut YamlRateLimit,
    extensions: bool,
) {
    match name {
        "requests_per_unit" => {
            d.uint(
                value,
                u64::from(u32::MAX),
                "uint32",
                &mut out.requests_per_unit,
            );
        }
        "unit" => {
            d.string(value, &mut out.unit);
        }
        "unlimited" => {
            d.bool(value, &mut out.unlimited);
        }
        "name" => {
            d.string(value, &mut out.name);
        }
        "replaces" => {
            d.slice(
                value,
                &mut out.replaces,
                "[]config.yamlReplaces",
                |d, item, name| {
                    let mut replaces = String::new();
                    let good = d.structure(
                        item,
                        &mut replaces,
                        "config.yamlReplaces",
                        |d, field, value, out| {
                            if field == "name" {
                                d.string(value, out);
                            }
                        },
                    );
                    *name = replaces;
                    good
                },
            );
        }
        "algorithm" if extensions => {
            d.string(value, &mut out.algorithm);
        }
        "window" if extensions => {
            d.string(value, &mut out.window);
        }
        "calendar" if extensions => {
            d.string(value, &mut out.calendar);
        }
        "time_zone" if extensions => {
            d.string(value, &mut out.time_zone);
        }
        "week_starts" if extensions => {
            d.string(value, &mut out.week_starts);
        }
        "overdraft" if extensions => d.optional_uint64(value, &mut out.overdraft),
        "burst" if extensions => d.optional_uint64(value, &mut out.burst),
        _ => {}
    }
}
