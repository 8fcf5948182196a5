//! The serving mechanisms every tollgate server shares (`tollgate serve`,
//! `tollgate rls`, and the next one), with none of tollgate's protocols in
//! them (no limit, route or descriptor): each server keeps its own protocol
//! (hyper, tonic), endpoints, settings and the signals it obeys, and takes
//! from here how it runs. The protocols here are serving a plain HTTP
//! listener with any tower service ([`http`]) and gRPC services on worker
//! threads ([`grpc`]).
//!
//! - [`workers`]: the worker count, and worker threads each running one
//!   single-threaded event loop whose end is bounded;
//! - [`accept`]: the accept loop's one error policy (shedding idle connections
//!   when out of file descriptors), with `TCP_NODELAY` on
//!   every connection;
//! - [`spread`]: the two ways connections are spread over workers
//!   (`SO_REUSEPORT` sockets, or one acceptor handing each connection to the
//!   worker with the fewest open);
//! - [`grpc`]: serving tonic services on worker threads by these rules, each
//!   call (a long-lived stream too) in flight on its connection;
//! - [`http`]: serving a plain HTTP listener (admin, health, debug pages)
//!   by these rules;
//! - [`idle`]: closing a connection that moves no byte for an idle timeout
//!   while none of its requests is in flight, in every phase of its life
//!   (and [`in_flight_body`], the response body that keeps its request in
//!   flight);
//! - [`first_bytes`]: telling an HTTP/1 client from an HTTP/2 one with
//!   prior knowledge by peeking its first bytes, so that HTTP/1 is served
//!   without hyper-util's `auto` detection on every read;
//! - [`graceful`]: a connection asked to close gracefully once its listener
//!   stops, the stop polled only on its own wakes (`own_wakes`, which the
//!   idle check shares);
//! - [`kept_timers`]: hyper's timer for one event loop's connections, whose
//!   timers (the head of every request is read against one) are kept and
//!   reset, not made and registered anew for each request;
//! - [`shed`]: the process's list of open connections, whose oldest idle one
//!   is closed when a listener is out of file descriptors;
//! - [`shutdown`]: stop accepting, drain for a grace period, then force;
//! - [`signals`]: the first and second of a list of signals;
//! - [`files`]: reading a file a configuration names, bounded, regular files
//!   only, so that no file given at start or on a reload stops a server;
//! - [`store`]: opening the limit store (memory, or Redis: one server, a
//!   cluster, TLS) and the one start line that says where limits are kept,
//!   credentials redacted by `tollgate_redis::redacted_url`.

#![forbid(unsafe_code)]

pub mod accept;
pub mod files;
pub mod first_bytes;
pub mod graceful;
pub mod grpc;
pub mod http;
pub mod idle;
pub mod idle_race;
pub mod in_flight_body;
pub mod kept_timers;
mod own_wakes;
pub mod shed;
pub mod shutdown;
pub mod signals;
pub mod spread;
pub mod store;
pub mod workers;

pub use accept::{ACCEPT_PAUSE, SHED_PAUSE, SHED_PER_SHORTAGE, accept, out_of_descriptors};
pub use files::{FileError, MAX_FILE_BYTES, read_regular_file};
pub use first_bytes::{FirstBytes, first_bytes};
pub use graceful::{CloseGracefully, close_when_stopped};
pub use grpc::serve_grpc;
pub use http::serve_http;
pub use idle::{Activity, ClosedWhenIdle, InFlight, Tracked, idle};
pub use idle_race::race_idle;
pub use in_flight_body::InFlightBody;
pub use kept_timers::KeptTimers;
pub use shed::Connections;
pub use shutdown::{Drained, Shutdown, Stopping};
pub use signals::Signals;
pub use spread::{FewestOpen, ListenError, Live, bind_reuse_port};
pub use store::{OpenStoreError, StoreLocation, open_store};
pub use workers::{EVENT_LOOP_END, MAX_WORKERS, WorkerThread, spawn_event_loop, worker_count};
