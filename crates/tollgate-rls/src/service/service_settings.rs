//! What the service's behaviour reads: the settings of envoyproxy/ratelimit
//! (`src/settings/settings.go`) that change an answer, with the Go defaults,
//! and tollgate's opt-in extensions (all off by default). Reading them from
//! the environment is the `settings` module's job, not this one's.

/// The service's behaviour settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceSettings {
    /// `SHADOW_MODE` (false): every request is decided and counted, and an
    /// OVER_LIMIT answer becomes OK (counted in
    /// `ratelimit.service.global_shadow_mode`); statuses keep their codes.
    pub shadow_mode: bool,
    /// `QUOTA_MODE` (false): every descriptor is in quota mode: the request is
    /// OVER_LIMIT only when every quota descriptor is over its limit (and no
    /// other descriptor is).
    pub quota_mode: bool,
    /// `NEAR_LIMIT_RATIO` (0.8): the near-limit threshold of a limit `L` is
    /// `floor(float32(L) * ratio)`, as Go computes it; it only moves the
    /// `near_limit` counters, never a decision.
    pub near_limit_ratio: f32,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` (false): add the three headers below,
    /// of the descriptor nearest its limit (an over-limit one wins).
    pub limit_response_headers_enabled: bool,
    /// `LIMIT_LIMIT_HEADER` (`RateLimit-Limit`): its `requests_per_unit`.
    pub limit_limit_header: String,
    /// `LIMIT_REMAINING_HEADER` (`RateLimit-Remaining`): its `limit_remaining`.
    pub limit_remaining_header: String,
    /// `LIMIT_RESET_HEADER` (`RateLimit-Reset`): seconds until its window
    /// ends (`unit - now % unit`).
    pub limit_reset_header: String,
    /// `RESPONSE_DYNAMIC_METADATA` (false): answer the request's domain,
    /// descriptors and hits, and the merged `metadata` of the descriptors that
    /// passed, as `dynamic_metadata`.
    pub response_dynamic_metadata: bool,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` (false): read every counter
    /// first; when some descriptor would go over its limit, only the
    /// descriptors that would go over are counted.
    pub stop_cache_key_increment_when_overlimit: bool,
    /// `CACHE_KEY_PREFIX` (empty): the start of every store key.
    pub cache_key_prefix: String,
    /// `LOCAL_CACHE_SIZE_IN_BYTES` (0 = off): remember, in this process, the
    /// descriptors found over their limit until their window ends, and answer
    /// them without asking the store (counted in `over_limit_with_local_cache`).
    /// Bounded by this many bytes of keys (about).
    pub local_cache_size_bytes: u64,
    /// Whether a store key longer than 128 bytes is kept as its SHA-256
    /// digest (`#sha256:` and 64 hex digits), so that a key costs the store
    /// at most 128 bytes whatever a request's values (true). For the
    /// in-memory store; `tollgate rls` turns it off when limits are in Redis,
    /// which names every key by the SHA-256 of the whole key already, so the
    /// names of long keys stay the ones they were.
    pub digest_long_keys: bool,
    /// tollgate's extensions.
    pub extensions: Extensions,
}

impl Default for ServiceSettings {
    fn default() -> ServiceSettings {
        ServiceSettings {
            shadow_mode: false,
            quota_mode: false,
            near_limit_ratio: 0.8,
            limit_response_headers_enabled: false,
            limit_limit_header: "RateLimit-Limit".to_owned(),
            limit_remaining_header: "RateLimit-Remaining".to_owned(),
            limit_reset_header: "RateLimit-Reset".to_owned(),
            response_dynamic_metadata: false,
            stop_cache_key_increment_when_overlimit: false,
            cache_key_prefix: String::new(),
            local_cache_size_bytes: 0,
            digest_long_keys: true,
            extensions: Extensions::default(),
        }
    }
}

/// tollgate's opt-in behaviours, none of which the Go service has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    /// A request is all or nothing across its descriptors: a descriptor is
    /// charged only when every descriptor allows the request, so a refused
    /// request uses no budget (the Go service charges every descriptor, even
    /// the refused hits: envoyproxy/ratelimit issue #1060). Fixed windows then
    /// count allowed hits only, and `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`
    /// has nothing left to do.
    pub all_or_nothing: bool,
    /// An OVER_LIMIT answer carries `Retry-After: <seconds>` in
    /// `response_headers_to_add`: the longest wait of its over-limit
    /// descriptors.
    pub retry_after_header: bool,
    /// Every answer carries the IETF `RateLimit-Policy` and `RateLimit` fields
    /// (draft-ietf-httpapi-ratelimit-headers) of its limited descriptors:
    /// `"name";q=<limit>;w=<window s>` and `"name";r=<remaining>;t=<reset s>`.
    pub ietf_headers: bool,
    /// `TOLLGATE_REFUNDS`: a limited descriptor sent with `is_negative_hits`
    /// gives its hits back to its limit (`Store::give_back_units`) instead
    /// of being charged them, and is answered OK with its limit and what
    /// remains after the refund; its hits are counted in
    /// `ratelimit.service.rate_limit.<key>.refunded_hits`, not in
    /// `total_hits`. Off (the default), such hits are charged as any others,
    /// as the Go service (which ignores the flag) charges them.
    pub refunds: bool,
    /// What a request gets when the store fails (down, or slower than its
    /// timeout): `None` (the default) is the Go service's answer, an error
    /// (gRPC `UNKNOWN`, counted in `redis_error`) that Envoy's
    /// `failure_mode_deny` then decides; `FailOpen` answers OK (every limited
    /// descriptor OK without a `current_limit`), `FailClosed` OVER_LIMIT
    /// (every limited descriptor over, 0 remaining). Either is counted in
    /// `redis_error` and in `ratelimit.service.store_failure.<policy>`.
    pub store_failure: Option<tollgate_core::FailurePolicy>,
}
