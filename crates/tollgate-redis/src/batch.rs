//! Concurrent requests share script calls: while a call is under way, the
//! requests that arrive queue up and go together in the next one (up to
//! [`MAX_BATCH`]), each still decided atomically on its own. Redis spends most
//! of a small script's cost on running a script at all, so this multiplies the
//! decisions it makes per second; a lone request still goes at once.

use std::sync::Arc;
use std::time::Instant;

use redis::aio::ConnectionManager;
use redis::{Script, Value};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::script::{self, Reply};
use tollgate_core::StoreError;

/// The most requests in one call.
const MAX_BATCH: usize = 128;

/// The most calls under way at once.
const MAX_IN_FLIGHT: usize = 2;

/// One limit of a request, as the script takes it.
#[derive(Clone, Debug)]
pub(crate) struct LimitCall {
    pub(crate) keys: [String; 3],
    /// The tier the plan is expected on, `*` for a policy limit.
    pub(crate) tier: String,
    pub(crate) algorithm: &'static str,
    pub(crate) limit: u64,
    pub(crate) window: u64,
    pub(crate) burst: u64,
    pub(crate) version: String,
}

/// One request: its limits, its units, whether it writes.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) limits: Vec<LimitCall>,
    pub(crate) units: u64,
    pub(crate) write: bool,
}

/// Runs `requests` in one script call at `now` (`""`: Redis's time).
pub(crate) async fn call(
    connection: &mut ConnectionManager,
    script: &Script,
    now: &str,
    minimum_ttl: u64,
    requests: &[&Request],
) -> Result<Vec<Reply>, StoreError> {
    let mut invocation = script.prepare_invoke();
    invocation.arg(now).arg(minimum_ttl).arg(requests.len());
    for request in requests {
        invocation
            .arg(request.limits.len())
            .arg(request.units)
            .arg(if request.write { "1" } else { "0" });
        for limit in &request.limits {
            let [state, log, tier] = &limit.keys;
            invocation
                .key(state)
                .key(log)
                .key(tier)
                .arg(&limit.tier)
                .arg(limit.algorithm)
                .arg(limit.limit)
                .arg(limit.window)
                .arg(limit.burst)
                .arg(&limit.version);
        }
    }
    let reply: Value = invocation
        .invoke_async(connection)
        .await
        .map_err(|error| StoreError::Unavailable(error.to_string()))?;
    let Value::Array(replies) = reply else {
        return Err(unexpected());
    };
    if replies.len() != requests.len() {
        return Err(unexpected());
    }
    replies
        .iter()
        .zip(requests)
        .map(|(reply, request)| match script::read_reply(reply) {
            Some(Reply::Decided(outcomes)) if outcomes.len() == request.limits.len() => {
                Ok(Reply::Decided(outcomes))
            }
            Some(other @ (Reply::Tier { .. } | Reply::Failed(_))) => Ok(other),
            _ => Err(unexpected()),
        })
        .collect()
}

fn unexpected() -> StoreError {
    StoreError::Unavailable("unexpected reply from the script".into())
}

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

/// The queue in front of the script calls of requests on Redis's time.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Batcher {
    /// Starts the dispatcher; it stops when the batcher is dropped.
    pub(crate) fn start(
        connection: ConnectionManager,
        script: Script,
        now: Arc<dyn Fn() -> String + Send + Sync>,
        minimum_ttl: u64,
    ) -> Self {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        tokio::spawn(async move {
            let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
            let script = Arc::new(script);
            while let Some(first) = queue.recv().await {
                let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
                    break;
                };
                // Requests whose caller gave up (timed out) are not sent: the
                // caller has answered without them.
                let now_instant = Instant::now();
                let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
                if first.is_wanted(now_instant) {
                    batch.push(first);
                }
                while batch.len() < MAX_BATCH {
                    match queue.try_recv() {
                        Ok(job) if job.is_wanted(now_instant) => batch.push(job),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                let Some(deadline) = batch.iter().map(|job| job.deadline).min() else {
                    continue;
                };
                let mut connection = connection.clone();
                let script = Arc::clone(&script);
                let now = now();
                tokio::spawn(async move {
                    let requests: Vec<&Request> = batch.iter().map(|job| &job.request).collect();
                    // Given up when the first caller gives up: a call still
                    // waiting for a connection then must never run later.
                    let replies = tokio::time::timeout_at(
                        deadline.into(),
                        call(&mut connection, &script, &now, minimum_ttl, &requests),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(StoreError::Unavailable(
                            "Redis did not answer in time".into(),
                        ))
                    });
                    match replies {
                        Ok(replies) => {
                            for (job, reply) in batch.into_iter().zip(replies) {
                                let _ = job.reply.send(Ok(reply));
                            }
                        }
                        Err(error) => {
                            let message = error.to_string();
                            for job in batch {
                                let _ = job
                                    .reply
                                    .send(Err(StoreError::Unavailable(message.clone())));
                            }
                        }
                    }
                    drop(permit);
                });
            }
        });
        Batcher { jobs }
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
