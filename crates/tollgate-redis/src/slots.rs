//! [`RedisSlots`]: concurrency limits shared by every gateway on one Redis
//! (or Redis Cluster), as leases. Each limited key's slots are one sorted
//! set, `PREFIX:{DIGEST}:f` (the key hashed as the store hashes every key,
//! so no key reaches Redis), of lease ids scored by when they end, on
//! Redis's own clock (`TIME`, read in the script: gateways need not agree on
//! the time). The rule is core's (`tollgate_core::SlotStore`): a slot is
//! granted while fewer than `max` live leases are held, and a lease ends
//! `lease_ttl` after it was granted or renewed. A task renews this process's
//! leases every third of `lease_ttl`, so a live gateway keeps its slots for
//! requests of any length and a dead one loses them within `lease_ttl`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::Script;
use tollgate_core::{SlotLease, SlotStore, StoreError, StoreFuture};

use crate::ca_file::read_ca_file;
use crate::config::RedisConfig;
use crate::connection::{Connection, Target, unavailable};
use crate::keys::{KeyNames, Space};
use crate::store::RedisStoreError;

/// Grants a lease: `KEYS[1]` the key's set, `ARGV` max, the lease's time to
/// live (ms) and its id. Ended leases are dropped first; 1 if granted.
const ACQUIRE: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
if redis.call('ZADD', KEYS[1], 'NX', now + ttl, ARGV[3]) == 0 then return 0 end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
";

/// Renews the leases `ARGV[2..]` of `KEYS[1]` still held (an ended one is
/// not revived): each then ends `ARGV[1]` ms from now. The count renewed.
const RENEW: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[1])
local renewed = 0
for index = 2, #ARGV do
    local ends = redis.call('ZSCORE', KEYS[1], ARGV[index])
    if ends and tonumber(ends) > now then
        redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[index])
        renewed = renewed + 1
    end
end
if renewed > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return renewed
";

/// Slots kept in Redis as leases; see the module's documentation.
pub struct RedisSlots {
    shared: Arc<Shared>,
    renewal: tokio::task::JoinHandle<()>,
}

struct Shared {
    connection: Connection,
    cluster: bool,
    acquire: Script,
    renew: Script,
    prefix: String,
    secret: Option<Vec<u8>>,
    timeout: Duration,
    lease_ttl: Duration,
    /// This process's leases: id to the Redis key of their set.
    leases: Mutex<HashMap<u64, String>>,
    /// Leases taken out of `leases` whose `ZREM` has not answered yet: still
    /// held in Redis, so still counted by `held`.
    releasing: AtomicU64,
    /// 64 random bits (the OS's randomness, through `RandomState`) before
    /// every lease's member in Redis, `PROCESS:ID`: two gateways' leases
    /// never meet (and `ZADD NX` refuses a member that did).
    process: u64,
    next: AtomicU64,
}

impl std::fmt::Debug for RedisSlots {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RedisSlots")
            .field("prefix", &self.shared.prefix)
            .field("lease_ttl", &self.shared.lease_ttl)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisSlots {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

impl RedisSlots {
    /// Slots at `config`'s URL under its prefix (and key secret), each
    /// lease lasting `lease_ttl` (at least 3 ms) unless renewed. Must be
    /// called inside a Tokio runtime: the renewal task starts here.
    ///
    /// # Errors
    ///
    /// [`RedisStoreError`] for a URL, prefix or CA file that cannot be used
    /// (the connection itself is made lazily).
    pub fn connect(config: &RedisConfig, lease_ttl: Duration) -> Result<Self, RedisStoreError> {
        if config.prefix.contains(['{', '}']) {
            return Err(RedisStoreError::Prefix(config.prefix.clone()));
        }
        let target = Target::parse(&config.url).map_err(RedisStoreError::Url)?;
        let root_certificates = match &config.ca_file {
            None => None,
            Some(path) => Some(read_ca_file(path).map_err(RedisStoreError::CaFile)?),
        };
        let (connection, _) =
            Connection::open_with(&target, config.timeout, root_certificates.as_deref())
                .map_err(|error| RedisStoreError::Url(error.to_string()))?;
        let process = {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        };
        let shared = Arc::new(Shared {
            cluster: connection.is_cluster(),
            connection,
            acquire: Script::new(ACQUIRE),
            renew: Script::new(RENEW),
            prefix: config.prefix.clone(),
            secret: config
                .key_secret
                .as_ref()
                .map(|secret| secret.as_bytes().to_vec()),
            timeout: config.timeout,
            lease_ttl: lease_ttl.max(Duration::from_millis(3)),
            leases: Mutex::new(HashMap::new()),
            releasing: AtomicU64::new(0),
            process,
            next: AtomicU64::new(1),
        });
        let renewal = tokio::spawn(renew_forever(Arc::downgrade(&shared)));
        Ok(RedisSlots { shared, renewal })
    }

    /// Gives `lease` back and waits for Redis to have it ([`SlotStore::release`]
    /// does this in the background).
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis does not answer in time: the
    /// lease then ends with its TTL (it is no longer renewed).
    pub async fn release_now(&self, lease: SlotLease) -> Result<(), StoreError> {
        self.shared.release(&lease).await
    }

    /// How long a lease lasts unless renewed.
    pub fn lease_ttl(&self) -> Duration {
        self.shared.lease_ttl
    }
}

/// A release under way, counted in `Shared::releasing` until dropped.
struct Releasing<'a>(&'a AtomicU64);

impl Drop for Releasing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    fn set_name(&self, key: &str) -> String {
        KeyNames::new(&self.prefix, Space::Policy, key, self.secret.as_deref()).in_flight()
    }

