//! The endpoints over HTTPS with delegated authentication and authorization, as
//! kube-controller-manager serves its secure port.
//!
//! Why: `/metrics` tells anyone who can reach it how many volumes and claims exist, by class;
//! kube-controller-manager therefore serves it only over TLS to callers the API server vouches
//! for. The rules are upstream's delegated authn/authz (`k8s.io/apiserver`'s
//! `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`):
//! - a bearer token is checked with a `TokenReview`; a request without one is the anonymous user
//!   (`system:anonymous`, group `system:unauthenticated`); a token the API server rejects is 401;
//! - the user is then checked with a `SubjectAccessReview` for verb `get` on the non-resource
//!   path (`/metrics`); a denial is 403 `forbidden: User "..." cannot get path "/metrics"`;
//! - `/healthz`, `/readyz` and `/livez` need no authorization (the kubelet probes them), and the
//!   group `system:masters` is allowed everything without a review;
//! - both answers are cached for 10 seconds, so a scraper costs at most one review of each kind
//!   per 10 s.
//!
//! The certificate is the one given (`--tls-cert-file`, `--tls-private-key-file`), else a
//! self-signed one made at start, as kube-controller-manager makes when it is given none.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::PostParams;
use kube::{Api, Client};
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_rustls::TlsAcceptor;

/// How long a review's answer is reused (upstream's default for both).
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Answers remembered at most (per kind of review).
const CACHE_ENTRIES: usize = 1024;
/// Paths served without authorization, as upstream's default `AlwaysAllowPaths`.
pub const ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];
/// A group allowed everything without a review, as upstream's default `AlwaysAllowGroups`.
const ALWAYS_ALLOW_GROUP: &str = "system:masters";
/// Bound on each review request.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on a TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why secure serving could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate or key file could not be read or used.
    #[error("{path}: {message}")]
    File {
        /// File.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Making the self-signed certificate failed.
    #[error("self-signed certificate: {0}")]
    SelfSigned(String),
    /// rustls refused the certificate or key.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The TLS configuration: from PEM files, or self-signed for `localhost`, the loopback
/// addresses and the host name.
pub fn tls_config(files: Option<(&Path, &Path)>) -> Result<Arc<rustls::ServerConfig>, Error> {
    let (chain, key) = match files {
        Some((cert, key)) => {
            let file_err = |p: &Path, message: String| Error::File { path: p.display().to_string(), message };
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<_, _>>())
                .map_err(|e| file_err(cert, e.to_string()))?;
            if chain.is_empty() {
                return Err(file_err(cert, "no certificate in the file".into()));
            }
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err(key, e.to_string()))?;
            (chain, key)
        }
        None => self_signed()?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| Error::Config(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
    let e = |e: rcgen::Error| Error::SelfSigned(e.to_string());
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if let Some(host) = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()) {
        if !host.is_empty() && !names.contains(&host) {
            names.push(host);
        }
    }
    let mut params = rcgen::CertificateParams::new(names).map_err(e)?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "pv-controller");
    let key = rcgen::KeyPair::generate().map_err(e)?;
    let cert = params.self_signed(&key).map_err(e)?;
    let key =
        PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).map_err(|x| Error::Config(x.to_string()))?;
    Ok((vec![cert.der().clone()], key))
}

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// `username`.
    pub name: String,
    /// `uid`.
    pub uid: Option<String>,
    /// `groups`.
    pub groups: Vec<String>,
    /// `extra`.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    fn anonymous() -> Self {
        User {
            name: "system:anonymous".into(),
            uid: None,
            groups: vec!["system:unauthenticated".into()],
            extra: Default::default(),
        }
    }

    fn from_info(u: UserInfo) -> Self {
        User {
            name: u.username.unwrap_or_default(),
            uid: u.uid,
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default(),
        }
    }
}

