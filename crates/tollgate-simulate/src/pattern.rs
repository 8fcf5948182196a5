//! Traffic patterns ([`Pattern`]) and the arrival times they make
//! ([`Arrivals`]), in nanoseconds: steady at a rate, bursts of N every T,
//! idle then one burst, Poisson at a rate with a seed, or a file of
//! timestamps. A generated pattern starts at the Unix epoch, so a fixed
//! window's first window starts with it; a file's timestamps keep their own
//! times, so its windows fall where they fell.

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

/// The most arrivals one run holds (about 80 MB of times): a pattern that
/// would make more is refused, so memory stays bounded.
pub const MAX_ARRIVALS: u64 = 10_000_000;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// When requests arrive.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// `count` requests every `per`, evenly spaced (`steady:10/s`).
    Steady {
        /// Requests per `per`.
        count: u64,
        /// The span they are spread over.
        per: Duration,
    },
    /// `size` requests at once, every `every`, from the start
    /// (`bursts:20/10s`).
    Bursts {
        /// Requests in each burst.
        size: u64,
        /// The time between bursts.
        every: Duration,
    },
    /// Nothing for `idle`, then `size` requests at once
    /// (`idle-burst:30s,50`).
    IdleThenBurst {
        /// The quiet time first.
        idle: Duration,
        /// Requests in the burst.
        size: u64,
    },
    /// A Poisson process of `count` requests per `per` on average, its
    /// gaps drawn from a ChaCha8 generator seeded with `seed`
    /// (`poisson:5/s,seed=7`; seed 1 by default): the same seed gives the
    /// same arrivals on every machine.
    Poisson {
        /// Mean requests per `per`.
        count: u64,
        /// The span of the mean.
        per: Duration,
        /// The generator's seed.
        seed: u64,
    },
    /// Given times, in nanoseconds since the epoch, sorted (`file:PATH`:
    /// one per line, seconds since the epoch with an optional fraction, or
    /// an RFC 3339 time; blank lines and `#` comments skipped).
    Timestamps(Vec<u64>),
}

/// A pattern that cannot be read or made: the message says which part.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatternError {
    /// The text is not a pattern.
    #[error(
        "invalid pattern {text:?}: {reason} (one of steady:RATE, bursts:SIZE/EVERY, \
         idle-burst:IDLE,SIZE, poisson:RATE[,seed=N], file:PATH; RATE is COUNT/SPAN as 10/s)"
    )]
    Invalid {
        /// The pattern as given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A line of a timestamp file is not a time.
    #[error("line {line}: {text:?} is neither seconds since the epoch nor an RFC 3339 time")]
    Timestamp {
        /// Its line number, from 1.
        line: usize,
        /// The line.
        text: String,
    },
    /// The pattern would make more than [`MAX_ARRIVALS`] arrivals.
    #[error("the pattern makes more than {MAX_ARRIVALS} requests over the run: shorten it")]
    TooMany,
}

/// The arrival times of a run, in nanoseconds since the epoch, sorted, and
/// the span they are shown over: `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrivals {
    /// Where the run starts.
    pub start: u64,
    /// Where it ends (past the last arrival).
    pub end: u64,
    /// When each request arrives.
    pub times: Vec<u64>,
}