    /// The member of lease `id` in its set: `PROCESS:ID`, in hexadecimal.
    fn member(&self, id: u64) -> String {
        format!("{:016x}:{id:x}", self.process)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.lease_ttl.as_millis()).unwrap_or(u64::MAX)
    }

    async fn call<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection.clone();
        let call = invocation.invoke_async::<T>(&mut connection);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(unavailable(&error, self.cluster)),
            Err(_) => Err(StoreError::Unavailable(
                "Redis did not answer in time".to_owned(),
            )),
        }
    }

    /// Removes `lease` from its set (and from this process's list).
    async fn release(&self, lease: &SlotLease) -> Result<(), StoreError> {
        let set = {
            let mut leases = self.leases.lock();
            let Some(set) = leases.remove(&lease.id) else {
                return Ok(());
            };
            self.releasing.fetch_add(1, Ordering::SeqCst);
            set
        };
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("ZREM");
        command.arg(&set).arg(self.member(lease.id));
        // Counted as held until Redis answers, or the call is dropped.
        let _releasing = Releasing(&self.releasing);
        let call = command.query_async::<i64>(&mut connection);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(unavailable(&error, self.cluster)),
            Err(_) => Err(StoreError::Unavailable(
                "Redis did not answer in time".to_owned(),
            )),
        }
    }

    /// Renews every lease this process holds, one call per key's set, the
    /// calls sent together (pipelined on the multiplexed connection).
    async fn renew_all(&self) {
        let mut by_set: HashMap<String, Vec<u64>> = HashMap::new();
        for (id, set) in self.leases.lock().iter() {
            by_set.entry(set.clone()).or_default().push(*id);
        }
        let calls = by_set.into_iter().map(|(set, ids)| async move {
            let count = ids.len();
            let mut invocation = self.renew.key(&set);
            invocation.arg(self.ttl_ms());
            for id in ids {
                invocation.arg(self.member(id));
            }
            match self.call::<i64>(invocation).await {
                Ok(renewed) => count.saturating_sub(usize::try_from(renewed).unwrap_or(0)),
                Err(error) => {
                    tracing::warn!(%error, "in-flight leases not renewed; they end with their TTL");
                    0
                }
            }
        });
        let lost: usize = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .sum();
        if lost > 0 {
            tracing::warn!(
                lost,
                "in-flight leases had ended before their renewal (Redis stalled or failed over \
                 longer than lease_ttl): their slots may be granted again while their requests run"
            );
        }
    }
}

/// Renews the leases every third of their TTL while the slots live.
async fn renew_forever(shared: std::sync::Weak<Shared>) {
    loop {
        let Some(period) = shared.upgrade().map(|shared| shared.lease_ttl / 3) else {
            return;
        };
        tokio::time::sleep(period).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        shared.renew_all().await;
    }
}

/// A lease asked for and not yet answered: dropped unanswered (a timeout,
/// an error, the caller gone), it removes the lease's member in the
/// background, whether or not Redis granted it.
struct PendingLease {
    shared: Arc<Shared>,
    set: Option<String>,
    id: u64,
}

impl Drop for PendingLease {
    fn drop(&mut self) {
        let Some(set) = self.set.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let member = shared.member(self.id);
        runtime.spawn(async move {
            let mut connection = shared.connection.clone();
            let mut command = redis::cmd("ZREM");
            command.arg(&set).arg(member);
            let call = command.query_async::<i64>(&mut connection);
            if !matches!(tokio::time::timeout(shared.timeout, call).await, Ok(Ok(_))) {
                tracing::warn!(
                    "an unanswered in-flight lease was not removed; it ends with its TTL"
                );
            }
        });
    }
}

impl SlotStore for RedisSlots {
    fn acquire<'a>(&'a self, key: &'a str, max: u64) -> StoreFuture<'a, Option<SlotLease>> {
        Box::pin(async move {
            let shared = &self.shared;
            let id = shared.next.fetch_add(1, Ordering::Relaxed);
            let set = shared.set_name(key);
            // Until Redis has answered, the lease may exist there unknown to
            // this process (a reply lost to the timeout, a caller gone):
            // the pending lease removes it then, rather than let it hold a
            // slot for its whole TTL.
            let mut pending = PendingLease {
                shared: Arc::clone(shared),
                set: Some(set.clone()),
                id,
            };
            let mut invocation = shared.acquire.key(&set);
            invocation
                .arg(max)
                .arg(shared.ttl_ms())
                .arg(shared.member(id));
            let granted: i64 = shared.call(invocation).await?;
            pending.set = None;
            if granted != 1 {
                return Ok(None);
            }
            shared.leases.lock().insert(id, set);
            Ok(Some(SlotLease {
                key: key.to_owned(),
                id,
            }))
        })
    }

    fn release(&self, lease: SlotLease) {
        let shared = Arc::clone(&self.shared);
        let removal = async move {
            if shared.release(&lease).await.is_err() {
                tracing::warn!("an in-flight lease was not released; it ends with its TTL");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(removal);
            }
            Err(_) => {
                tracing::warn!("an in-flight lease released outside a runtime ends with its TTL")
            }
        }
    }

    fn held(&self) -> u64 {
        let leases = self.shared.leases.lock();
        leases.len() as u64 + self.shared.releasing.load(Ordering::SeqCst)
    }
}
