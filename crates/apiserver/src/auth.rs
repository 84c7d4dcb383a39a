//! Bearer-token authentication and the kubeconfig that carries the token.
//!
//! The server listens on loopback by default, but any local user could still reach it, so
//! every request except the health probes and `/version` must carry
//! `Authorization: Bearer <token>`; those two accept anonymous requests but, like
//! kube-apiserver, refuse a wrong token. The
//! token is 32 random bytes, kept in `DATA_DIR/token` (mode 0600) so that a restart on the same
//! data directory keeps working kubeconfigs; the kubeconfig itself is rewritten on every start
//! because the port may change.

use axum::http::{header, HeaderMap};
use std::io::Write;
use std::path::Path;

/// What a request's `Authorization` header proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    /// The right bearer token.
    Valid,
    /// No bearer token at all (no header, another scheme, or an empty token): anonymous, which
    /// only the health probes and `/version` accept.
    Anonymous,
    /// A bearer token that is wrong: 401 everywhere, probes included, as kube-apiserver
    /// rejects an invalid token before it looks at the path.
    Invalid,
}

/// Reads the bearer token as kube-apiserver's token authenticator does (`Bearer` in any case,
/// the token up to the next space) and compares it in constant time.
pub fn credential(h: &HeaderMap, token: &str) -> Credential {
    let Some(v) = h.get(header::AUTHORIZATION) else { return Credential::Anonymous };
    let Ok(v) = v.to_str() else { return Credential::Invalid };
    let mut parts = v.splitn(3, ' ');
    let scheme = parts.next().unwrap_or("");
    let given = parts.next().unwrap_or("");
    if !scheme.eq_ignore_ascii_case("bearer") || given.is_empty() {
        return Credential::Anonymous;
    }
    let (a, b) = (given.as_bytes(), token.as_bytes());
    if a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0 {
        Credential::Valid
    } else {
        Credential::Invalid
    }
}

/// True when the request carries the right token.
pub fn authorized(h: &HeaderMap, token: &str) -> bool {
    credential(h, token) == Credential::Valid
}

/// A fresh random token (64 hex characters).
pub fn new_token() -> String {
    let mut b = [0u8; 32];
    rand::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes `contents` to `path` with mode 0600, atomically (temporary file, then rename).
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Reads the token under `path`, or makes and stores a new one.
pub fn load_or_create_token(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().len() >= 32 => Ok(t.trim().to_string()),
        _ => {
            let t = new_token();
            write_private(path, &t)?;
            Ok(t)
        }
    }
}

/// The kubeconfig for `server` and `token` (and the CA that signed the serving certificate):
/// cluster, user and context `pv-controller`, selected as current.
pub fn kubeconfig(server: &str, token: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine;
    let ca = ca_pem
        .map(|p| {
            let b = base64::engine::general_purpose::STANDARD.encode(p.as_bytes());
            format!("    certificate-authority-data: {b}\n")
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: pv-controller\n  cluster:\n    server: {server}\n{ca}\
users:\n- name: pv-controller\n  user:\n    token: {token}\n\
contexts:\n- name: pv-controller\n  context:\n    cluster: pv-controller\n    user: pv-controller\n    namespace: default\n\
current-context: pv-controller\npreferences: {{}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_the_exact_bearer_token_is_accepted() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abd"));
        assert!(!authorized(&h, "abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert!(authorized(&h, "abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer abc"));
        assert!(authorized(&h, "abc"));
    }

    #[test]
    fn no_token_is_anonymous_and_a_wrong_one_is_invalid() {
        let mut h = HeaderMap::new();
        assert_eq!(credential(&h, "abc"), Credential::Anonymous);
        for anon in ["Basic dTpw", "Bearer ", "Bearer"] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(anon));
            assert_eq!(credential(&h, "abc"), Credential::Anonymous, "{anon}");
        }
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abd"));
        assert_eq!(credential(&h, "abc"), Credential::Invalid);
    }

    #[test]
    fn kubeconfig_parses_as_yaml_with_the_context_selected() {
        let k: serde_json::Value =
            serde_saphyr::from_str(&kubeconfig("https://127.0.0.1:1", "t", Some("PEM"))).unwrap();
        assert_eq!(k["clusters"][0]["cluster"]["certificate-authority-data"], "UEVN");
        assert_eq!(k["current-context"], "pv-controller");
        assert_eq!(k["users"][0]["user"]["token"], "t");
    }
}