impl Pattern {
    /// Reads a pattern's text (a file's timestamps are read with
    /// [`Pattern::timestamps`] by the caller, which owns the file).
    ///
    /// # Errors
    ///
    /// [`PatternError::Invalid`] naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let invalid = |reason: &str| PatternError::Invalid {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (kind, rest) = text
            .split_once(':')
            .ok_or_else(|| invalid("no kind before `:`"))?;
        match kind {
            "steady" => {
                let (count, per) = rate(rest).map_err(|reason| invalid(&reason))?;
                Ok(Pattern::Steady { count, per })
            }
            "bursts" => {
                let (size, every) = rate(rest).map_err(|reason| invalid(&reason))?;
                Ok(Pattern::Bursts { size, every })
            }
            "idle-burst" => {
                let (idle, size) = rest
                    .split_once(',')
                    .ok_or_else(|| invalid("expected IDLE,SIZE"))?;
                let idle = span(idle).map_err(|reason| invalid(&reason))?;
                let size = count(size).map_err(|reason| invalid(&reason))?;
                Ok(Pattern::IdleThenBurst { idle, size })
            }
            "poisson" => {
                let (rate_text, seed) = match rest.split_once(',') {
                    Some((rate_text, seed)) => {
                        let seed = seed
                            .strip_prefix("seed=")
                            .and_then(|seed| seed.parse().ok())
                            .ok_or_else(|| invalid("expected seed=N after the rate"))?;
                        (rate_text, seed)
                    }
                    None => (rest, 1),
                };
                let (count, per) = rate(rate_text).map_err(|reason| invalid(&reason))?;
                Ok(Pattern::Poisson { count, per, seed })
            }
            "file" => Err(invalid(
                "a file's timestamps are read with Pattern::timestamps",
            )),
            _ => Err(invalid("unknown kind")),
        }
    }

    /// The timestamps of a file's `text`, sorted.
    ///
    /// # Errors
    ///
    /// [`PatternError::Timestamp`] for the first line that is not a time,
    /// [`PatternError::TooMany`] past [`MAX_ARRIVALS`].
    pub fn timestamps(text: &str) -> Result<Self, PatternError> {
        let mut times = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let time = timestamp(line).ok_or_else(|| PatternError::Timestamp {
                line: index + 1,
                text: line.chars().take(80).collect(),
            })?;
            if times.len() as u64 >= MAX_ARRIVALS {
                return Err(PatternError::TooMany);
            }
            times.push(time);
        }
        times.sort_unstable();
        Ok(Pattern::Timestamps(times))
    }

    /// The arrivals over `duration` from the epoch (a file's: from its
    /// first timestamp, cut to a whole `step`, to past its last, or over
    /// `duration` when given).
    ///
    /// # Errors
    ///
    /// [`PatternError::TooMany`] past [`MAX_ARRIVALS`].
    pub fn arrivals(&self, duration: Duration, step: Duration) -> Result<Arrivals, PatternError> {
        let end = nanos(duration);
        let mut times = Vec::new();
        let push = |time: u64, times: &mut Vec<u64>| {
            if times.len() as u64 >= MAX_ARRIVALS {
                return Err(PatternError::TooMany);
            }
            times.push(time);
            Ok(())
        };
        match self {
            Pattern::Steady { count, per } => {
                // The k-th request at k * per / count, exactly.
                let (count, per) = (u128::from(*count), u128::from(nanos(*per)));
                for k in 0u128.. {
                    let time = k * per / count;
                    if time >= u128::from(end) {
                        break;
                    }
                    push(u64::try_from(time).unwrap_or(u64::MAX), &mut times)?;
                }
            }
            Pattern::Bursts { size, every } => {
                let every = nanos(*every).max(1);
                let mut time = 0;
                while time < end {
                    for _ in 0..*size {
                        push(time, &mut times)?;
                    }
                    time = time.saturating_add(every);
                }
            }
            Pattern::IdleThenBurst { idle, size } => {
                let idle = nanos(*idle);
                if idle < end {
                    for _ in 0..*size {
                        push(idle, &mut times)?;
                    }
                }
            }
            Pattern::Poisson { count, per, seed } => {
                let mut generator = ChaCha8Rng::seed_from_u64(*seed);
                // Gaps in nanoseconds, mean per / count.
                let rate = *count as f64 / nanos(*per).max(1) as f64;
                let gaps = Exp::new(rate).map_err(|_| PatternError::Invalid {
                    text: format!("poisson:{count}/{per:?}"),
                    reason: "the rate must be above zero".into(),
                })?;
                let mut time = 0.0_f64;
                loop {
                    time += gaps.sample(&mut generator);
                    if time.is_nan() || time >= end as f64 {
                        break;
                    }
                    push(time as u64, &mut times)?;
                }
            }
            Pattern::Timestamps(given) => {
                let step = nanos(step).max(1);
                let first = given.first().copied().unwrap_or(0);
                let start = first - first % step;
                let end = if duration.is_zero() {
                    let last = given.last().copied().unwrap_or(start);
                    // Past the last arrival, on a whole step.
                    (last - last % step).saturating_add(step)
                } else {
                    start.saturating_add(end)
                };
                let times = given.iter().copied().filter(|time| *time < end).collect();
                return Ok(Arrivals { start, end, times });
            }
        }
        Ok(Arrivals {
            start: 0,
            end,
            times,
        })
    }
}

/// `COUNT/SPAN`: `10/s`, `600/1m`, `5/100ms` (a bare unit is one of it).
fn rate(text: &str) -> Result<(u64, Duration), String> {
    let (count_text, span_text) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not COUNT/SPAN"))?;
    Ok((count(count_text)?, span(span_text)?))
}

fn count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(count) if (1..=MAX_ARRIVALS).contains(&count) => Ok(count),
        _ => Err(format!("{text:?} is not a count from 1 to {MAX_ARRIVALS}")),
    }
}

/// A span above zero: `10s`, `1m`, `100ms`; a bare unit (`s`) is one of it.
fn span(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let whole = if text.starts_with(|c: char| c.is_ascii_digit()) {
        humantime::parse_duration(text)
    } else {
        humantime::parse_duration(&format!("1{text}"))
    };
    match whole {
        Ok(span) if !span.is_zero() => Ok(span),
        _ => Err(format!(
            "{text:?} is not a span above zero such as 10s, 1m or 100ms"
        )),
    }
}

/// Seconds since the epoch (`1733389200`, `1733389200.25`) or RFC 3339.
fn timestamp(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit())
    {
        let seconds: u64 = whole.parse().ok()?;
        let digits = &fraction[..fraction.len().min(9)];
        let mut nanos: u64 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        for _ in digits.len()..9 {
            nanos *= 10;
        }
        return seconds.checked_mul(NANOS_PER_SECOND)?.checked_add(nanos);
    }
    let time = humantime::parse_rfc3339_weak(text).ok()?;
    let since = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_nanos()).ok()
}

/// `duration` in nanoseconds, `u64::MAX` past about 584 years.
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
