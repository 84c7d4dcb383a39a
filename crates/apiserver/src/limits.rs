//! What one client may cost the server, and where each cost stops.
//!
//! The server listens on loopback, but any local process can reach it, and a careless or hostile
//! client must not be able to take it down. Every figure here follows kube-apiserver's default
//! where it has one:
//!
//! | resource | bound | kube-apiserver |
//! |---|---|---|
//! | request body | [`Limits::max_body`] 3 MiB, then 413 | `MaxRequestBodyBytes` |
//! | stored object | [`MAX_OBJECT_BYTES`] 1.5 MiB of JSON, then etcd's 500 | etcd `--max-request-bytes` |
//! | JSON patch | 10,000 operations (413); `copy` may add 3 MiB in all (422) | `maxJSONPatchOperations`, `JSONPatchMaxCopyBytes` |
//! | YAML body | flow nesting of [`Limits::max_yaml_depth`] levels, checked before parsing (400) | go-yaml's depth limit |
//! | unfinished headers, idle keep-alive | [`Limits::header_read_timeout`] 32 s | `ReadHeaderTimeout` |
//! | one request (not a watch) | [`Limits::request_timeout`] 60 s, then 504 | `--request-timeout` |
//! | a response the client does not read | closed after [`Limits::write_stall_timeout`] without progress | — |
//! | a watch | `timeoutSeconds` (at most a day), else 30–60 min | `--min-request-timeout` |
//! | a watcher's undelivered events | [`WATCH_EVENTS`] or [`WATCH_BYTES`], then the watch ends | cacher's slow-watcher termination |
//! | watch history | [`HISTORY_BYTES`] and [`HISTORY_AGE`], older versions 410 | etcd compaction |
//! | connections | [`Limits::max_connections`]; more wait in the listen backlog | — |
//! | requests in flight | [`Limits::max_requests_inflight`] reads 400, [`Limits::max_mutating_requests_inflight`] writes 200, then 429 (watches exempt) | `--max-requests-inflight`, `--max-mutating-requests-inflight` |
//! | what a body expands into | [`crate::shape`]: values and objects counted before decoding (413) | — |
//!
//! Client-given numbers (`timeoutSeconds`, `limit`, ...) are parsed as kube-apiserver parses
//! them (an integer, or 400) and clamped before any arithmetic, so no value can overflow a
//! clock or a count.

use crate::error::{ApiError, Result};
use crate::query::Query;
use pv_store::StoreLimits;
use std::time::Duration;

/// Largest object the store keeps, as JSON (etcd's default request limit).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;
/// Largest request body (kube-apiserver's `MaxRequestBodyBytes`).
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// Most operations in one JSON patch (kube-apiserver's `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPS: usize = 10_000;
/// Most bytes the `copy` operations of one JSON patch may add (`JSONPatchMaxCopyBytes`).
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;
/// Undelivered events one watcher may have before it is closed.
pub const WATCH_EVENTS: usize = 10_000;
/// Undelivered object bytes one watcher may have before it is closed.
pub const WATCH_BYTES: usize = 16 * 1024 * 1024;
/// Object bytes the watch history keeps.
pub const HISTORY_BYTES: usize = 64 * 1024 * 1024;
/// How long a change stays resumable from the watch history.
pub const HISTORY_AGE: Duration = Duration::from_secs(15 * 60);
/// Longest watch a client may ask for with `timeoutSeconds`.
pub const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// A watch without `timeoutSeconds` lasts between this and twice this (kube-apiserver's
/// `--min-request-timeout`), spreading reconnects.
pub const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// The store bounds `pv-controller up` runs with.
pub fn store_limits() -> StoreLimits {
    StoreLimits {
        max_object_bytes: Some(MAX_OBJECT_BYTES),
        history_events: 100_000,
        history_bytes: Some(HISTORY_BYTES),
        history_age: Some(HISTORY_AGE),
        watch_events: Some(WATCH_EVENTS),
        watch_bytes: Some(WATCH_BYTES),
    }
}