/// A TTL cache of review answers, bounded in size.
struct Cache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: std::hash::Hash + Eq, V: Clone> Cache<K, V> {
    fn new() -> Self {
        Cache { entries: Mutex::new(HashMap::new()) }
    }

    fn get(&self, k: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap();
        entries.get(k).filter(|(_, at)| at.elapsed() < CACHE_TTL).map(|(v, _)| v.clone())
    }

    fn put(&self, k: K, v: V) {
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= CACHE_ENTRIES {
            entries.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
        }
        if entries.len() < CACHE_ENTRIES {
            entries.insert(k, (v, Instant::now()));
        }
    }
}

/// Authentication and authorization delegated to the API server.
pub struct Delegated {
    token_reviews: Api<TokenReview>,
    access_reviews: Api<SubjectAccessReview>,
    /// token → the user, or None when the API server rejected it.
    authn: Cache<String, Option<User>>,
    /// (user, path) → allowed.
    authz: Cache<(String, Vec<String>, String), bool>,
}

/// The outcome of checking one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Allow,
    /// 401: the token was not accepted.
    Unauthorized,
    /// 403, with upstream's message.
    Forbidden(String),
    /// 500: a review could not be made.
    Error(String),
}

impl Delegated {
    /// Reviews through `client`.
    pub fn new(client: Client) -> Self {
        Delegated {
            token_reviews: Api::all(client.clone()),
            access_reviews: Api::all(client),
            authn: Cache::new(),
            authz: Cache::new(),
        }
    }

    async fn authenticate(&self, token: &str) -> Result<Option<User>, String> {
        if let Some(u) = self.authn.get(&token.to_string()) {
            return Ok(u);
        }
        let review =
            TokenReview { spec: TokenReviewSpec { token: token.into(), audiences: None }, ..Default::default() };
        let answer = bounded(self.token_reviews.create(&PostParams::default(), &review)).await?;
        let status = answer.status.unwrap_or_default();
        let user = match status.authenticated {
            Some(true) => Some(User::from_info(status.user.unwrap_or_default())),
            _ => None,
        };
        self.authn.put(token.into(), user.clone());
        Ok(user)
    }

    async fn authorize(&self, user: &User, path: &str) -> Result<bool, String> {
        if user.groups.iter().any(|g| g == ALWAYS_ALLOW_GROUP) {
            return Ok(true);
        }
        let key = (user.name.clone(), user.groups.clone(), path.to_string());
        if let Some(a) = self.authz.get(&key) {
            return Ok(a);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.into()),
                    verb: Some("get".into()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let answer = bounded(self.access_reviews.create(&PostParams::default(), &review)).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        self.authz.put(key, allowed);
        Ok(allowed)
    }

    /// Checks a GET of `path` with the `Authorization` header `authorization`.
    pub async fn check(&self, path: &str, authorization: Option<&str>) -> Verdict {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let user = match token {
            None => User::anonymous(),
            Some(t) => match self.authenticate(t).await {
                Ok(Some(u)) => u,
                Ok(None) => return Verdict::Unauthorized,
                Err(e) => {
                    tracing::warn!(error = %e, "token review failed");
                    return Verdict::Unauthorized;
                }
            },
        };
        if ALWAYS_ALLOW_PATHS.contains(&path) {
            return Verdict::Allow;
        }
        match self.authorize(&user, path).await {
            Ok(true) => Verdict::Allow,
            Ok(false) => Verdict::Forbidden(format!("forbidden: User {:?} cannot get path {path:?}", user.name)),
            Err(e) => {
                tracing::warn!(error = %e, "subject access review failed");
                Verdict::Error(format!("authorization failed: {e}"))
            }
        }
    }
}

async fn bounded<T>(fut: impl Future<Output = kube::Result<T>>) -> Result<T, String> {
    match tokio::time::timeout(REVIEW_TIMEOUT, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("timed out after {REVIEW_TIMEOUT:?}")),
    }
}

