//! The gateway's shared state and its request handler: route, limit, forward.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};
use tollgate_core::Store;
use tollgate_tower::Problem;

use super::client::ClientConnection;
use super::config::{ServeConfig, ServeConfigError};
use super::proxy::Proxy;
use super::restart::{self, StartSettings};
use super::runtime::Runtime;
use super::{demo, limit, path};
use std::borrow::Cow;

/// Everything the listeners share.
pub(crate) struct App {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) runtime: ArcSwap<Runtime>,
    /// Set once shutdown has begun: `/readyz` answers 503.
    pub(crate) draining: AtomicBool,
    /// The admin API's bearer token; `None` refuses every admin call.
    pub(crate) admin_token: Option<String>,
    /// The file to read again on SIGHUP.
    pub(crate) config_path: Option<PathBuf>,
    /// The settings a reload cannot change.
    pub(crate) started: StartSettings,
    /// The Redis URL given outside the file, which stands for the file's.
    pub(crate) store_url: Option<String>,
}

impl App {
    /// Reads the configuration file again and puts it in force; an invalid
    /// file changes nothing.
    pub(crate) fn reload(&self) -> Result<(), ServeConfigError> {
        let Some(path) = &self.config_path else {
            return Err(ServeConfigError::Invalid(
                "no configuration file to reload: started on the built-in defaults".into(),
            ));
        };
        let mut config = ServeConfig::from_file(path)?;
        config.override_store_url(self.store_url.as_deref());
        let tiers_before = self.runtime.load().tier_names.clone();
        self.apply(&config)
            .map_err(|error| ServeConfigError::File {
                path: path.display().to_string(),
                reason: Box::new(error),
            })?;
        for warning in config.warnings(self.started.in_memory_store()) {
            tracing::warn!("{warning}");
        }
        for tier in restart::removed_tiers(&tiers_before, &config) {
            tracing::warn!(
                tier,
                "this tier is no longer configured: keys assigned to it are held to the \
                 default policy until assigned another tier"
            );
        }
        let kept = self
            .started
            .kept_until_restart(&config, restart::admin_token(&config).as_deref());
        if !kept.is_empty() {
            tracing::warn!(
                settings = kept.join(", "),
                "these changed settings keep their old values until a restart"
            );
        }
        Ok(())
    }

    /// Puts `config` in force: the runtime is built first, so a failure
    /// changes nothing. Listen addresses and the admin token stay as they were.
    pub(crate) fn apply(&self, config: &ServeConfig) -> Result<(), ServeConfigError> {
        let runtime = Runtime::build(config, self.store.as_ref())?;
        self.store.reconfigure(&config.limits)?;
        self.runtime.store(Arc::new(runtime));
        Ok(())
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
}

/// What one worker thread's handlers see: the shared state, and the worker's
/// own upstream connections.
#[derive(Clone)]
pub(crate) struct Worker {
    pub(crate) app: Arc<App>,
    pub(crate) proxy: Proxy,
}

/// Every request to the gateway's listener, from `client`.
pub(crate) async fn handle(
    Worker { app, proxy }: Worker,
    client: Arc<ClientConnection>,
    request: Request,
) -> Response {
    if request.method() == Method::CONNECT {
        // A tunnel is not an API request: nothing to limit or to route.
        return Problem::new(
            StatusCode::NOT_IMPLEMENTED,
            "tollgate is a reverse proxy and does not open tunnels (CONNECT)",
        )
        .into_response()
        .map(Body::new);
    }
    let peer = client.peer;
    let runtime = app.runtime.load_full();
    let mut request = request;
    // Routes see, and upstreams get, the path in one normal form.
    match path::normalize(request.uri().path()) {
        Ok(Cow::Borrowed(_)) => {}
        Ok(Cow::Owned(normal)) => match with_path(request.uri(), &normal) {
            Some(uri) => *request.uri_mut() = uri,
            None => return bad_request("the path cannot be read"),
        },
        Err(reason) => return bad_request(reason),
    }
    let route = runtime.routes.find(request.uri().path());
    if route.is_none() && !runtime.routes.is_empty() {
        let detail = format!("no route matches {}", request.uri().path());
        return Problem::new(StatusCode::NOT_FOUND, detail)
            .into_response()
            .map(Body::new);
    }
    let headers = match limit::admit(&app, &runtime, route, request.headers(), peer).await {
        Ok(headers) => headers,
        Err(response) => return response,
    };
    let mut response = match route {
        Some(route) => {
            proxy
                .forward(&client, route, request, &runtime.upstream)
                .await
        }
        None => demo::respond(&request),
    };
    headers.insert_into(response.headers_mut());
    response
}

/// `uri` with its path replaced by `path` (the query kept).
fn with_path(uri: &http::Uri, path: &str) -> Option<http::Uri> {
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

fn bad_request(detail: &str) -> Response {
    Problem::new(StatusCode::BAD_REQUEST, detail)
        .into_response()
        .map(Body::new)
}