/// Per-connection and per-request bounds of the HTTP server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Time to send a request's headers; also how long an idle keep-alive connection stays.
    pub header_read_timeout: Duration,
    /// Time to complete the TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Time to read the body and answer a request that is not a watch.
    pub request_timeout: Duration,
    /// A connection whose response makes no progress this long (the client stopped reading)
    /// is closed.
    pub write_stall_timeout: Duration,
    /// Largest request body.
    pub max_body: usize,
    /// Deepest flow nesting (`[`, `{`) of a YAML or JSON body.
    pub max_yaml_depth: usize,
    /// Reads (get, list; not watches) served at once, then 429; 0 is no limit.
    pub max_requests_inflight: usize,
    /// Writes served at once, then 429; 0 is no limit.
    pub max_mutating_requests_inflight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: default_max_connections(),
            header_read_timeout: Duration::from_secs(32),
            tls_handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            write_stall_timeout: Duration::from_secs(60),
            max_body: MAX_BODY,
            max_yaml_depth: 100,
            max_requests_inflight: crate::inflight::DEFAULT_MAX_READ_ONLY,
            max_mutating_requests_inflight: crate::inflight::DEFAULT_MAX_MUTATING,
        }
    }
}

/// 1024, or half the process's open-file limit when that is lower, so that connections cannot
/// use up the descriptors the store needs.
fn default_max_connections() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits").ok().and_then(|l| {
        l.lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|n| n.parse::<usize>().ok())
    });
    soft.map_or(1024, |s| (s / 2).clamp(16, 1024))
}

/// An integer query parameter as kube-apiserver reads one: absent or empty is None, anything
/// but an integer is a 400.
pub fn int_param(q: &Query, name: &str) -> Result<Option<i64>> {
    match q.get(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| ApiError::BadRequest(format!("invalid value for {name}: {v:?}: must be an integer"))),
    }
}

/// How long a watch lasts: `timeoutSeconds` when positive (at most [`MAX_WATCH_TIMEOUT`]),
/// else a random time between [`MIN_REQUEST_TIMEOUT`] and twice that.
pub fn watch_timeout(q: &Query) -> Result<Duration> {
    Ok(match int_param(q, "timeoutSeconds")? {
        Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()).min(MAX_WATCH_TIMEOUT),
        // kube-apiserver keeps a negative timeout as it is: the watch ends at once.
        Some(s) if s < 0 => Duration::ZERO,
        _ => MIN_REQUEST_TIMEOUT.mul_f64(1.0 + rand::random::<f64>()),
    })
}

/// Rejects a body whose flow collections nest deeper than `max`, before any parser sees it.
///
/// Why: YAML parsers spend time proportional to the nesting depth on every token, so a few
/// megabytes of `[[[[...` cost minutes of CPU. Brackets are counted everywhere, quoted or not:
/// that can only over-count, never let a deep document through.
pub fn check_depth(body: &[u8], max: usize) -> Result<()> {
    let mut depth = 0usize;
    for b in body {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Err(ApiError::BadRequest(format!(
                        "the request body nests collections deeper than {max} levels"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(k: &str, v: &str) -> Query {
        [(k.to_string(), v.to_string())].into_iter().collect()
    }

    #[test]
    fn watch_timeouts_are_clamped_and_never_overflow() {
        assert_eq!(watch_timeout(&q("timeoutSeconds", "9223372036854775807")).unwrap(), MAX_WATCH_TIMEOUT);
        assert_eq!(watch_timeout(&q("timeoutSeconds", "5")).unwrap(), Duration::from_secs(5));
        for v in ["0", ""] {
            let t = watch_timeout(&q("timeoutSeconds", v)).unwrap();
            assert!(t >= MIN_REQUEST_TIMEOUT && t <= 2 * MIN_REQUEST_TIMEOUT, "{v}: {t:?}");
        }
        // A negative timeout is kept, as kube-apiserver keeps it: the watch is over at once.
        for v in ["-1", "-9223372036854775808"] {
            assert_eq!(watch_timeout(&q("timeoutSeconds", v)).unwrap(), Duration::ZERO, "{v}");
        }
        for v in ["x", "1e3", "99999999999999999999"] {
            assert_eq!(watch_timeout(&q("timeoutSeconds", v)).unwrap_err().code(), 400, "{v}");
        }
    }

    #[test]
    fn deep_flow_nesting_is_refused_and_brackets_in_balanced_text_are_not() {
        assert!(check_depth(b"{\"a\": [1, {\"b\": [2]}]}", 4).is_ok());
        let deep = "[".repeat(101);
        assert_eq!(check_depth(deep.as_bytes(), 100).unwrap_err().code(), 400);
        let wide = "[]".repeat(100_000);
        assert!(check_depth(wide.as_bytes(), 1).is_ok());
    }
}
