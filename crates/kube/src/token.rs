//! A kubeconfig's bearer token, read again from its file when the API server refuses it.
//!
//! A token written into a kubeconfig (`pv-controller kubeconfig`, `kubectl create token`) expires;
//! kube-apiserver then answers every request with 401 and a controller that keeps the token it
//! started with can never write again. Here the token is held apart from kube's own
//! authentication: every request carries the current one, and a 401 makes the kubeconfig be
//! loaded again (the same file, context and user). When it holds another token, the next request
//! carries that one and the watches and workers, which retry, go on: replacing the file is all an
//! operator does, no restart. Tokens kube refreshes itself (`tokenFile`, exec plugins, the
//! in-cluster service-account token) are left to it.

use crate::connect::{load_config, ClientOptions};
use ::http::header::AUTHORIZATION;
use ::http::{HeaderValue, Request, Response, StatusCode};
use futures_util::future::BoxFuture;
use kube::config::Config;
use secrecy::{ExposeSecret, SecretString};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// The current token and where it comes from.
pub struct ReloadingToken {
    source: ClientOptions,
    current: RwLock<SecretString>,
    /// Serialises reloads: a burst of 401s reads the file once.
    reloading: tokio::sync::Mutex<()>,
    /// The last token found refused with nothing newer in the file (warned about once).
    stale: std::sync::Mutex<Option<SecretString>>,
}

impl ReloadingToken {
    /// Takes the static token out of `config` (which then authenticates nothing itself) when it
    /// came from a kubeconfig and kube would not refresh it; `None` otherwise.
    pub fn take_from(config: &mut Config, source: &ClientOptions) -> Option<Arc<Self>> {
        let auth = &mut config.auth_info;
        if auth.token_file.is_some() || auth.exec.is_some() || auth.auth_provider.is_some() {
            return None;
        }
        let token = auth.token.take()?;
        Some(Arc::new(ReloadingToken {
            source: source.clone(),
            current: RwLock::new(token),
            reloading: tokio::sync::Mutex::new(()),
            stale: std::sync::Mutex::new(None),
        }))
    }

    fn current(&self) -> String {
        self.current.read().unwrap().expose_secret().to_string()
    }

    /// `refused` was answered 401: loads the kubeconfig again and takes its token if it is another.
    /// Returns whether the token changed.
    pub async fn refused(&self, refused: &str) -> bool {
        let _one = self.reloading.lock().await;
        if self.current() != refused {
            return true; // another request already reloaded it
        }
        let shown = self.source.kubeconfig.as_ref().map_or_else(
            || std::env::var("KUBECONFIG").unwrap_or_else(|_| "~/.kube/config".into()),
            |p| p.display().to_string(),
        );
        let fresh = match load_config(&self.source).await {
            Ok(c) => c.auth_info.token,
            Err(e) => {
                tracing::warn!(kubeconfig = %shown, error = %e, "the API server refused the token (401) and the kubeconfig could not be loaded again");
                return false;
            }
        };
        match fresh {
            Some(t) if t.expose_secret() != refused => {
                *self.current.write().unwrap() = t;
                *self.stale.lock().unwrap() = None;
                tracing::info!(kubeconfig = %shown, "the API server refused the token (401): took the new token from the kubeconfig");
                true
            }
            _ => {
                let mut stale = self.stale.lock().unwrap();
                if stale.as_ref().is_none_or(|s| s.expose_secret() != refused) {
                    tracing::warn!(kubeconfig = %shown, "the API server refused the token (401; expired or revoked) and the kubeconfig holds no other: write a new one (pv-controller kubeconfig --service-account NS/NAME > FILE); it is read again on the next refusal");
                    *stale = Some(refused.into());
                }
                false
            }
        }
    }

    /// The layer that puts the token on every request.
    pub fn layer(self: &Arc<Self>) -> TokenLayer {
        TokenLayer(self.clone())
    }
}

/// Puts the current token on every request; a 401 reloads it (see [`ReloadingToken`]).
#[derive(Clone)]
pub struct TokenLayer(Arc<ReloadingToken>);

impl<S> Layer<S> for TokenLayer {
    type Service = WithToken<S>;

    fn layer(&self, inner: S) -> WithToken<S> {
        WithToken { inner, token: self.0.clone() }
    }
}

/// The service [`TokenLayer`] makes.
pub struct WithToken<S> {
    inner: S,
    token: Arc<ReloadingToken>,
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for WithToken<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResB: Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<ResB>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqB>) -> Self::Future {
        let used = self.token.current();
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {used}")) {
            v.set_sensitive(true);
            req.headers_mut().insert(AUTHORIZATION, v);
        }
        let answer = self.inner.call(req);
        let token = self.token.clone();
        Box::pin(async move {
            let resp = answer.await?;
            if resp.status() == StatusCode::UNAUTHORIZED {
                token.refused(&used).await;
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn kubeconfig(token: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:1'}}}}]\n\
             users: [{{name: u, user: {{token: {token}}}}}]\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n"
        )
    }

    /// A server that accepts only `valid`, recording the Authorization header of each request.
    fn server(
        valid: Arc<Mutex<String>>,
        seen: Arc<Mutex<Vec<String>>>,
    ) -> impl Service<Request<()>, Response = Response<()>, Error = std::convert::Infallible, Future: Send> {
        tower::service_fn(move |req: Request<()>| {
            let auth = req.headers().get(AUTHORIZATION).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
            seen.lock().unwrap().push(auth.clone());
            let ok = auth == format!("Bearer {}", valid.lock().unwrap());
            let status = if ok { StatusCode::OK } else { StatusCode::UNAUTHORIZED };
            async move { Ok(Response::builder().status(status).body(()).unwrap()) }
        })
    }

    #[tokio::test]
    async fn a_refused_token_is_replaced_by_the_one_the_kubeconfig_holds_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, kubeconfig("first")).unwrap();
        let opts = ClientOptions { kubeconfig: Some(path.clone()), ..Default::default() };
        let mut config = load_config(&opts).await.unwrap();
        let token = ReloadingToken::take_from(&mut config, &opts).expect("a static token is taken");
        assert!(config.auth_info.token.is_none(), "kube must not add its own Authorization");

        let valid = Arc::new(Mutex::new("first".to_string()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut svc = token.layer().layer(server(valid.clone(), seen.clone()));
        let ok = svc.call(Request::new(())).await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);

        // The token expires; nothing newer in the file yet: refused, and refused again.
        *valid.lock().unwrap() = "second".into();
        assert_eq!(svc.call(Request::new(())).await.unwrap().status(), StatusCode::UNAUTHORIZED);
        assert_eq!(svc.call(Request::new(())).await.unwrap().status(), StatusCode::UNAUTHORIZED);

        // The operator writes a new kubeconfig: the request after the next refusal carries it.
        std::fs::write(&path, kubeconfig("second")).unwrap();
        assert_eq!(svc.call(Request::new(())).await.unwrap().status(), StatusCode::UNAUTHORIZED);
        assert_eq!(svc.call(Request::new(())).await.unwrap().status(), StatusCode::OK);
        assert_eq!(
            *seen.lock().unwrap(),
            ["Bearer first", "Bearer first", "Bearer first", "Bearer first", "Bearer second"]
        );
    }

    #[tokio::test]
    async fn tokens_kube_refreshes_itself_are_left_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, kubeconfig("t").replace("token: t", "tokenFile: /var/run/token")).unwrap();
        let opts = ClientOptions { kubeconfig: Some(path), ..Default::default() };
        let mut config = load_config(&opts).await.unwrap();
        assert!(ReloadingToken::take_from(&mut config, &opts).is_none());
    }
}
