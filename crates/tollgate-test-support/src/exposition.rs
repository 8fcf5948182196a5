//! The Prometheus text format of `/metrics` read into samples (a metric
//! name, its labels, its value), so that a test compares the one sample of
//! an exact label set, never a line's text (where `} 1` also starts `} 10`)
//! or labels in the order the exporter happens to write them.

use std::collections::BTreeMap;

/// One sample: `name{labels} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric's name.
    pub name: String,
    /// Its labels, by name.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// Every sample of one exposition.
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    /// The samples, in the order of the text.
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// Reads `text`; panics on a line that is not a sample, a comment or
    /// empty (the exporter under test wrote it wrong).
    pub fn parse(text: &str) -> Exposition {
        let samples = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| parse_sample(line).unwrap_or_else(|| panic!("not a sample: {line:?}")))
            .collect();
        Exposition { samples }
    }

    /// The value of the sample `name` whose labels are exactly `labels` (in
    /// any order); `None` when there is none.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let mut matching = self
            .samples
            .iter()
            .filter(|sample| sample.name == name && sample.labels == labels);
        let sample = matching.next()?;
        assert!(matching.next().is_none(), "{name} {labels:?} twice");
        Some(sample.value)
    }

    /// The names of every sample (a histogram's `_bucket`, `_sum` and
    /// `_count` each).
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.samples
            .iter()
            .map(|sample| sample.name.clone())
            .collect()
    }

    /// Whether any sample of `name` has the label `key` set to `value`.
    pub fn any_with(&self, name: &str, key: &str, value: &str) -> bool {
        self.samples.iter().any(|sample| {
            sample.name == name && sample.labels.get(key).map(String::as_str) == Some(value)
        })
    }
}

/// The samples of the Prometheus text `page` whose family lacks its
/// `# TYPE` or its `# HELP` line (a histogram's `_bucket`, `_sum` and
/// `_count` samples belong to the family without the suffix): empty when
/// every metric is described.
pub fn undescribed(page: &str) -> Vec<String> {
    let named = |prefix: &str| -> std::collections::BTreeSet<&str> {
        page.lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .filter_map(|rest| rest.split_whitespace().next())
            .collect()
    };
    let (typed, helped) = (named("# TYPE "), named("# HELP "));
    page.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter(|line| {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| {
                    name.strip_suffix(suffix)
                        .filter(|base| typed.contains(base))
                })
                .unwrap_or(name);
            !(typed.contains(family) && helped.contains(family))
        })
        .map(str::to_owned)
        .collect()
}

/// `name value`, `name{a="x",b="y"} value` or either with a timestamp after
/// the value.
fn parse_sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_owned();
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inside) = rest.strip_prefix('{') {
        rest = inside;
        loop {
            rest = rest.trim_start_matches(',');
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after_key) = rest.split_once("=\"")?;
            let (value, after_value) = label_value(after_key)?;
            if labels.insert(key.trim().to_owned(), value).is_some() {
                return None;
            }
            rest = after_value;
        }
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// A label's value up to its closing quote (`\\`, `\"` and `\n` escaped),
/// and the text after that quote.
fn label_value(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut characters = text.char_indices();
    while let Some((index, character)) = characters.next() {
        match character {
            '"' => return Some((value, &text[index + 1..])),
            '\\' => match characters.next()?.1 {
                'n' => value.push('\n'),
                escaped => value.push(escaped),
            },
            other => value.push(other),
        }
    }
    None
}
