//! The store's answer for a request's limits, as the response it gets: the
//! inner service's with the RateLimit fields of every limit, a 429, or what
//! the failure policy says when the store cannot answer.

use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use tollgate_core::{LimitDecision, LimitUnits, StoreError, StoreFuture};

use super::route::{PendingLimit, Route};
use crate::header_fields::{RateLimitField, RateLimitHeaders};
use crate::metrics::{record_denial, record_store_failure};
use crate::problem::Problem;
use tollgate_core::FailurePolicy;

/// What happens to a request once its limits are decided.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Call the service; add these fields (none when the store failed open).
    Allowed(Option<RateLimitHeaders>),
    /// Answer this instead (429, or 503 when failing closed); boxed, so the
    /// common path moves little.
    Refused(Box<Response<Full<Bytes>>>),
}

/// Decides `first` and `more` in a store that answers at once (the
/// in-memory one), here and now: no future of the layer's own is boxed.
pub(crate) fn decide_now(first: &PendingLimit, more: &[PendingLimit]) -> Outcome {
    let store = first.route.shared.store.as_ref();
    let one = first.limit();
    if more.is_empty()
        && one.units == 1
        && let Some(decided) = store.acquire_one_now(&one.limit)
    {
        return outcome(first, more, Ok(std::slice::from_ref(&decided)));
    }
    let result = if more.is_empty() {
        answer_now(store.acquire_units(&[one]))
    } else {
        let limits = all_limits(first, more);
        answer_now(store.acquire_units(&limits))
    };
    outcome(first, more, result.as_deref())
}

/// Decides `first` and `more` through the store's future.
pub(crate) async fn decide(first: PendingLimit, more: Vec<PendingLimit>) -> Outcome {
    let store = first.route.shared.store.as_ref();
    let result = if more.is_empty() {
        store.acquire_units(&[first.limit()]).await
    } else {
        let limits = all_limits(&first, &more);
        store.acquire_units(&limits).await
    };
    outcome(&first, &more, result.as_deref())
}

pub(super) fn all_limits<'a>(
    first: &'a PendingLimit,
    more: &'a [PendingLimit],
) -> Vec<LimitUnits<'a>> {
    std::iter::once(first)
        .chain(more)
        .map(PendingLimit::limit)
        .collect()
}

/// The answer of a store future that is ready at its first poll.
fn answer_now(
    mut future: StoreFuture<'_, Vec<LimitDecision>>,
) -> Result<Vec<LimitDecision>, StoreError> {
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => result,
        Poll::Pending => Err(StoreError::Unavailable(
            "the in-memory store did not answer at once".to_owned(),
        )),
    }
}

pub(super) fn outcome(
    first: &PendingLimit,
    more: &[PendingLimit],
    result: Result<&[LimitDecision], &StoreError>,
) -> Outcome {
    let decisions = match result {
        Ok(decisions) if decisions.len() == 1 + more.len() => decisions,
        _ => return store_failed(&first.route),
    };
    let limits = || std::iter::once(first).chain(more);
    let headers = match decisions {
        [only] => first.budget().headers.headers(&only.decision),
        _ => {
            let fields: Vec<RateLimitField<'_>> = limits()
                .zip(decisions)
                .map(|(limit, decided)| {
                    let (quota, window_s) = limit.budget().quota();
                    RateLimitField {
                        name: &limit.route.name,
                        quota,
                        window_s,
                        decision: &decided.decision,
                    }
                })
                .collect();
            RateLimitHeaders::of(&fields)
        }
    };
    if decisions
        .iter()
        .all(|decided| decided.decision.is_allowed())
    {
        return Outcome::Allowed(Some(headers));
    }
    // The limits that refused; the others report rejected with no wait.
    let waits = |limit: &&LimitDecision| !limit.decision.retry_after.is_zero();
    let any_waits = decisions.iter().any(|decided| waits(&decided));
    let mut retry_after = 0;
    let mut refused_by = &first.route.name;
    for (limit, decided) in limits().zip(decisions) {
        let refused = !decided.decision.is_allowed() && (!any_waits || waits(&decided));
        if !refused {
            continue;
        }
        record_denial(&limit.route.name, limit.kind_label());
        let wait = decided.decision.retry_after_seconds();
        if wait > retry_after {
            retry_after = wait;
            refused_by = &limit.route.name;
        }
    }
    let mut response = Problem::too_many_requests(refused_by, retry_after);
    headers.add_to(response.headers_mut());
    Outcome::Refused(Box::new(response))
}

/// The store could not decide: counted, then the failure policy of
/// `route` (the deciding layer's).
pub(super) fn store_failed(route: &Route) -> Outcome {
    let failure = route.shared.failure;
    record_store_failure(&route.name, failure.label());
    match failure {
        FailurePolicy::FailOpen => Outcome::Allowed(None),
        FailurePolicy::FailClosed => Outcome::Refused(Box::new(Problem::unavailable())),
    }
}
