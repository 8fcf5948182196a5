//! The cfgs `has_redis` and `has_redis_cluster` for this package's Redis
//! tests (`tests/gateway_redis.rs`), set as for the Redis store's own tests:
//! see `crates/tollgate-redis/build.rs`.

include!("crates/tollgate-redis/build/redis_peers.rs");
