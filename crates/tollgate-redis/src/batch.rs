//! Concurrent requests share script calls: while a call is under way, the
//! requests that arrive queue up and go together in the next one (up to
//! [`MAX_BATCH`]), each still decided atomically on its own. Redis spends most
//! of a small script's cost on running a script at all, so this multiplies the
//! decisions it makes per second; a lone request still goes at once. The
//! call itself is [`call::decide`]: each request carries its caller's
//! deadline, so a call Redis runs late (after a stall) charges none of the
//! requests whose callers have given up.

use std::sync::Arc;
use std::time::Instant;

use redis::Script;
use tokio::sync::{mpsc, oneshot, watch};

use crate::call::{self, Reply, Request};
use crate::connection::Connection;
use crate::context::redis_clock::RedisClock;
use tollgate_core::StoreError;

/// The most requests in one call.
const MAX_BATCH: usize = 128;

/// The most calls under way at once: sent and not yet answered by Redis, nor
/// ended by the Redis client's response timeout (the store's timeout).
const MAX_IN_FLIGHT: usize = 2;

struct Job {
    request: Request,
    reply: oneshot::Sender<Result<Reply, StoreError>>,
    /// When its caller stops waiting.
    deadline: Instant,
}

impl Job {
    fn is_wanted(&self, now: Instant) -> bool {
        !self.reply.is_closed() && self.deadline > now
    }
}

/// Takes the queued jobs into `batch`, up to [`MAX_BATCH`].
fn drain(queue: &mut mpsc::UnboundedReceiver<Job>, batch: &mut Vec<Job>) {
    while batch.len() < MAX_BATCH {
        match queue.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
}

/// Counts a call out of [`UnderWay`] when dropped.
struct Finished {
    under_way: Arc<watch::Sender<UnderWay>>,
    size: usize,
}

impl Drop for Finished {
    fn drop(&mut self) {
        let size = self.size;
        self.under_way
            .send_modify(|under_way| under_way.remove(size));
    }
}

/// The script calls under way and the requests they carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct UnderWay {
    calls: usize,
    requests: usize,
}

impl UnderWay {
    fn add(&mut self, requests: usize) {
        self.calls += 1;
        self.requests += requests;
    }

    fn remove(&mut self, requests: usize) {
        self.calls = self.calls.saturating_sub(1);
        self.requests = self.requests.saturating_sub(requests);
    }

    /// Whether a call of `queued` requests may start now: at once when none
    /// is under way; beside calls under way (up to [`MAX_IN_FLIGHT`]) only
    /// with at least half as many requests as they carry. Without that rule,
    /// the first of many callers answered by a call would leave at once in a
    /// call of its own and the rest would follow in ever smaller calls, each
    /// paying the fixed cost of running a script.
    fn may_start(&self, queued: usize) -> bool {
        self.calls == 0 || (self.calls < MAX_IN_FLIGHT && queued * 2 >= self.requests)
    }
}

/// The queue in front of the script calls of requests on Redis's time.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Batcher {
    /// Starts the dispatcher; it stops when the batcher is dropped.
    pub(crate) fn start(
        connection: Connection,
        script: Arc<Script>,
        clock: Arc<RedisClock>,
        now: Arc<dyn Fn() -> String + Send + Sync>,
        minimum_ttl: u64,
    ) -> Self {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        tokio::spawn(async move {
            // Calls and jobs under way, updated as calls finish.
            let (under_way, mut watch_under_way) = watch::channel(UnderWay::default());
            let under_way = Arc::new(under_way);
            let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
            let mut open = true;
            while open || !batch.is_empty() {
                if batch.is_empty() {
                    match queue.recv().await {
                        Some(job) => batch.push(job),
                        None => break,
                    }
                }
                drain(&mut queue, &mut batch);
                // Wait for a free call, or for a fair share of the requests
                // behind the call under way (see `UnderWay::may_start`).
                while !watch_under_way.borrow_and_update().may_start(batch.len()) {
                    tokio::select! {
                        changed = watch_under_way.changed() => {
                            if changed.is_err() {
                                break;
                            }
                        }
                        job = queue.recv(), if open && batch.len() < MAX_BATCH => match job {
                            Some(job) => {
                                batch.push(job);
                                drain(&mut queue, &mut batch);
                            }
                            None => open = false,
                        },
                    }
                }
                // Requests whose caller gave up (timed out) are not sent: the
                // caller has answered without them.
                let now_instant = Instant::now();
                let jobs: Vec<Job> = batch
                    .drain(..)
                    .filter(|job| job.is_wanted(now_instant))
                    .collect();
                if jobs.is_empty() {
                    continue;
                }
                let size = jobs.len();
                under_way.send_modify(|under_way| under_way.add(size));
                // Counted out when the call ends, however it ends.
                let finished = Finished {
                    under_way: Arc::clone(&under_way),
                    size,
                };
                let mut connection = connection.clone();
                let script = Arc::clone(&script);
                let clock = Arc::clone(&clock);
                let now = now();
                tokio::spawn(async move {
                    // Each request with its caller's deadline. The call stays
                    // under way until Redis answers (or the client's response
                    // timeout ends it), whoever still waits: a request Redis
                    // runs after its caller gave up charges nothing.
                    let requests: Vec<(&Request, Instant)> = jobs
                        .iter()
                        .map(|job| (&job.request, job.deadline))
                        .collect();
                    let replies = call::decide(
                        &mut connection,
                        &script,
                        &clock,
                        &now,
                        minimum_ttl,
                        &requests,
                    )
                    .await;
                    drop(finished);
                    match replies {
                        Ok(replies) => {
                            for (job, reply) in jobs.into_iter().zip(replies) {
                                let _ = job.reply.send(Ok(reply));
                            }
                        }
                        Err(error) => {
                            let message = match error {
                                StoreError::Unavailable(message) => message,
                                other => other.to_string(),
                            };
                            for job in jobs {
                                let _ = job
                                    .reply
                                    .send(Err(StoreError::Unavailable(message.clone())));
                            }
                        }
                    }
                });
            }
        });
        Batcher { jobs }
    }

    /// Whether the dispatcher has stopped (its runtime shut down).
    pub(crate) fn is_closed(&self) -> bool {
        self.jobs.is_closed()
    }

    /// Whether both queue at the same dispatcher.
    #[cfg(test)]
    pub(crate) fn same_queue(&self, other: &Batcher) -> bool {
        self.jobs.same_channel(&other.jobs)
    }

    /// Queues `request`, whose caller waits until `deadline`, and waits for its
    /// reply.
    pub(crate) async fn submit(
        &self,
        request: Request,
        deadline: Instant,
    ) -> Result<Reply, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job {
                request,
                reply,
                deadline,
            })
            .map_err(|_| StoreError::Unavailable("the store is shutting down".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the call was dropped".into()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_call_waits_for_half_the_first_calls_requests() {
        let idle = UnderWay::default();
        assert!(idle.may_start(1), "a lone request goes at once");
        let mut one = UnderWay::default();
        one.add(32);
        assert!(!one.may_start(15));
        assert!(one.may_start(16));
        one.add(16);
        assert!(!one.may_start(MAX_BATCH), "two calls are under way");
        one.remove(32);
        one.remove(16);
        assert_eq!(one, UnderWay::default());
    }
}
