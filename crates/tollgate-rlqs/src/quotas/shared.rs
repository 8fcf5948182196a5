//! The allocator's transitions with a shared store (Redis): each bucket's
//! record read, the allocator's own rules run on it, and the record written
//! back by compare-and-set, the answers and pushes sent only for the records
//! written (see `crate::shared`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use futures_util::future::join_all;

use super::Quotas;
use crate::allocator::{BucketAnswer, Reshare, Usage};
use crate::bucket::BucketKey;
use crate::shared::{ATTEMPTS, SharedState, decode, encode, record_name};

/// What became of one bucket of a report in one attempt.
enum Outcome {
    /// Its record was written (or it keeps none): its answer.
    Answered(BucketAnswer),
    /// Another replica wrote its record in between: try again.
    Conflict,
    /// The store failed or did not answer in time: no answer.
    Failed,
}

impl Quotas {
    /// A report with a shared store: each bucket tried until its record is
    /// written, a bucket in conflict tried again alone (so that no report
    /// counts twice in a record), at most [`ATTEMPTS`] times; the answers
    /// of the buckets written, queued and given in the report's order.
    pub(super) async fn report_shared(
        &self,
        shared: &SharedState,
        stream: u64,
        domain: &str,
        usages: &[Usage],
    ) -> Vec<BucketAnswer> {
        let mut answered: Vec<Option<BucketAnswer>> = vec![None; usages.len()];
        let mut pending: Vec<usize> = (0..usages.len()).collect();
        let mut failed = false;
        for _ in 0..ATTEMPTS {
            if pending.is_empty() {
                break;
            }
            let subset: Vec<Usage> = pending.iter().map(|&index| usages[index].clone()).collect();
            let outcomes = self.attempt(shared, stream, domain, &subset).await;
            let mut conflicted = Vec::new();
            for (&index, outcome) in pending.iter().zip(outcomes) {
                match outcome {
                    Outcome::Answered(answer) => answered[index] = Some(answer),
                    Outcome::Conflict => conflicted.push(index),
                    Outcome::Failed => failed = true,
                }
            }
            pending = conflicted;
        }
        if failed || !pending.is_empty() {
            self.store_failures.fetch_add(1, Ordering::Relaxed);
        }
        answered.into_iter().flatten().collect()
    }

