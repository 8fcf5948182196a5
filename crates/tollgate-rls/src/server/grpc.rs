//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` over gRPC,
//! with the `envoy-types` messages.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3 as rls;
use rls::rate_limit_service_server::{RateLimitService, RateLimitServiceServer};
use tonic::{Request, Response, Status};

use super::Decide;
use super::convert::{request_from_prost, response_to_prost};

/// The largest request or response message (bytes), grpc-go's default
/// (4 MiB), which the Go service keeps; a larger request is refused with
/// tonic's `OUT_OF_RANGE` ("decoded message length too large"), where
/// grpc-go answers `RESOURCE_EXHAUSTED`: Envoy treats both as a failed call.
pub const MAX_GRPC_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The gRPC face of a [`Decide`].
pub(crate) struct GrpcRateLimit {
    pub(crate) decider: Arc<dyn Decide>,
}

/// The tonic service answering `ShouldRateLimit` with `decider`.
pub(crate) fn service(decider: Arc<dyn Decide>) -> RateLimitServiceServer<GrpcRateLimit> {
    RateLimitServiceServer::new(GrpcRateLimit { decider })
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES)
}

#[tonic::async_trait]
impl RateLimitService for GrpcRateLimit {
    /// A request that does not decode is refused by tonic (`INTERNAL`, as
    /// grpc-go does); the service's errors (an empty domain, no descriptors,
    /// a store failure) are `UNKNOWN` with the Go service's message, as
    /// grpc-go reports a plain error.
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        let request = request_from_prost(request.into_inner());
        match super::decide_catching_panics(self.decider.as_ref(), &request).await {
            Ok(response) => Ok(Response::new(response_to_prost(response))),
            Err(super::DecideError::Service(message)) => Err(Status::unknown(message)),
            Err(super::DecideError::Panicked) => Err(Status::internal("internal error")),
        }
    }
}
