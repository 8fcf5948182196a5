//! One request to the gateway's listener, from its arrival to its decision:
//! the entry ([`handle`](handle::handle)), the path's normal form, the route
//! table, the API key, admission (plan and route budget together), shadow
//! mode, the rate-limit headers, the decision endpoint for proxies that ask
//! first (forward-auth) and tollgate's own problem answers.

pub(crate) mod admission;
pub(crate) mod api_key;
pub(crate) mod charge;
pub(crate) mod delay;
pub(crate) mod forward_auth;
pub(crate) mod forward_auth_endpoint;
pub(crate) mod handle;
pub(crate) mod header_key;
pub(crate) mod in_flight;
pub(crate) mod in_flight_limit;
pub(crate) mod path;
pub(crate) mod problem;
pub(crate) mod rate_limit_headers;
pub(crate) mod routes;
pub(crate) mod shadow;
