//! TLS: a private CA kept in the data directory and a serving certificate signed by it on every
//! start (connections complete their handshakes in [`crate::conn`]).
//!
//! Why TLS on loopback: client-go (and so kubectl) does not send a bearer token over plain
//! HTTP, so token authentication needs HTTPS. The CA's certificate goes into the kubeconfig as
//! `certificate-authority-data`, so clients verify the server without any flag. The CA
//! (`ca.crt`, `ca.key`, mode 0600) survives restarts, so kubeconfigs copied elsewhere keep
//! working; the serving certificate is reissued each start for the current addresses
//! (`localhost`, `127.0.0.1`, `::1` and the listen address).

use crate::auth::write_private;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// Why the TLS material could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a key or certificate file failed.
    #[error("{path}: {source}")]
    File {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Generating or parsing a key or certificate failed.
    #[error("certificate generation: {0}")]
    Cert(#[from] rcgen::Error),
    /// rustls refused the key or certificate.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The CA certificate (PEM, for the kubeconfig) and the acceptor for connections.
pub struct Tls {
    /// CA certificate in PEM.
    pub ca_pem: String,
    /// Server-side TLS configuration.
    pub acceptor: TlsAcceptor,
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, "pv-controller-ca");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    p
}

fn read(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::File { path: path.into(), source }),
    }
}

fn write(path: &Path, s: &str) -> Result<(), Error> {
    write_private(path, s).map_err(|source| Error::File { path: path.into(), source })
}

/// Loads the CA from `dir` (making one if absent) and issues a serving certificate for `addr`.
pub fn load_or_create(dir: &Path, addr: SocketAddr) -> Result<Tls, Error> {
    let (crt_path, key_path) = (dir.join("ca.crt"), dir.join("ca.key"));
    let (ca_pem, ca_key) = match (read(&crt_path)?, read(&key_path)?) {
        (Some(c), Some(k)) => (c, KeyPair::from_pem(&k)?),
        _ => {
            let key = KeyPair::generate()?;
            let cert = ca_params().self_signed(&key)?;
            write(&key_path, &key.serialize_pem())?;
            write(&crt_path, &cert.pem())?;
            (cert.pem(), key)
        }
    };
    let issuer = Issuer::new(ca_params(), ca_key);
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !addr.ip().is_unspecified() {
        names.push(addr.ip().to_string());
    }
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(DnType::CommonName, "pv-controller-apiserver");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    let chain = vec![
        cert.der().clone(),
        CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(|e| Error::Config(e.to_string()))?,
    ];
    let key_der =
        PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).map_err(|e| Error::Config(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| Error::Config(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls { ca_pem, acceptor: TlsAcceptor::from(Arc::new(cfg)) })
}
