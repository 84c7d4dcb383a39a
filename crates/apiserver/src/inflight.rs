//! Requests in flight, bounded as kube-apiserver's `--max-requests-inflight` and
//! `--max-mutating-requests-inflight` bound them.
//!
//! Two separate limits: reads (GET and HEAD: get, list) and mutations (every other method).
//! A request beyond its limit is not queued: it is answered at once with 429, `Retry-After: 1`
//! and the plain-text `Too many requests, please try again later.` kube-apiserver's filter
//! writes (client-go waits the `Retry-After` and retries). Watches are long-running and exempt,
//! as upstream exempts them; each holds only its bounded queue of undelivered events. A slot is
//! held until the response body has been sent or dropped, so a large response being written
//! still counts. A limit of 0 means no limit, as upstream. As in kube-apiserver, whose filter
//! runs after authentication, a request without the right token is not counted: it gets its
//! 401 (or, anonymous, the health probes and `/version`) at once.
//!
//! With the body limit this bounds what requests can cost at once: at most
//! `mutating × (3 MiB body + what it may expand into, see crate::shape)` for writes.
//! Unlike upstream, no client is exempt: `up` has a single credential, the administrator's, that
//! kube-apiserver would exempt as `system:masters`.

use crate::{auth, query};
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// kube-apiserver's default `--max-requests-inflight`.
pub const DEFAULT_MAX_READ_ONLY: usize = 400;
/// kube-apiserver's default `--max-mutating-requests-inflight`.
pub const DEFAULT_MAX_MUTATING: usize = 200;
/// The text of kube-apiserver's 429.
pub const TOO_MANY: &str = "Too many requests, please try again later.";

/// The two limits and their free slots.
pub struct InFlight {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    token: String,
}

impl InFlight {
    /// Limits of `read_only` and `mutating` requests at once (0 is no limit) for requests
    /// that carry `token`.
    pub fn new(read_only: usize, mutating: usize, token: &str) -> Self {
        let sem = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        InFlight { read_only: sem(read_only), mutating: sem(mutating), token: token.to_string() }
    }

    /// A slot for `req`: Ok(None) when it is not limited (a watch, or no limit), Err when its
    /// limit is reached.
    fn admit(&self, req: &Request) -> Result<Option<OwnedSemaphorePermit>, ()> {
        let read_only = matches!(*req.method(), Method::GET | Method::HEAD);
        let watch = read_only && query::parse_query(req.uri()).is_ok_and(|q| query::flag(&q, "watch"));
        let authenticated = matches!(auth::credential(req.headers(), &self.token), auth::Credential::Valid);
        let limit = match (watch, read_only) {
            _ if !authenticated => None,
            (true, _) => None,
            (_, true) => self.read_only.as_ref(),
            _ => self.mutating.as_ref(),
        };
        match limit {
            None => Ok(None),
            Some(s) => s.clone().try_acquire_owned().map(Some).map_err(|_| ()),
        }
    }
}

/// kube-apiserver's answer beyond the limit.
pub fn too_many_requests() -> Response {
    let mut resp = (StatusCode::TOO_MANY_REQUESTS, format!("{TOO_MANY}\n")).into_response();
    let h = resp.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

/// The middleware: admits the request or answers 429.
pub async fn limit(State(limits): State<Arc<InFlight>>, req: Request, next: Next) -> Response {
    match limits.admit(&req) {
        Err(()) => {
            tracing::debug!(method = %req.method(), path = %req.uri().path(), "too many requests in flight");
            too_many_requests()
        }
        Ok(None) => next.run(req).await,
        Ok(Some(permit)) => next.run(req).await.map(|body| Body::new(Held { body, _permit: permit })),
    }
}

/// A response body that holds its request's slot until it is sent or dropped.
struct Held {
    body: Body,
    _permit: OwnedSemaphorePermit,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;
    use axum::Router;
    use tokio::sync::Notify;
    use tower::ServiceExt;

    /// A server whose every request waits for `release`, behind limits of one read and one write.
    fn app(release: Arc<Notify>) -> Router {
        let handler = move || {
            let release = release.clone();
            async move {
                release.notified().await;
                "done"
            }
        };
        Router::new()
            .fallback(handler)
            .layer(axum::middleware::from_fn_with_state(Arc::new(InFlight::new(1, 1, "t")), limit))
    }

    fn req(method: Method, uri: &str) -> Request {
        let auth = (header::AUTHORIZATION, "Bearer t");
        Request::builder().method(method).uri(uri).header(auth.0, auth.1).body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn beyond_the_limit_a_request_gets_429_with_retry_after_and_watches_are_exempt() {
        let release = Arc::new(Notify::new());
        let app = app(release.clone());
        // One slow read and one slow write take both slots.
        let slow_read = tokio::spawn(app.clone().oneshot(req(Method::GET, "/api/v1/pods")));
        let slow_write = tokio::spawn(app.clone().oneshot(req(Method::POST, "/api/v1/namespaces/d/pods")));
        tokio::task::yield_now().await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        for (method, uri) in [(Method::GET, "/api/v1/pods/a"), (Method::DELETE, "/api/v1/namespaces/d/pods/a")] {
            let resp = app.clone().oneshot(req(method.clone(), uri)).await.unwrap();
            assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{method}");
            assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
            let body = to_bytes(resp.into_body(), 1024).await.unwrap();
            assert_eq!(body, "Too many requests, please try again later.\n");
        }
        // A request without the token is not counted (the server answers its 401).
        let anonymous = Request::builder().uri("/api/v1/pods").body(Body::empty()).unwrap();
        let pending = tokio::spawn(app.clone().oneshot(anonymous));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!pending.is_finished(), "served, not refused");
        // A watch is long-running: not counted, not refused.
        let watch = tokio::spawn(app.clone().oneshot(req(Method::GET, "/api/v1/pods?watch=true")));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!watch.is_finished(), "the watch is being served, not refused");
        release.notify_waiters();
        for r in [slow_read, slow_write, watch, pending] {
            assert_eq!(r.await.unwrap().unwrap().status(), StatusCode::OK);
        }
        // Slots are given back once the responses are done.
        let next = tokio::spawn(app.clone().oneshot(req(Method::GET, "/api/v1/pods")));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        release.notify_waiters();
        assert_eq!(next.await.unwrap().unwrap().status(), StatusCode::OK);
    }
}