/// A `Status` body, as the API server's filters answer.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": {}, "code": code.as_u16(),
    });
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn guard(State(auth): State<Arc<Delegated>>, req: Request, next: Next) -> Response {
    let authorization = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    match auth.check(req.uri().path(), authorization.as_deref()).await {
        Verdict::Allow => next.run(req).await,
        Verdict::Unauthorized => status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized"),
        Verdict::Forbidden(m) => status(StatusCode::FORBIDDEN, "Forbidden", &m),
        Verdict::Error(m) => status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &m),
    }
}

/// Serves `app` over TLS on `listener`, every request checked by `auth`, until `shutdown`.
pub fn spawn(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    auth: Arc<Delegated>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let app: Router<()> = app.layer(axum::middleware::from_fn_with_state(auth, guard));
    let acceptor = TlsAcceptor::from(tls);
    tokio::spawn(async move {
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => return,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move { serve_connection(stream, peer, acceptor, app).await });
        }
    })
}

async fn serve_connection(stream: tokio::net::TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, app: Router) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    let conn = http.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
    if let Err(e) = conn.await {
        tracing::debug!(%peer, error = %e, "connection ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use serde_json::{json, Value};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Reviews the fake API server answered, by kind.
    #[derive(Default)]
    struct Seen {
        token_reviews: AtomicUsize,
        access_reviews: AtomicUsize,
        last_access_review: Mutex<Value>,
    }

    fn json_response(v: Value) -> Response {
        ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
    }

    /// An API server that knows two tokens: `reader` (may get /metrics) and `other` (may not),
    /// and `admin` in group system:masters.
    async fn fake_api_server() -> (Client, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        let (s1, s2) = (seen.clone(), seen.clone());
        let app = Router::new()
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                post(move |body: String| async move {
                    let review: Value = serde_json::from_str(&body).unwrap();
                    s1.token_reviews.fetch_add(1, Ordering::SeqCst);
                    let status = match review["spec"]["token"].as_str() {
                        Some("reader") => json!({"authenticated": true, "user": {"username": "reader", "groups": ["g"]}}),
                        Some("other") => json!({"authenticated": true, "user": {"username": "other"}}),
                        Some("admin") => json!({"authenticated": true, "user": {"username": "admin", "groups": ["system:masters"]}}),
                        _ => json!({"authenticated": false, "error": "invalid bearer token"}),
                    };
                    json_response(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": review["spec"], "status": status}))
                }),
            )
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(move |body: String| async move {
                    let review: Value = serde_json::from_str(&body).unwrap();
                    s2.access_reviews.fetch_add(1, Ordering::SeqCst);
                    *s2.last_access_review.lock().unwrap() = review["spec"].clone();
                    let allowed = review["spec"]["user"] == "reader"
                        && review["spec"]["nonResourceAttributes"] == json!({"path": "/metrics", "verb": "get"});
                    json_response(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                "spec": review["spec"], "status": {"allowed": allowed}}))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        (client, seen)
    }

    #[tokio::test]
    async fn requests_are_authenticated_and_authorized_by_the_api_server_as_upstreams_delegation() {
        let (client, seen) = fake_api_server().await;
        let auth = Delegated::new(client);
        assert_eq!(auth.check("/metrics", Some("Bearer reader")).await, Verdict::Allow);
        assert_eq!(
            *seen.last_access_review.lock().unwrap(),
            json!({"user": "reader", "groups": ["g"], "nonResourceAttributes": {"path": "/metrics", "verb": "get"}})
        );
        assert_eq!(
            auth.check("/metrics", Some("Bearer other")).await,
            Verdict::Forbidden(r#"forbidden: User "other" cannot get path "/metrics""#.into())
        );
        assert_eq!(auth.check("/metrics", Some("Bearer forged")).await, Verdict::Unauthorized);
        // No token: the anonymous user, whom the API server denies here.
        assert_eq!(
            auth.check("/metrics", None).await,
            Verdict::Forbidden(r#"forbidden: User "system:anonymous" cannot get path "/metrics""#.into())
        );
        assert_eq!(seen.last_access_review.lock().unwrap()["groups"], json!(["system:unauthenticated"]));
        // Probes need no authorization, but a bad token is still refused.
        let reviews = seen.access_reviews.load(Ordering::SeqCst);
        assert_eq!(auth.check("/healthz", None).await, Verdict::Allow);
        assert_eq!(auth.check("/readyz", Some("Bearer other")).await, Verdict::Allow);
        assert_eq!(auth.check("/livez", Some("Bearer forged")).await, Verdict::Unauthorized);
        // system:masters needs no review.
        assert_eq!(auth.check("/metrics", Some("Bearer admin")).await, Verdict::Allow);
        assert_eq!(seen.access_reviews.load(Ordering::SeqCst), reviews, "no access review for probes or masters");
    }

    #[tokio::test]
    async fn answers_are_reused_for_ten_seconds() {
        let (client, seen) = fake_api_server().await;
        let auth = Delegated::new(client);
        for _ in 0..5 {
            assert_eq!(auth.check("/metrics", Some("Bearer reader")).await, Verdict::Allow);
            assert_eq!(auth.check("/metrics", Some("Bearer forged")).await, Verdict::Unauthorized);
        }
        assert_eq!(seen.token_reviews.load(Ordering::SeqCst), 2, "one token review per token");
        assert_eq!(seen.access_reviews.load(Ordering::SeqCst), 1, "one access review per user and path");
    }

    #[tokio::test]
    async fn the_endpoints_are_served_over_tls_with_the_status_bodies_of_the_api_server() {
        let (client, _) = fake_api_server().await;
        let app = Router::new().route("/metrics", axum::routing::get(|| async { "m 1\n" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = tls_config(None).unwrap();
        let _task = spawn(listener, app, tls, Arc::new(Delegated::new(client)), std::future::pending());
        let https = reqwest_like_get(addr, "/metrics", Some("reader")).await;
        assert_eq!((https.0, https.1.as_str()), (200, "m 1\n"));
        let denied = reqwest_like_get(addr, "/metrics", None).await;
        assert_eq!(denied.0, 403);
        let body: Value = serde_json::from_str(&denied.1).unwrap();
        assert_eq!(
            (body["kind"].as_str(), body["reason"].as_str(), body["code"].as_u64()),
            (Some("Status"), Some("Forbidden"), Some(403))
        );
        assert_eq!(reqwest_like_get(addr, "/metrics", Some("forged")).await.0, 401);
    }

    /// One HTTPS GET that trusts any certificate (the server's is self-signed): (status, body).
    async fn reqwest_like_get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        #[derive(Debug)]
        struct AnyCert;
        impl rustls::client::danger::ServerCertVerifier for AnyCert {
            fn verify_server_cert(
                &self,
                _: &CertificateDer<'_>,
                _: &[CertificateDer<'_>],
                _: &rustls::pki_types::ServerName<'_>,
                _: &[u8],
                _: rustls::pki_types::UnixTime,
            ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            fn verify_tls12_signature(
                &self,
                _: &[u8],
                _: &CertificateDer<'_>,
                _: &rustls::DigitallySignedStruct,
            ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
                Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
            }
            fn verify_tls13_signature(
                &self,
                _: &[u8],
                _: &CertificateDer<'_>,
                _: &rustls::DigitallySignedStruct,
            ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
                Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
            }
            fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
                rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert))
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut s = tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await.unwrap();
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
        let text = String::from_utf8_lossy(&buf).to_string();
        let status = text.split(' ').nth(1).unwrap().parse().unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            // One chunk: size line, data, then the terminator.
            body.split_once("\r\n").map(|(_, rest)| rest.split("\r\n").next().unwrap_or("").to_string()).unwrap()
        } else {
            body.to_string()
        };
        (status, body)
    }
}
