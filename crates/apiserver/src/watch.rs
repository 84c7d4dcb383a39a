//! Watch: a chunked stream of newline-delimited `{"type": ..., "object": ...}` events, or of
//! length-prefixed protobuf `WatchEvent` frames for clients that accept protobuf.
//!
//! Semantics follow kube-apiserver: without a resourceVersion (or with "0") the stream starts
//! with an ADDED event for every matching object, then follows changes; with one it replays
//! every later change the store's history still holds, and when that version is older than
//! the history it sends one ERROR event carrying a 410 `Expired` Status (clients then relist).
//! `sendInitialEvents=true` (watch-list) sends the current objects followed by a BOOKMARK
//! annotated `k8s.io/initial-events-end`. With `allowWatchBookmarks` a BOOKMARK carrying the
//! current resourceVersion is sent every [`BOOKMARK_EVERY`], so idle watchers can resume
//! without hitting 410. `timeoutSeconds` (clamped to a day) ends the stream, else a random
//! 30–60 minutes as kube-apiserver does; so does server shutdown, and so does the store
//! closing a watcher that fell too far behind (the client watches again from its last version).
//!
//! Initial events cost a pointer each until they are sent: the watch takes the snapshot (the
//! stored objects, shared text) and registers its watcher at the snapshot's version, then
//! renders initial events a piece of about [`crate::listing::CHUNK`] at a time, only when hyper
//! asks for more body (it asks while its write buffer has room), so a client that reads slowly
//! or not at all holds the snapshot and a piece or two, not the collection in its encoding.
//! Changes made meanwhile wait in the watcher's bounded queue (the store's 10,000 events or
//! 16 MiB); a client too slow to take the initial events before that fills is ended after
//! what it was sent, as any slow watcher, and watches again.
//!
//! Bookmark safety: a bookmark carries the store's *delivered* version, not its newest: writes
//! waiting for their group commit have versions but have not reached watchers yet. The store
//! delivers to watcher channels under its lock before it advances the delivered version, so
//! reading that version first and then draining the channel guarantees that every event at or
//! below the bookmarked version was sent before the bookmark.

use crate::error::{ApiError, Result};
use crate::format::Format;
use crate::handlers;
use crate::query::{self, Query};
use crate::routes::Target;
use crate::select::{self, Selectors};
use crate::tables;
use crate::AppState;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use pv_store::{Object, StoreError, WatchEvent, Watcher};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often a watcher that asked for bookmarks gets one.
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

/// When a watcher that asked for bookmarks gets its next one: every [`BOOKMARK_EVERY`], and 2 s
/// before its timeout, so that the client resumes from a version as close to then as possible
/// (kube-apiserver's cacher, `nextBookmarkTime`); none once that moment has passed.
fn next_bookmark(now: Instant, deadline: Option<Instant>) -> Option<Instant> {
    let periodic = now + BOOKMARK_EVERY;
    let at = match deadline.and_then(|d| d.checked_sub(Duration::from_secs(2))) {
        Some(pre_timeout) => pre_timeout.min(periodic),
        None if deadline.is_some() => return None,
        None => periodic,
    };
    (at >= now).then_some(at)
}

struct Stream {
    st: Arc<AppState>,
    /// The initial events still to send: the snapshot's objects, rendered only as the client
    /// takes them (see [`Stream::initial_piece`]).
    initial: std::vec::IntoIter<Object>,
    /// The version the initial-events-end bookmark carries, until it is sent.
    initial_end: Option<u64>,
    target: Target,
    sel: Selectors,
    format: Format,
    rx: Option<Watcher>,
    pending: VecDeque<Bytes>,
    deadline: Option<Instant>,
    bookmarks: bool,
    next_bookmark: Option<Instant>,
    last_rv: u64,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

impl Stream {
    /// Queues one event, as a JSON line or a protobuf frame.
    fn emit(&mut self, ty: &str, obj: Value) {
        let b = if self.format.protobuf {
            // An object that cannot be encoded is reported as an ERROR event, not skipped.
            crate::protobuf::watch_frame(ty, &obj)
                .unwrap_or_else(|e| crate::protobuf::watch_frame("ERROR", &e.status()).unwrap_or_default())
        } else {
            line(&json!({"type": ty, "object": obj})).to_vec()
        };
        self.pending.push_back(Bytes::from(b));
    }

