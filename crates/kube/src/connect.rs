//! Building a client the way kubectl does, and checking it works before anything starts.
//!
//! Why check first: a controller that starts with a wrong server address or refused credentials
//! would only log retrying watch errors forever. Failing at once with the server URL and the HTTP
//! status turns that into a one-line error an operator can act on.

use crate::token::ReloadingToken;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::ListParams;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use std::path::PathBuf;
use std::time::Duration;

/// Why no usable client could be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// File (or `KUBECONFIG`/default location).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Neither a kubeconfig nor an in-cluster service account was found.
    #[error("no kubeconfig found (tried KUBECONFIG, ~/.kube/config) and not running in a cluster: {0}")]
    Infer(String),
    /// The client could not be built from the configuration.
    #[error("building client for {url}: {message}")]
    Client {
        /// Server URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The server did not answer.
    #[error("cannot reach API server {url}: {message}")]
    Unreachable {
        /// Server URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The server answered with an error status (credentials refused, RBAC denied).
    #[error("API server {url} refused the request ({what}): HTTP {code} {reason}: {message}")]
    Refused {
        /// Server URL.
        url: String,
        /// The request.
        what: &'static str,
        /// HTTP status code.
        code: u16,
        /// Status reason.
        reason: String,
        /// Status message.
        message: String,
    },
}

/// Where the client configuration comes from.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// `--kubeconfig`; else `KUBECONFIG`, else `~/.kube/config`, else in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`; the kubeconfig's current context otherwise.
    pub context: Option<String>,
    /// `--cluster`; the context's cluster otherwise.
    pub cluster: Option<String>,
    /// `--user`; the context's user otherwise.
    pub user: Option<String>,
}

/// Loads the configuration as kubectl would.
pub async fn load_config(opts: &ClientOptions) -> Result<Config, Error> {
    let kco =
        KubeConfigOptions { context: opts.context.clone(), cluster: opts.cluster.clone(), user: opts.user.clone() };
    let mut config = if let Some(path) = &opts.kubeconfig {
        let shown = path.display().to_string();
        // Read the file here: kube's own read error quotes the path a second time.
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Kubeconfig { path: shown.clone(), message: e.to_string() })?;
        let kc = Kubeconfig::from_yaml(&text)
            .map_err(|e| Error::Kubeconfig { path: shown.clone(), message: e.to_string() })?;
        Config::from_custom_kubeconfig(kc, &kco)
            .await
            .map_err(|e| Error::Kubeconfig { path: shown, message: e.to_string() })?
    } else if opts.context.is_some() || opts.cluster.is_some() || opts.user.is_some() {
        Config::from_kubeconfig(&kco).await.map_err(|e| Error::Kubeconfig {
            path: std::env::var("KUBECONFIG").unwrap_or_else(|_| "~/.kube/config".into()),
            message: e.to_string(),
        })?
    } else {
        Config::infer().await.map_err(|e| Error::Infer(e.to_string()))?
    };
    config.connect_timeout = Some(Duration::from_secs(10));
    Ok(config)
}

/// A client for `config`, loaded from `source`. A static token of a kubeconfig is read again from
/// it when the server refuses it ([`crate::token`]).
pub fn client(mut config: Config, source: &ClientOptions) -> Result<Client, Error> {
    let url = config.cluster_url.to_string();
    let token = ReloadingToken::take_from(&mut config, source);
    let builder = ClientBuilder::try_from(config).map_err(|e| Error::Client { url, message: e.to_string() })?;
    Ok(match token {
        Some(token) => builder.with_layer(&token.layer()).build(),
        None => builder.build(),
    })
}

/// What a failed connection comes down to, in words: "connection refused" rather than the
/// outermost wrapper's "ServiceError: client error (Connect)".
pub fn transport_failure(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut deepest = e.to_string();
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused (is the API server running?)".into(),
                std::io::ErrorKind::TimedOut => "connection timed out".into(),
                _ => io.to_string(),
            };
        }
        deepest = err.to_string();
        cur = err.source();
    }
    deepest
}

/// Checks the server answers (`GET /version`) and accepts our credentials (a one-item list of
/// PersistentVolumes), each within `timeout`.
pub async fn preflight(client: &Client, url: &str, timeout: Duration) -> Result<(), Error> {
    let unreachable = |message: String| Error::Unreachable { url: url.to_string(), message };
    let refused = |what: &'static str, e: kube::Error| match e {
        kube::Error::Api(s) => Error::Refused {
            url: url.to_string(),
            what,
            code: s.code,
            reason: s.reason.clone(),
            message: s.message.clone(),
        },
        other => unreachable(transport_failure(&other)),
    };
    let version = tokio::time::timeout(timeout, client.apiserver_version())
        .await
        .map_err(|_| unreachable(format!("no answer within {timeout:?}")))?
        .map_err(|e| refused("GET /version", e))?;
    tracing::info!(server = %url, version = %version.git_version, "connected");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    tokio::time::timeout(timeout, pvs.list(&ListParams::default().limit(1)))
        .await
        .map_err(|_| unreachable(format!("no answer within {timeout:?}")))?
        .map_err(|e| refused("list persistentvolumes", e))?;
    Ok(())
}