    /// One attempt at `usages`: their records read and written all at once.
    /// The answers of the records written are queued under the allocator's
    /// lock, unless a reload came in between (its pushes stand).
    async fn attempt(
        &self,
        shared: &SharedState,
        stream: u64,
        domain: &str,
        usages: &[Usage],
    ) -> Vec<Outcome> {
        let generation = self.generation.load(Ordering::Acquire);
        let names: Vec<String> = usages
            .iter()
            .map(|(key, _)| record_name(domain, key))
            .collect();
        let records = join_all(names.iter().map(|name| shared.records.get(name))).await;
        if records.iter().any(Result::is_err) {
            return usages.iter().map(|_| Outcome::Failed).collect();
        }
        let records: Vec<Option<Vec<u8>>> = records.into_iter().flatten().collect();
        let now = self.clock.now_nanos();
        let (answers, pushes, writes) = {
            let mut allocator = self.allocator.lock();
            for ((key, _), record) in usages.iter().zip(&records) {
                allocator.keep(domain, key, record.as_deref().map(decode));
            }
            let (answers, pushes) = allocator.report(stream, domain, usages, now);
            let writes: Vec<Option<Vec<u8>>> = usages
                .iter()
                .map(|(key, _)| {
                    allocator
                        .shared_demand(domain, key)
                        .map(|kept| encode(&kept))
                })
                .collect();
            (answers, pushes, writes)
        };
        let written = join_all(names.iter().zip(&records).zip(&writes).map(
            |((name, record), new)| async move {
                match new {
                    None => Ok(true),
                    Some(new) => {
                        shared
                            .records
                            .compare_and_set(name, record.as_deref(), new, shared.time_to_live)
                            .await
                    }
                }
            },
        ))
        .await;
        let outcomes: Vec<Outcome> = answers
            .into_iter()
            .zip(written)
            .map(|(answer, written)| match written {
                Ok(true) => Outcome::Answered(answer),
                Ok(false) => Outcome::Conflict,
                Err(_) => Outcome::Failed,
            })
            .collect();
        // Pushes (parts freed for other streams) only from the records
        // written; nothing at all if a reload came in between.
        let unwritten: Vec<&BucketKey> = usages
            .iter()
            .zip(&outcomes)
            .filter(|(_, outcome)| !matches!(outcome, Outcome::Answered(_)))
            .map(|((key, _), _)| key)
            .collect();
        let pushes: BTreeMap<u64, Vec<BucketAnswer>> = pushes
            .into_iter()
            .map(|(stream, answers)| {
                let kept: Vec<BucketAnswer> = answers
                    .into_iter()
                    .filter(|answer| match answer {
                        BucketAnswer::Assign { bucket, .. } | BucketAnswer::Abandon { bucket } => {
                            !unwritten.contains(&bucket)
                        }
                    })
                    .collect();
                (stream, kept)
            })
            .filter(|(_, answers)| !answers.is_empty())
            .collect();
        let _allocator = self.allocator.lock();
        if self.generation.load(Ordering::Acquire) != generation {
            return usages.iter().map(|_| Outcome::Failed).collect();
        }
        self.push(pushes);
        let answered: Vec<BucketAnswer> = outcomes
            .iter()
            .filter_map(|outcome| match outcome {
                Outcome::Answered(answer) => Some(answer.clone()),
                Outcome::Conflict | Outcome::Failed => None,
            })
            .collect();
        self.answer(stream, &answered);
        outcomes
    }

    /// Takes `stream` out of the record `name`, by compare-and-set.
    pub(super) async fn leave_record(&self, shared: &SharedState, name: &str, stream: u64) {
        for _ in 0..ATTEMPTS {
            let Ok(read) = shared.records.get(name).await else {
                self.store_failures.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let Some(read) = read else { return };
            let (mut demand, window) = decode(&read);
            if demand.part_of(stream).is_none() {
                return;
            }
            demand.close(stream);
            let written = shared
                .records
                .compare_and_set(
                    name,
                    Some(&read),
                    &encode(&(demand, window)),
                    shared.time_to_live,
                )
                .await;
            match written {
                Ok(true) => return,
                Ok(false) => {}
                Err(_) => {
                    self.store_failures.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
        self.store_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Splits a bucket's new shared limit again in its record (every
    /// stream's part by demand, adding up to the new budget), then sends
    /// this server's streams their new parts.
    pub(super) async fn reshare(&self, shared: &SharedState, reshare: &Reshare) {
        let name = record_name(&reshare.domain, &reshare.bucket);
        for _ in 0..ATTEMPTS {
            let Ok(read) = shared.records.get(&name).await else {
                break;
            };
            let (mut demand, window) = read.as_deref().map(decode).unwrap_or_default();
            demand.assign_all(reshare.rate.tokens, reshare.rate.per_s);
            let written = shared
                .records
                .compare_and_set(
                    &name,
                    read.as_deref(),
                    &encode(&(demand.clone(), window)),
                    shared.time_to_live,
                )
                .await;
            match written {
                Ok(true) => {
                    let mut allocator = self.allocator.lock();
                    let streams = self.streams.lock();
                    let local = |stream: u64| streams.contains_key(&stream);
                    let pushes = allocator.reshared(reshare, demand, local);
                    drop(streams);
                    self.push(pushes);
                    return;
                }
                Ok(false) => {}
                Err(_) => break,
            }
        }
        self.store_failures.fetch_add(1, Ordering::Relaxed);
    }
}
