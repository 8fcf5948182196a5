//! A replay: every log read line by line, each put back in time order
//! within a window ([`REORDER_WINDOW`]: logs are written as responses end,
//! not as requests arrive), the logs merged by time, and each request
//! decided by every configuration in turn; the counts gathered into a
//! [`Report`]. Memory is bounded by the keys in play and the window, not by
//! the logs' length.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::BufRead;

use serde::Serialize;
use tollgate_core::Fingerprinter;

use crate::formats::Format;
use crate::line::{LogLine, Logged};
use crate::replayer::{Replayed, Replayer, Skip};
use crate::tally::{Figures, Tally};

/// How far out of order a log's lines may be and still be decided in order,
/// by default: 60 s, in nanoseconds. The lines of the window are held in
/// memory (about 400 bytes each).
pub const REORDER_WINDOW: u64 = 60_000_000_000;

/// The bad lines listed by number (the rest only counted).
const BAD_LINES_LISTED: usize = 20;

/// Disagreements with the log listed by line (the rest only counted).
const DISAGREEMENTS_LISTED: usize = 10;

/// One log to read.
pub struct Source {
    /// Its name, in messages (`FILE:LINE`).
    pub name: String,
    /// Its lines.
    pub reader: Box<dyn BufRead>,
}

/// One configuration to replay.
pub struct Candidate {
    /// Its name (the file's).
    pub name: String,
    /// Its engine and routes.
    pub replayer: Replayer,
    /// How its keys are shown.
    pub fingerprints: Fingerprinter,
}

/// What a replay found.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Lines read (blank lines not counted).
    pub lines: u64,
    /// Lines that could not be read.
    pub bad_lines: u64,
    /// The first of them, as `FILE:LINE: reason`.
    pub bad_examples: Vec<String>,
    /// Lines further out of order than the window allows (decided late).
    pub out_of_order: u64,
    /// Each configuration's figures, in the order given.
    pub configs: Vec<ConfigReport>,
}

/// One configuration's figures.
#[derive(Debug, Serialize)]
pub struct ConfigReport {
    /// The configuration's name.
    pub config: String,
    /// Every request decided.
    pub overall: Figures,
    /// Per tier (`keyless` for requests without an API key).
    pub tiers: BTreeMap<String, Figures>,
    /// Per route.
    pub routes: BTreeMap<String, Figures>,
    /// Requests of exempt keys (no limit).
    pub exempt: u64,
    /// Requests not replayed, by reason ([`Skip::code`](crate::Skip::code):
    /// `undecided`, `no_route`, `no_key`, `header_budget`,
    /// `budget_key_missing`, `no_budget`).
    pub skipped: BTreeMap<String, u64>,
    /// For tollgate's own log: how many decisions the replay reproduced.
    pub agreement: Option<Agreement>,
}

/// How the replay's decisions compare with the logged ones.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Agreement {
    /// Lines with a decision to compare (allowed, delayed, refused,
    /// shadow_refused, exempt).
    pub compared: u64,
    /// Of them, those decided the same.
    pub agreed: u64,
    /// The first that were not, as `FILE:LINE`.
    pub disagreements: Vec<String>,
}

/// One configuration's running counts.
struct Counts {
    overall: Tally,
    tiers: BTreeMap<String, Tally>,
    routes: BTreeMap<String, Tally>,
    exempt: u64,
    skipped: BTreeMap<Skip, u64>,
    agreement: Agreement,
}

/// A line waiting in its log's window.
struct Pending {
    time: u64,
    /// Its place in its log: equal times keep their order.
    number: u64,
    line: LogLine,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.number) == (other.time, other.number)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.time, self.number).cmp(&(other.time, other.number))
    }
}

/// One log read in time order (within the window).
struct Ordered {
    name: String,
    reader: Box<dyn BufRead>,
    waiting: BinaryHeap<Reverse<Pending>>,
    window: u64,
    latest: u64,
    number: u64,
    ended: bool,
    bytes: Vec<u8>,
}

impl Ordered {
    /// The next line in time order, reading on as needed; bad lines counted
    /// into `report`.
    fn next(&mut self, format: &Format, report: &mut Report) -> Option<Pending> {
        loop {
            if let Some(Reverse(first)) = self.waiting.peek()
                && (self.ended || first.time.saturating_add(self.window) <= self.latest)
            {
                return self.waiting.pop().map(|Reverse(pending)| pending);
            }
            if self.ended {
                return None;
            }
            self.bytes.clear();
            match self.reader.read_until(b'\n', &mut self.bytes) {
                Ok(0) => self.ended = true,
                Ok(_) => {
                    self.number += 1;
                    let parsed = match std::str::from_utf8(&self.bytes) {
                        Ok(text) => {
                            let text = text.trim_end_matches(['\n', '\r']);
                            if text.trim().is_empty() {
                                continue;
                            }
                            format.parse(text)
                        }
                        Err(_) => Err("not UTF-8 text".to_owned()),
                    };
                    report.lines += 1;
                    match parsed {
                        Ok(line) => {
                            self.latest = self.latest.max(line.time);
                            self.waiting.push(Reverse(Pending {
                                time: line.time,
                                number: self.number,
                                line,
                            }));
                        }
                        Err(reason) => {
                            report.bad_lines += 1;
                            if report.bad_examples.len() < BAD_LINES_LISTED {
                                report
                                    .bad_examples
                                    .push(format!("{}:{}: {reason}", self.name, self.number));
                            }
                        }
                    }
                }
                Err(error) => {
                    report.bad_lines += 1;
                    if report.bad_examples.len() < BAD_LINES_LISTED {
                        report.bad_examples.push(format!(
                            "{}:{}: cannot be read: {error}",
                            self.name,
                            self.number + 1
                        ));
                    }
                    self.ended = true;
                }
            }
        }
    }
}

