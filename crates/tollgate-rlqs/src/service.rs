//! `envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas`
//! over gRPC (tonic, with the `envoy-types` messages): each stream's reports
//! go to the allocator, and its answers, abandons and pushed limits come
//! back on the stream's queue.

use std::sync::Arc;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::convert::usages;
use crate::quotas::{Quotas, STREAM_QUEUE};

/// The largest report (bytes): 4 MiB, grpc-go's default, as `tollgate rls`
/// takes. A larger one ends its stream with `OUT_OF_RANGE`.
pub const MAX_REPORT_BYTES: usize = 4 * 1024 * 1024;

/// The quota service on `quotas`.
pub struct QuotaService {
    quotas: Arc<Quotas>,
}

/// The tonic service answering `StreamRateLimitQuotas` from `quotas`.
pub fn service(quotas: Arc<Quotas>) -> RateLimitQuotaServiceServer<QuotaService> {
    RateLimitQuotaServiceServer::new(QuotaService { quotas })
        .max_decoding_message_size(MAX_REPORT_BYTES)
        .max_encoding_message_size(MAX_REPORT_BYTES)
}

#[tonic::async_trait]
impl RateLimitQuotaService for QuotaService {
    type StreamRateLimitQuotasStream = ReceiverStream<Result<RateLimitQuotaResponse, Status>>;

    /// Each report is answered at once with an assignment for each of its
    /// buckets. A report without a domain ends the stream with
    /// `INVALID_ARGUMENT`; malformed buckets are left out and counted.
    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Self::StreamRateLimitQuotasStream>, Status> {
        let mut inbound = request.into_inner();
        let (outgoing, answers) = mpsc::channel(STREAM_QUEUE);
        let Some(stream) = self.quotas.open(outgoing) else {
            return Err(Status::resource_exhausted(
                "too many quota streams are open",
            ));
        };
        let quotas = Arc::clone(&self.quotas);
        tokio::spawn(async move {
            while let Ok(Some(report)) = inbound.message().await {
                match usages(&report) {
                    Ok((usages, refused)) => {
                        for _ in 0..refused {
                            quotas.refused(&report.domain);
                        }
                        quotas.report(stream, &report.domain, &usages).await;
                        if !quotas.is_open(stream) {
                            break;
                        }
                    }
                    Err(error) => {
                        quotas.refused(&report.domain);
                        quotas.fail(stream, Status::invalid_argument(error.to_string()));
                        break;
                    }
                }
            }
            quotas.close(stream).await;
        });
        Ok(Response::new(ReceiverStream::new(answers)))
    }
}
