//! Counting the script calls a Redis server has run.

use super::keys::connect;

/// How many script calls (`EVALSHA` and `EVAL`, answered or failed) the
/// server at `url` has run since it started or since [`reset_stats`], from
/// `INFO commandstats` (whose `cmdstat_NAME:calls=N,...` lines count for
/// the whole server).
pub fn script_calls(url: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connect(url))
        .unwrap();
    let count = |name: &str| -> u64 {
        let line = format!("cmdstat_{name}:");
        info.lines()
            .find_map(|row| row.strip_prefix(line.as_str()))
            .map(|fields| {
                let field = |key: &str| -> u64 {
                    fields
                        .split(',')
                        .find_map(|pair| pair.strip_prefix(key))
                        .map_or(0, |value| value.parse().unwrap())
                };
                // Calls Redis refused before running them count apart.
                field("calls=") + field("rejected_calls=")
            })
            .unwrap_or(0)
    };
    count("evalsha") + count("eval")
}

/// Zeroes the server's command statistics (`CONFIG RESETSTAT`).
pub fn reset_stats(url: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut connect(url))
        .unwrap();
}
