//! `/healthz`, `/livez` and `/readyz`, answered as kube-apiserver answers them.
//!
//! A probe runs named checks: `ping` (the server answers), `storage` (writes can be made
//! durable: false from a failed commit until storage works again, tried afresh by [`pv_store::Store::check_storage`]), and
//! for `/readyz` also `shutdown` (false once the server is stopping, so load balancers drain
//! it). All passing: 200 `ok`. Any failing: 500 listing each check as `[+]name ok` or
//! `[-]name failed: reason withheld` and a last line `<probe> check failed`; `?verbose` lists
//! them on success too. `/readyz/<check>` runs one check (404 for an unknown one).

use crate::AppState;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// The checks a probe runs, each with the reason it fails (None: it passes).
fn checks(st: &AppState, probe: &str) -> Vec<(&'static str, Option<String>)> {
    let mut c = vec![("ping", None)];
    // Liveness is the process answering; a storage failure is for readiness and health (a
    // restart would not bring disk space back).
    if probe != "livez" {
        c.push(("storage", st.store.check_storage()));
    }
    if probe == "readyz" && *st.shutdown.borrow() {
        c.push(("shutdown", Some("the server is shutting down".into())));
    } else if probe == "readyz" {
        c.push(("shutdown", None));
    }
    c
}

fn text(code: StatusCode, body: String) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")], body)
        .into_response()
}

/// Answers `/<probe>` or `/<probe>/<check>`.
pub fn probe(st: &AppState, probe: &str, check: Option<&str>, verbose: bool) -> Response {
    let all = checks(st, probe);
    if let Some(name) = check {
        return match all.iter().find(|(n, _)| *n == name) {
            None => text(StatusCode::NOT_FOUND, "404 page not found\n".into()),
            Some((_, None)) => text(StatusCode::OK, "ok".into()),
            Some((_, Some(why))) => {
                tracing::warn!(probe, check = name, reason = %why, "health check failed");
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal server error: reason withheld\n".into())
            }
        };
    }
    let failed = all.iter().any(|(_, r)| r.is_some());
    if !failed && !verbose {
        return text(StatusCode::OK, "ok".into());
    }
    let mut body = String::new();
    for (name, reason) in &all {
        match reason {
            None => body.push_str(&format!("[+]{name} ok\n")),
            Some(why) => {
                tracing::warn!(probe, check = name, reason = %why, "health check failed");
                body.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    if failed {
        body.push_str(&format!("{probe} check failed\n"));
        text(StatusCode::INTERNAL_SERVER_ERROR, body)
    } else {
        body.push_str(&format!("{probe} check passed\n"));
        text(StatusCode::OK, body)
    }
}
