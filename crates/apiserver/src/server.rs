//! Starting and stopping the server: open the durable store, make sure the default namespaces
//! exist, load or make the token, bind, write the kubeconfig, serve until shutdown.

use crate::limits::{self, Limits};
use crate::{auth, conn, dispatch, durable, inflight, tls, AppState};
use axum::Router;
use pv_store::{Store, StoreError};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Namespaces every fresh store gets.
pub const DEFAULT_NAMESPACES: &[&str] = &["default", "kube-system"];

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The data directory could not be created.
    #[error("creating data directory {path}: {source}")]
    DataDir {
        /// Directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The durable store could not be opened.
    #[error(transparent)]
    Durable(#[from] durable::Error),
    /// A default namespace could not be created.
    #[error("creating namespace {name}: {source}")]
    Namespace {
        /// Namespace.
        name: String,
        /// Cause.
        #[source]
        source: StoreError,
    },
    /// The token file could not be read or written.
    #[error("token file {path}: {source}")]
    Token {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The listen address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The TLS CA or serving certificate could not be made.
    #[error(transparent)]
    Tls(#[from] tls::Error),
    /// The kubeconfig could not be written.
    #[error("writing kubeconfig {path}: {source}")]
    Kubeconfig {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Holds `store/`, `token`, `ca.crt`, `ca.key` and `kubeconfig`.
    pub data_dir: PathBuf,
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated CA (the default). Plain HTTP is for tests: client-go
    /// will not send the bearer token over it, so kubectl cannot authenticate.
    pub tls: bool,
    /// Connection and request bounds.
    pub limits: Limits,
    /// How long a commit waits, while other writes await theirs, for more writes to join its
    /// batch (see [`pv_store::StoreBuilder::commit_delay`]); zero turns it off.
    pub commit_delay: std::time::Duration,
}

/// `up`'s commit delay: under load, a commit (one fsync) waits this long for more writes.
pub const DEFAULT_COMMIT_DELAY: std::time::Duration = std::time::Duration::from_millis(2);

impl ServerConfig {
    /// HTTPS on `listen`, state under `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>, listen: SocketAddr) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            listen,
            tls: true,
            limits: Limits::default(),
            commit_delay: DEFAULT_COMMIT_DELAY,
        }
    }
}

/// The address clients should dial: loopback when bound to "any".
fn dial_addr(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(if a.is_ipv6() { std::net::Ipv6Addr::LOCALHOST.into() } else { std::net::Ipv4Addr::LOCALHOST.into() });
    }
    a
}

/// The API server.
pub struct Server;

/// A running server.
pub struct ServerHandle {
    store: Arc<Store>,
    url: String,
    addr: SocketAddr,
    kubeconfig: PathBuf,
    token: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<std::io::Result<()>>,
    writes: tokio_util::task::TaskTracker,
    finisher: Option<pv_store::NamespaceFinisher>,
}

/// Opens the durable store under `dir` (creating default namespaces on a fresh one), with the
/// object, history and watcher bounds of [`limits::store_limits`] and kube-apiserver's default
/// storage admission plugins (protection finalizers, default class, resize checks), and
/// `commit_delay` for its group commit.
pub fn open_store(dir: &Path, commit_delay: std::time::Duration) -> Result<Store, Error> {
    let (backend, snapshot) = durable::open(dir)?;
    // Owner only, as etcd keeps its data directory: the store holds Secrets.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let store = Store::builder()
        .backend(backend, snapshot)
        .commit_delay(commit_delay)
        .limits(limits::store_limits())
        .admission(pv_store::Admission::kube_apiserver())
        .build();
    for ns in DEFAULT_NAMESPACES {
        if store.get("namespaces", "", ns).is_err() {
            store
                .create("namespaces", json!({"metadata": {"name": ns}}))
                .map_err(|source| Error::Namespace { name: ns.to_string(), source })?;
        }
    }
    Ok(store)
}

impl Server {
    /// Starts serving; returns once the listener is bound and the kubeconfig written.
    pub async fn start(cfg: ServerConfig) -> Result<ServerHandle, Error> {
        let dir = &cfg.data_dir;
        std::fs::create_dir_all(dir).map_err(|source| Error::DataDir { path: dir.clone(), source })?;
        let store = Arc::new(open_store(&dir.join("store"), cfg.commit_delay)?);
        // kube-controller-manager's namespace controller, in-process: terminating namespaces
        // finish whatever empties them, and those a previous process left are resumed now.
        let finisher = Some(pv_store::NamespaceFinisher::start(store.clone()));
        let token_path = dir.join("token");
        let token =
            auth::load_or_create_token(&token_path).map_err(|source| Error::Token { path: token_path, source })?;
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| Error::Bind { addr: cfg.listen, source })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind { addr: cfg.listen, source })?;
        let tls = if cfg.tls { Some(tls::load_or_create(dir, addr)?) } else { None };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", dial_addr(addr));
        let kubeconfig = dir.join("kubeconfig");
        let ca = tls.as_ref().map(|t| t.ca_pem.as_str());
        auth::write_private(&kubeconfig, &auth::kubeconfig(&url, &token, ca))
            .map_err(|source| Error::Kubeconfig { path: kubeconfig.clone(), source })?;
        let (stop, stop_rx) = watch::channel(false);
        let writes = tokio_util::task::TaskTracker::new();
        let state = Arc::new(AppState {
            store: store.clone(),
            token: token.clone(),
            server_address: addr.to_string(),
            shutdown: stop_rx.clone(),
            pages: Default::default(),
            writes: writes.clone(),
            limits: cfg.limits,
        });
        let inflight = Arc::new(inflight::InFlight::new(
            cfg.limits.max_requests_inflight,
            cfg.limits.max_mutating_requests_inflight,
            &token,
        ));
        let app = Router::new()
            .fallback(dispatch::dispatch)
            .layer(axum::middleware::from_fn_with_state(inflight, inflight::limit))
            .with_state(state);
        let acceptor = tls.map(|t| t.acceptor);
        // apiextensions-apiserver's controllers, in-process: the custom resources of the stored
        // definitions are served from the first request on.
        crate::custom::serve_stored(&store);
        tokio::spawn(crate::custom::run(store.clone(), stop_rx.clone()));
        let task = tokio::spawn(conn::serve(listener, acceptor, app, cfg.limits, stop_rx));
        tracing::info!(%url, kubeconfig = %kubeconfig.display(), "API server listening");
        Ok(ServerHandle { store, url, addr, kubeconfig, token, stop, task, writes, finisher })
    }
}

impl ServerHandle {
    /// The store behind the API (for an in-process controller).
    pub fn store(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// `https://ADDR:PORT` (`http://` without TLS).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Path of the kubeconfig written for this server.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Stops accepting connections, ends open watches, waits for in-flight requests and for
    /// every write already handed to the store (also those whose client hung up).
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        let served = match self.task.await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        };
        self.writes.close();
        self.writes.wait().await;
        if let Some(f) = self.finisher.take() {
            // Stopping waits for the sweep in progress, which may wait for storage.
            let _ = tokio::task::spawn_blocking(move || drop(f)).await;
        }
        served
    }
}
