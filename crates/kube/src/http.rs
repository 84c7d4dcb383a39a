//! The metrics and health endpoints: `/metrics`, `/healthz`, `/readyz`, and the read-only
//! `/debug/caches`.
//!
//! Why separate liveness from readiness: a standby replica is alive (the kubelet must not kill
//! it) but, until its caches are synced and it knows who leads, it cannot take over at once —
//! that is what `/readyz` reports, so a rollout waits for it before stopping the old leader.

use crate::api::RequestCounts;
use crate::lease::LeaderState;
use crate::metrics::{render, MetricsSource, CONTENT_TYPE};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use pv_core::Controller;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Why the endpoint server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// What the endpoints read.
#[derive(Clone)]
pub struct Health {
    /// The controller.
    pub controller: Arc<Controller>,
    /// How many kinds have synced (see [`crate::Informers::synced_receiver`]).
    pub synced: watch::Receiver<usize>,
    /// Leadership, when leader election is on.
    pub leader: Option<watch::Receiver<LeaderState>>,
    /// The controller's request counters.
    pub requests: Option<Arc<RequestCounts>>,
    /// Shadow mode's decisions (`/shadow`), when it runs.
    pub shadow: Option<Arc<crate::shadow::Shadow>>,
}

impl Health {
    /// Each readiness check, as kube-controller-manager names its own: `ping`, `informer-sync`
    /// and, with leader election, `leaderElection`; `Err` says why a check fails.
    fn checks(&self) -> Vec<(&'static str, Result<(), String>)> {
        let synced = *self.synced.borrow();
        let informers = if synced < crate::informers::KINDS {
            Err(format!("informers not synced ({synced}/{})", crate::informers::KINDS))
        } else {
            Ok(())
        };
        let mut checks = vec![("ping", Ok(())), ("informer-sync", informers)];
        if let Some(l) = &self.leader {
            let s = l.borrow().clone();
            let leader = if !s.is_known() {
                Err("leadership not known yet".into())
            } else if s == LeaderState::Lost {
                Err("leadership lost".into())
            } else {
                Ok(())
            };
            checks.push(("leaderElection", leader));
        }
        checks
    }

    fn ready(&self) -> Result<(), String> {
        self.checks().into_iter().try_for_each(|(_, r)| r)
    }
}

async fn metrics(State(h): State<Health>) -> impl IntoResponse {
    let leader = h.leader.as_ref().map(|l| *l.borrow() == LeaderState::Leader);
    let body = render(&MetricsSource {
        controller: &h.controller,
        requests: h.requests.as_deref(),
        leader,
        shadow: h.shadow.as_deref(),
    });
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body)
}

/// `/debug/caches`: every volume and claim the controller caches, with the resourceVersion it
/// holds (`{"volumes": {"NAME": "RV"}, "claims": {"NS/NAME": "RV"}}`), so a test can compare
/// the caches with a fresh list from the API server. Reads only.
async fn debug_caches(State(h): State<Health>) -> impl IntoResponse {
    let c = &h.controller;
    let rv = |m: &pv_model::k8s::ObjectMeta| serde_json::Value::from(m.resource_version.clone().unwrap_or_default());
    let volumes: serde_json::Map<String, serde_json::Value> = c
        .caches()
        .volume_names()
        .into_iter()
        .filter_map(|n| c.caches().volume(&n).map(|v| (n, rv(&v.metadata))))
        .collect();
    let claims: serde_json::Map<String, serde_json::Value> = c
        .caches()
        .claim_keys()
        .into_iter()
        .filter_map(|k| c.caches().claim(&k).map(|v| (k.into(), rv(&v.metadata))))
        .collect();
    let body = serde_json::json!({ "volumes": volumes, "claims": claims }).to_string();
    ([(header::CONTENT_TYPE, "application/json")], body)
}

/// `/shadow`: shadow mode's report (counts, the last differences), or 404 when not in shadow
/// mode.
async fn shadow(State(h): State<Health>) -> (StatusCode, [(header::HeaderName, &'static str); 1], String) {
    let json = [(header::CONTENT_TYPE, "application/json")];
    match &h.shadow {
        Some(s) => (StatusCode::OK, json, s.report().to_string()),
        None => (StatusCode::NOT_FOUND, json, r#"{"error":"not in shadow mode (run --shadow)"}"#.into()),
    }
}

async fn healthz() -> &'static str {
    "ok"
}

/// `/readyz`: `ok`, or 503 with why; with `?verbose`, each check on its own line as
/// kube-controller-manager lists them (`[+]ping ok`, `[-]informer-sync failed: ...`).
async fn readyz(State(h): State<Health>, Query(q): Query<HashMap<String, String>>) -> (StatusCode, String) {
    let ready = h.ready();
    let code = if ready.is_ok() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    if !q.contains_key("verbose") {
        return (code, ready.err().unwrap_or_else(|| "ok".into()));
    }
    let mut body = String::new();
    for (name, r) in h.checks() {
        match r {
            Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
            Err(why) => body.push_str(&format!("[-]{name} failed: {why}\n")),
        }
    }
    body.push_str(if ready.is_ok() { "readyz check passed\n" } else { "readyz check failed\n" });
    (code, body)
}

/// Binds `addr` and serves the endpoints until `shutdown` resolves. Returns the bound address
/// (port 0 picks a free one) and the serving task.
pub async fn serve(
    addr: SocketAddr,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let (listener, bound) = bind(addr).await?;
    let app = router(health);
    let task = tokio::spawn(async move {
        let r = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "metrics server stopped");
        }
    });
    tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz");
    Ok((bound, task))
}

async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), Error> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| Error::Bind { addr, source })?;
    Ok((listener, bound))
}

fn router(health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/debug/caches", get(debug_caches))
        .route("/shadow", get(shadow))
        .with_state(health)
}

/// As [`serve`], over HTTPS with `tls`, each request authenticated and authorized by the API
/// server through `auth` (see [`crate::secure`]).
pub async fn serve_secure(
    addr: SocketAddr,
    health: Health,
    tls: Arc<rustls::ServerConfig>,
    auth: Arc<crate::secure::Delegated>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let (listener, bound) = bind(addr).await?;
    let task = crate::secure::spawn(listener, router(health), tls, auth, shutdown);
    tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz over HTTPS, authorized by the API server");
    Ok((bound, task))
}