    fn render(&self, obj: &Value) -> Value {
        match self.format.table {
            Some(inc) => {
                let rv = select::field_value(obj, "metadata.resourceVersion");
                tables::table(&handlers::printer(&self.st, &self.target), &[obj], &rv, inc, None)
            }
            None => match self.format.partial {
                Some(v) => handlers::partial_metadata(obj, v),
                None => handlers::out(&self.target, obj),
            },
        }
    }

    fn event(&mut self, ty: &str, obj: &Value, rv: u64) {
        if self.sel.matches(obj) {
            let o = self.render(obj);
            self.emit(ty, o);
        }
        self.last_rv = self.last_rv.max(rv);
    }

    fn store_event(&mut self, ev: WatchEvent) {
        self.stored_event(ev.kind.as_str(), &ev.object, ev.rv);
    }

    /// An event of a stored object. A plain JSON watch with no selector sends the object's text
    /// as the store keeps it; anything else (selectors, a Table, metadata only, protobuf, the
    /// `events.k8s.io` form) works on the parsed object.
    fn stored_event(&mut self, ty: &str, obj: &Object, rv: u64) {
        if !(handlers::objects_as_stored(&self.target, self.format) && self.sel.is_empty()) {
            return self.event(ty, &obj.value(), rv);
        }
        let mut b = Vec::with_capacity(obj.len() + ty.len() + 24);
        b.extend_from_slice(b"{\"type\":\"");
        b.extend_from_slice(ty.as_bytes());
        b.extend_from_slice(b"\",\"object\":");
        b.extend_from_slice(obj.text().as_bytes());
        b.extend_from_slice(b"}\n");
        self.pending.push_back(Bytes::from(b));
        self.last_rv = self.last_rv.max(rv);
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.target.served.kind(), "apiVersion": self.target.served.api_version(), "metadata": meta});
        self.emit("BOOKMARK", obj);
    }

    /// Reads the delivered version, then drains what the channel holds, then bookmarks it.
    fn drain_and_bookmark(&mut self) {
        let rv = self.st.store.delivered_version();
        while let Some(ev) = self.rx.as_mut().and_then(|r| r.try_recv().ok()) {
            self.store_event(ev);
        }
        let rv = rv.max(self.last_rv);
        self.bookmark(rv, false);
        self.last_rv = rv;
    }

    /// The next initial events, rendered into one piece of about [`crate::listing::CHUNK`]
    /// bytes; then the initial-events-end bookmark, when asked for. None once all are sent.
    fn initial_piece(&mut self) -> Option<Bytes> {
        let mut piece = Vec::new();
        while piece.len() < crate::listing::CHUNK {
            let Some(o) = self.initial.next() else { break };
            self.stored_event("ADDED", &o, 0);
            for b in self.pending.drain(..) {
                piece.extend_from_slice(&b);
            }
        }
        if self.initial.len() == 0 {
            if let Some(rv) = self.initial_end.take() {
                self.bookmark(rv, true);
            }
            for b in self.pending.drain(..) {
                piece.extend_from_slice(&b);
            }
        }
        (!piece.is_empty()).then(|| Bytes::from(piece))
    }

    /// True once the watch's time is up or the server is shutting down.
    fn over(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d) || *self.shutdown.borrow()
    }

    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(b) = self.pending.pop_front() {
                return Some(b);
            }
            if self.initial.len() > 0 || self.initial_end.is_some() {
                // Live events wait in the watcher's bounded queue meanwhile: one that falls
                // too far behind ends after the events it was given, as any slow watcher.
                if self.over() {
                    return None;
                }
                if let Some(b) = self.initial_piece() {
                    return Some(b);
                }
                continue;
            }
            let rx = self.rx.as_mut()?;
            let far = Instant::now() + Duration::from_secs(86_400);
            let deadline = self.deadline.unwrap_or(far);
            let bookmark_at = self.next_bookmark.filter(|_| self.bookmarks).unwrap_or(far);
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => self.store_event(ev),
                    None => return None,
                },
                _ = tokio::time::sleep_until(deadline) => return None,
                _ = tokio::time::sleep_until(bookmark_at) => {
                    self.next_bookmark = next_bookmark(Instant::now(), self.deadline);
                    self.drain_and_bookmark();
                }
                _ = self.shutdown.changed() => return None,
            }
        }
    }
}