/// How a replay reads and reports.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How far out of order lines are put back in order, in nanoseconds
    /// ([`REORDER_WINDOW`] by default).
    pub window: u64,
    /// How many of the keys most refused each group lists.
    pub most: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: REORDER_WINDOW,
            most: 10,
        }
    }
}

/// Replays `sources`, read as `format`, through each of `candidates`.
pub fn replay(
    sources: Vec<Source>,
    format: &Format,
    candidates: &[Candidate],
    options: Options,
) -> Report {
    let most = options.most;
    let mut report = Report {
        lines: 0,
        bad_lines: 0,
        bad_examples: Vec::new(),
        out_of_order: 0,
        configs: Vec::new(),
    };
    let mut counts: Vec<Counts> = candidates
        .iter()
        .map(|_| Counts {
            overall: Tally::default(),
            tiers: BTreeMap::new(),
            routes: BTreeMap::new(),
            exempt: 0,
            skipped: BTreeMap::new(),
            agreement: Agreement::default(),
        })
        .collect();
    let mut logs: Vec<Ordered> = sources
        .into_iter()
        .map(|source| Ordered {
            name: source.name,
            reader: source.reader,
            waiting: BinaryHeap::new(),
            window: options.window,
            latest: 0,
            number: 0,
            ended: false,
            bytes: Vec::new(),
        })
        .collect();
    // The head of each log, merged by time.
    let mut heads: BinaryHeap<Reverse<(Pending, usize)>> = BinaryHeap::new();
    for (index, log) in logs.iter_mut().enumerate() {
        if let Some(pending) = log.next(format, &mut report) {
            heads.push(Reverse((pending, index)));
        }
    }
    let mut decided_up_to = 0;
    while let Some(Reverse((pending, index))) = heads.pop() {
        if pending.time < decided_up_to {
            report.out_of_order += 1;
        }
        decided_up_to = decided_up_to.max(pending.time);
        let place = format!("{}:{}", logs[index].name, pending.number);
        for (candidate, counts) in candidates.iter().zip(&mut counts) {
            decide(candidate, counts, &pending.line, &place);
        }
        if let Some(next) = logs[index].next(format, &mut report) {
            heads.push(Reverse((next, index)));
        }
    }
    let keys_are_fingerprints = *format == Format::Tollgate;
    report.configs = candidates
        .iter()
        .zip(counts)
        .map(|(candidate, counts)| {
            let figures =
                |tally: &Tally| tally.figures(&candidate.fingerprints, keys_are_fingerprints, most);
            ConfigReport {
                config: candidate.name.clone(),
                overall: figures(&counts.overall),
                tiers: counts
                    .tiers
                    .iter()
                    .map(|(name, tally)| (name.clone(), figures(tally)))
                    .collect(),
                routes: counts
                    .routes
                    .iter()
                    .map(|(name, tally)| (name.clone(), figures(tally)))
                    .collect(),
                exempt: counts.exempt,
                skipped: counts
                    .skipped
                    .into_iter()
                    .map(|(reason, count)| (reason.code().to_owned(), count))
                    .collect(),
                agreement: (*format == Format::Tollgate).then_some(counts.agreement),
            }
        })
        .collect();
    report
}

/// One line through one configuration.
fn decide(candidate: &Candidate, counts: &mut Counts, line: &LogLine, place: &str) {
    let replayed = candidate.replayer.replay(line);
    let decided = match &replayed {
        Replayed::Decided { allowed, .. } => Some(if *allowed {
            Logged::Allowed
        } else {
            Logged::Refused
        }),
        Replayed::Exempt => Some(Logged::Exempt),
        Replayed::Skipped(_) => None,
    };
    if let Some(logged) = line.logged.filter(|logged| *logged != Logged::Undecided) {
        counts.agreement.compared += 1;
        if decided == Some(logged) {
            counts.agreement.agreed += 1;
        } else if counts.agreement.disagreements.len() < DISAGREEMENTS_LISTED {
            counts.agreement.disagreements.push(place.to_owned());
        }
    }
    match replayed {
        Replayed::Decided {
            allowed,
            tier,
            route,
            key,
        } => {
            let key = key.as_ref().map(|(key, keyless)| (key.as_str(), *keyless));
            let refused = !allowed;
            counts.overall.count(line.time, refused, key);
            counts
                .tiers
                .entry(tier)
                .or_default()
                .count(line.time, refused, key);
            counts
                .routes
                .entry(route)
                .or_default()
                .count(line.time, refused, key);
        }
        Replayed::Exempt => counts.exempt += 1,
        Replayed::Skipped(reason) => *counts.skipped.entry(reason).or_default() += 1,
    }
}
