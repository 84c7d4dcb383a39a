//! `--metrics-secure`: the endpoints over HTTPS, each request's bearer token checked by the API
//! server (TokenReview, then SubjectAccessReview for `get` on the path), as kube-controller-manager
//! serves its secure port. Plain HTTP on `--metrics-addr` stays the default.

use super::super::user;
use clap::Args;
use pv_kube::http::{self, Health};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of the secure endpoint.
#[derive(Args, Debug)]
pub struct SecureMetricsFlags {
    /// Serve /metrics, /healthz and /readyz over HTTPS; /metrics needs a bearer token the API
    /// server accepts (TokenReview) for a user allowed `get` on the path (SubjectAccessReview).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    pub metrics_secure: bool,
    /// Serving certificate (PEM, chain first) for --metrics-secure (default: self-signed).
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
}

impl SecureMetricsFlags {
    /// Starts the endpoints on `addr`: HTTPS with delegated authorization when asked for,
    /// plain HTTP otherwise.
    pub async fn serve(
        &self,
        addr: SocketAddr,
        health: Health,
        client: kube::Client,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        if !self.metrics_secure {
            if self.tls_cert_file.is_some() {
                return Err(user("--tls-cert-file: only used with --metrics-secure"));
            }
            http::serve(addr, health, shutdown).await.map_err(|e| user(format!("--metrics-addr: {e}")))?;
            return Ok(());
        }
        let files = self.tls_cert_file.as_deref().zip(self.tls_private_key_file.as_deref());
        let tls = pv_kube::secure::tls_config(files).map_err(|e| user(format!("--metrics-secure: {e}")))?;
        let auth = Arc::new(pv_kube::secure::Delegated::new(client));
        http::serve_secure(addr, health, tls, auth, shutdown)
            .await
            .map_err(|e| user(format!("--metrics-addr: {e}")))?;
        Ok(())
    }
}