/// Answers a `?watch=true` request.
pub fn watch(st: Arc<AppState>, t: &Target, q: &Query, format: Format) -> Result<Response> {
    crate::listopts::parse(q, true)?;
    let mut sel = handlers::selectors(q)?;
    if let Some(name) = &t.name {
        // The old `.../NAME?watch=true` form watches one object.
        sel.fields = select::FieldSelector::parse(&format!("metadata.name={name}"))?;
    }
    let coll = Target { name: None, ..t.clone() };
    let flag = |k: &str| query::flag(q, k);
    let rv_param = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    // Initial events when asked for, or by default from "" and "0"; `sendInitialEvents=false`
    // starts at the newest version with none, as kube-apiserver does.
    let initial = match q.get("sendInitialEvents") {
        Some(_) => flag("sendInitialEvents"),
        None => rv_param.is_empty() || rv_param == "0",
    };
    let lasts = crate::limits::watch_timeout(q)?;
    let content_type = if format.protobuf { crate::protobuf::WATCH_MEDIA_TYPE } else { "application/json" };
    if lasts.is_zero() {
        // A negative `timeoutSeconds`: kube-apiserver's watch is over before its first event.
        return Ok((StatusCode::OK, [(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")])
            .into_response());
    }
    let timeout = Some(Instant::now() + lasts);
    let mut s = Stream {
        st: st.clone(),
        initial: Vec::new().into_iter(),
        initial_end: None,
        target: coll.clone(),
        sel,
        format,
        rx: None,
        pending: VecDeque::new(),
        deadline: timeout,
        bookmarks: flag("allowWatchBookmarks"),
        next_bookmark: next_bookmark(Instant::now(), timeout),
        last_rv: 0,
        shutdown: st.shutdown.clone(),
    };
    let ns = coll.namespace.as_deref();
    if initial {
        // The snapshot holds the stored objects (shared text, a pointer each); each is rendered
        // only when the client has taken what came before it.
        let (items, rv) = handlers::matching(&st, &coll, &Selectors::default())?;
        s.initial = items.into_iter();
        s.last_rv = rv;
        if flag("sendInitialEvents") {
            s.initial_end = Some(rv);
        }
        s.rx = Some(st.store.watch_bounded(coll.served.key(), ns, Some(rv))?);
    } else {
        // kube-apiserver passes this parse error on from its storage layer as a 500; here the
        // same text is the client's error, a 400 (README, deliberate differences).
        let since = if rv_param.is_empty() || rv_param == "0" {
            st.store.resource_version()
        } else {
            crate::listopts::parse_version(rv_param).map_err(ApiError::BadRequest)?
        };
        s.last_rv = since;
        match st.store.watch_bounded(coll.served.key(), ns, Some(since)) {
            Ok(rx) => s.rx = Some(rx),
            Err(e @ StoreError::Gone { .. }) => s.emit("ERROR", ApiError::Store(e).status()),
            Err(e) => return Err(e.into()),
        }
    }
    let body = Body::from_stream(futures_util::stream::unfold(s, |mut s| async move {
        s.next().await.map(|b| (Ok::<_, std::convert::Infallible>(b), s))
    }));
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body)
        .into_response())
}
