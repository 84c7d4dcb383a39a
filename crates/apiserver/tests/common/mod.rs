//! The server these tests talk to: started in-process on a free port, plain HTTP, with its token.

use pv_apiserver::limits::Limits;
use pv_apiserver::{Server, ServerConfig, ServerHandle};
use reqwest::{Client, Method, RequestBuilder};
use std::path::Path;

/// A running server and a client of it.
pub struct Api {
    /// The server.
    pub h: ServerHandle,
    /// The client.
    pub c: Client,
}

/// A server on `dir` with these limits.
pub async fn start_with(dir: &Path, limits: Limits) -> Api {
    let mut cfg = ServerConfig::new(dir, "127.0.0.1:0".parse().unwrap());
    cfg.tls = false;
    cfg.limits = limits;
    Api { h: Server::start(cfg).await.unwrap(), c: Client::new() }
}

/// A server on `dir` with the default limits.
pub async fn start(dir: &Path) -> Api {
    start_with(dir, Limits::default()).await
}

impl Api {
    /// A request to `path` with the server's token.
    pub fn request(&self, m: Method, path: &str) -> RequestBuilder {
        self.c.request(m, format!("{}{path}", self.h.url())).bearer_auth(self.h.token())
    }
}
