//! The admin listener: the admin API and the operations endpoints
//! (`/metrics`, `/healthz`, `/readyz`), the admin calls on route budgets, and
//! the guard that limits failed admin calls per client address.

mod dashboard;
pub(crate) mod endpoints;
pub(crate) mod guard;
pub(crate) mod route_budget;
mod top;
