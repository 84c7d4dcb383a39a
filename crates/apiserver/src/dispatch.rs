//! The one HTTP handler: authenticate, route, read the body, call the verb, shape the answer.
//!
//! Bounds from [`crate::limits`] apply here: a request that is not a watch must finish within
//! the request timeout (504 otherwise, as kube-apiserver's timeout filter answers); its body
//! may not pass the size limit (413, told from `Content-Length` before anything is read when
//! the client declares it), its flow nesting is checked before any parser runs (400), and what
//! it would expand into is counted before anything is built from it ([`crate::shape`], 413).

use crate::discovery;
use crate::error::{ApiError, Result};
use crate::format::Format;
use crate::handlers::{self, Reply};
use crate::query::{self, Query};
use crate::routes::{self, Route};
use crate::{auth, health, limits, protobuf, watch, AppState};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use pv_store::{Pending, StoreError};
use serde_json::Value;
use std::sync::Arc;

/// Largest accepted request body (kube-apiserver's default).
pub const MAX_BODY: usize = limits::MAX_BODY;

/// The largest body of a write worked out on an async worker rather than the write pool.
const INLINE_WRITE_BYTES: usize = 64 * 1024;

fn json(reply: Reply) -> Response {
    let body = serde_json::to_vec(&reply.1).unwrap_or_default();
    (reply.0, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The answer in the representation the client asked for (Tables and PartialObjectMetadata
/// are JSON or YAML).
fn encoded(reply: Reply, format: Format) -> Result<Response> {
    if format.yaml {
        let body = serde_saphyr::to_string(&reply.1)
            .map_err(|e| ApiError::Store(StoreError::Internal(format!("encoding YAML: {e}"))))?;
        return Ok((reply.0, [(header::CONTENT_TYPE, "application/yaml")], body).into_response());
    }
    if !format.protobuf || format.table.is_some() || format.partial.is_some() {
        return Ok(json(reply));
    }
    let body = protobuf::encode(&reply.1)?;
    Ok((reply.0, [(header::CONTENT_TYPE, protobuf::MEDIA_TYPE)], body).into_response())
}

/// Adds one `Warning: 299 - "..."` header per text, as kube-apiserver sends them.
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let quoted = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = header::HeaderValue::from_str(&quoted) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn ok(v: Value) -> Result<Response> {
    Ok(json((StatusCode::OK, v)))
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// Entry point for every request.
pub async fn dispatch(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    // Errors go back in the media type the client asked for (JSON when it asked for none we
    // make, as the 406 itself).
    let wire = Format::new(header_str(req.headers(), header::ACCEPT), &Query::new())
        .map(|f| Format { table: None, partial: None, ..f })
        .unwrap_or_default();
    let is_watch = query::parse_query(req.uri()).is_ok_and(|q| query::flag(&q, "watch"));
    let timeout = st.limits.request_timeout;
    let result = if is_watch {
        handle(st, req).await
    } else {
        // Body read included: a client that sends its body slowly cannot hold the request
        // (and its buffer) open longer than this.
        match tokio::time::timeout(timeout, handle(st, req)).await {
            Ok(r) => r,
            Err(_) => Err(ApiError::Timeout(
                "request did not complete within requested timeout - context deadline exceeded".into(),
            )),
        }
    };
    let resp = match result {
        Ok(r) => r,
        Err(e @ ApiError::PageNotFound) => e.into_response(),
        Err(e) => {
            let code = StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            encoded((code, e.status()), wire).unwrap_or_else(|e| e.into_response())
        }
    };
    tracing::debug!(%method, %path, status = resp.status().as_u16(), elapsed = ?started.elapsed(), "request");
    resp
}

/// Reads a request body of at most `max` bytes: 413 as soon as the declared length or the
/// bytes received pass it.
async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<Vec<u8>> {
    let too_large = || ApiError::RequestEntityTooLarge(format!("Request entity too large: limit is {max}"));
    let declared = header_str(headers, header::CONTENT_LENGTH).parse::<u64>().ok();
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest(format!("reading the request body: {e}")))?;
        if out.len() + chunk.len() > max {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// What a path that routes nowhere gets: a Status, or kube-apiserver's plain-text 404 for a
/// group or version that is not served at all.
fn unrouted(st: &AppState, path: &str) -> ApiError {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["apis", g, v, ..] if !crate::resources::group_versions(&st.store).contains(&(*g, *v)) => {
            ApiError::PageNotFound
        }
        ["apis", g] if !crate::resources::group_versions(&st.store).iter().any(|(x, _)| x == g) => {
            ApiError::PageNotFound
        }
        _ => ApiError::NoRoute,
    }
}

async fn handle(st: Arc<AppState>, req: Request) -> Result<Response> {
    let route = routes::parse(req.uri().path(), &st.store);
    let public = matches!(route, Some(Route::Health { .. } | Route::Version));
    match auth::credential(req.headers(), &st.token) {
        auth::Credential::Valid => {}
        auth::Credential::Anonymous if public => {}
        _ => return Err(ApiError::Unauthorized),
    }
    let route = route.ok_or_else(|| unrouted(&st, req.uri().path()))?;
    let q = query::parse_query(req.uri())?;
    let method = req.method().clone();
    let headers = req.headers().clone();
    let accept = header_str(&headers, header::ACCEPT);
    let ct = header_str(&headers, header::CONTENT_TYPE);
    let read_only = matches!(method, Method::GET | Method::HEAD);
    match route {
        Route::Health { probe, check } => Ok(health::probe(&st, probe, check.as_deref(), q.contains_key("verbose"))),
        _ if !read_only && !matches!(route, Route::Resource(_)) => Err(ApiError::MethodNotAllowed),
        Route::Version => ok(discovery::version()),
        Route::Api => ok(discovery::api_versions(&st.server_address)),
        Route::Apis => ok(discovery::api_groups(&st.store)),
        Route::ApiGroup(g) => discovery::api_group(&st.store, &g).ok_or(ApiError::PageNotFound).and_then(ok),
        Route::ResourceList(g, v) => {
            discovery::resource_list(&st.store, &g, &v).ok_or(ApiError::PageNotFound).and_then(ok)
        }
        Route::OpenApiV2 => {
            let vary = (header::VARY, "Accept");
            match discovery::openapi_v2_negotiate(accept).ok_or(ApiError::NotAcceptable)? {
                discovery::OpenApiV2::Protobuf => Ok((
                    [(header::CONTENT_TYPE, discovery::OPENAPI_V2_PROTOBUF), vary],
                    discovery::openapi_v2_protobuf(),
                )
                    .into_response()),
                discovery::OpenApiV2::Json => {
                    Ok(([(header::CONTENT_TYPE, "application/json"), vary], discovery::OPENAPI_V2_JSON).into_response())
                }
            }
        }
        // kube-apiserver answers the v3 index as text/plain.
        Route::OpenApiV3Root => Ok((
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            serde_json::to_vec(&discovery::openapi_v3_root()).unwrap_or_default(),
        )
            .into_response()),
        Route::OpenApiV3(p) => discovery::openapi_v3_doc(&p)
            .ok_or(ApiError::NoRoute)
            .map(|d| ([(header::CONTENT_TYPE, "application/json")], d).into_response()),
        Route::Resource(t) => {
            let events_v1 = t.served.events_v1;
            let answer: Result<Response> = async {
                let format = Format::new(accept, &q)?;
                let is_watch = query::flag(&q, "watch");
                let body: Body = req.into_body();
                let mut bytes = read_body(&headers, body, st.limits.max_body).await?;
                let mut ct = ct;
                let json_only = t.served.custom() || t.served.kind() == "CustomResourceDefinition";
                if protobuf::is_protobuf(ct) && json_only && matches!(method, Method::POST | Method::PUT) {
                    return Err(ApiError::UnsupportedMediaType("application/json, application/yaml".into()));
                }
                if protobuf::is_protobuf(ct) && matches!(method, Method::POST | Method::PUT | Method::DELETE) {
                    // Decoded at the edge: the handlers see the JSON a JSON client would send.
                    let v = protobuf::decode(t.served.kind(), &bytes)?;
                    bytes = serde_json::to_vec(&v).unwrap_or_default();
                    ct = "application/json";
                } else {
                    limits::check_depth(&bytes, st.limits.max_yaml_depth)?;
                    if !ct.contains("yaml") {
                        // JSON bodies and patches, counted before any parser builds them.
                        crate::shape::scan_json(&bytes)?;
                    }
                }
                let (reply, warnings) = match method {
                    Method::GET if is_watch => {
                        handlers::selectors_for(&t, &q)?;
                        return watch::watch(st, &t, &q, format);
                    }
                    Method::GET => {
                        let answer = match t.name {
                            Some(_) => handlers::get(&st, &t, &q, format)?,
                            None => handlers::list(&st, &t, &q, format)?,
                        };
                        match answer {
                            handlers::Answer::Reply(r) => (r, Vec::new()),
                            handlers::Answer::Json(body) => {
                                let ct = [(header::CONTENT_TYPE, "application/json")];
                                return Ok((StatusCode::OK, ct, body).into_response());
                            }
                            handlers::Answer::Body(resp) => return Ok(resp),
                        }
                    }
                    Method::POST | Method::PUT | Method::PATCH | Method::DELETE => {
                        // A small create, update or delete is worked out on the async worker:
                        // that takes less than handing it to a thread. A large body (decoding and
                        // validating it may take a while), a patch (applied again while others
                        // write) and a collection's delete (which waits for each chunk's commit)
                        // go to the write pool, so the workers keep reading requests. Either way
                        // the answer goes once the write is durable, awaited without holding a
                        // thread while the group commit it joined runs.
                        let ct = ct.to_string();
                        let (store, writes) = (st.store.clone(), st.writes.clone());
                        let inline = bytes.len() <= INLINE_WRITE_BYTES
                            && (matches!(method, Method::POST | Method::PUT)
                                || (method == Method::DELETE && t.name.is_some()));
                        let work = move || match method {
                            Method::POST => handlers::create(&st, &t, &q, &ct, &bytes),
                            Method::PUT => handlers::update(&st, &t, &q, &ct, &bytes),
                            Method::PATCH => handlers::patch(&st, &t, &q, &ct, &bytes),
                            _ if t.name.is_some() => {
                                handlers::delete(&st, &t, &q, &bytes).map(|(r, p)| ((r, Vec::new()), p))
                            }
                            _ => handlers::delete_collection(&st, &t, &q, &bytes)
                                .map(|r| ((r, Vec::new()), Pending::default())),
                        };
                        // A refusal (404, 409, 403, 422) is decided from writes that may not be
                        // durable yet: it is answered once they are, and decided again if a
                        // commit failed meanwhile (Store::refusal_stands).
                        let (reply, pending) = loop {
                            let deciding = store.deciding();
                            let work = work.clone();
                            let result = if inline {
                                work()
                            } else {
                                writes.spawn_blocking(work).await.map_err(|e| {
                                    ApiError::Store(StoreError::Internal(format!("request handler failed: {e}")))
                                })?
                            };
                            match result {
                                Err(e) if e.is_refusal() && !store.refusal_stands(deciding).await => continue,
                                result => break result?,
                            }
                        };
                        pending.durable(&store).await?;
                        reply
                    }
                    _ => return Err(ApiError::MethodNotAllowed),
                };
                Ok(with_warnings(encoded(reply, format)?, &warnings))
            }
            .await;
            answer.map_err(|e| if events_v1 { handlers::events_v1_error(e) } else { e })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::full_disk;
    use axum::body::to_bytes;
    use std::sync::atomic::Ordering;

    async fn call(st: &Arc<AppState>, method: Method, path: &str, body: &str) -> (StatusCode, String) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, "Bearer t")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let resp = dispatch(State(st.clone()), req).await;
        let code = resp.status();
        let bytes = to_bytes(resp.into_body(), MAX_BODY).await.unwrap();
        (code, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn state(store: pv_store::Store) -> Arc<AppState> {
        Arc::new(AppState {
            store: Arc::new(store),
            token: "t".into(),
            server_address: "127.0.0.1:0".into(),
            shutdown: tokio::sync::watch::channel(false).1,
            pages: Default::default(),
            writes: tokio_util::task::TaskTracker::new(),
            limits: Default::default(),
        })
    }

    fn pv(name: &str) -> String {
        format!(
            r#"{{"metadata":{{"name":"{name}"}},"spec":{{"capacity":{{"storage":"1Gi"}},"accessModes":["ReadWriteOnce"],"hostPath":{{"path":"/x"}}}}}}"#
        )
    }

    const PVS: &str = "/api/v1/persistentvolumes";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_conflict_is_answered_once_the_write_it_rests_on_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = full_disk::store(dir.path());
        let st = state(store);
        // A create writers see, not yet committed (its own answer not awaited yet).
        let first = st.store.create_written("persistentvolumes", serde_json::from_str(&pv("a")).unwrap()).unwrap();
        let (code, body) = call(&st, Method::POST, PVS, &pv("a")).await;
        assert_eq!(code, StatusCode::CONFLICT, "{body}");
        // Readers see only durable writes: the object the 409 rests on is there by now.
        let (code, body) = call(&st, Method::GET, &format!("{PVS}/a"), "").await;
        assert_eq!(code, StatusCode::OK, "the 409 was answered before its create was durable: {body}");
        first.durable(&st.store).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refusal_resting_on_an_undone_write_is_decided_again() {
        let dir = tempfile::tempdir().unwrap();
        let (store, full) = full_disk::store(dir.path());
        let st = state(store);
        full.store(true, Ordering::SeqCst);
        let first = st.store.create_written("persistentvolumes", serde_json::from_str(&pv("a")).unwrap()).unwrap();
        // The create the 409 would rest on fails to commit: decided again, the second create
        // fails the same way (storage is full), never 409 for an object that was never stored.
        let (code, body) = call(&st, Method::POST, PVS, &pv("a")).await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert_eq!(first.durable(&st.store).await.unwrap_err().code(), 500);
        // And a delete of it is a 404 once storage works again (the create was undone).
        let deleted = st.store.delete_written("persistentvolumes", "", "a", None, None);
        assert_eq!(deleted.err().map(|e| e.code()), Some(404));
        full.store(false, Ordering::SeqCst);
        let (code, body) = call(&st, Method::POST, PVS, &pv("a")).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }

    #[tokio::test]
    async fn probes_report_a_storage_failure_until_storage_works_again() {
        let dir = tempfile::tempdir().unwrap();
        let (store, full) = full_disk::store(dir.path());
        let st = state(store);
        assert_eq!(call(&st, Method::GET, "/readyz", "").await.0, StatusCode::OK);
        full.store(true, Ordering::SeqCst);
        let (code, body) = call(&st, Method::POST, PVS, &pv("a")).await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert_eq!(call(&st, Method::GET, &format!("{PVS}/a"), "").await.0, StatusCode::NOT_FOUND);
        let (_, list) = call(&st, Method::GET, PVS, "").await;
        assert!(list.contains(r#""items":[]"#), "{list}");
        for probe in ["/readyz", "/healthz"] {
            let (code, body) = call(&st, Method::GET, probe, "").await;
            assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{probe}: {body}");
            assert!(body.contains("[-]storage failed"), "{body}");
        }
        assert_eq!(call(&st, Method::GET, "/livez", "").await.0, StatusCode::OK);
        full.store(false, Ordering::SeqCst);
        assert_eq!(call(&st, Method::GET, "/readyz", "").await.0, StatusCode::OK);
        assert_eq!(call(&st, Method::GET, "/healthz", "").await.0, StatusCode::OK);
        let (code, body) = call(&st, Method::POST, PVS, &pv("a")).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
        assert!(body.contains(r#""resourceVersion":"2""#), "a version past the failed write's: {body}");
    }
}
