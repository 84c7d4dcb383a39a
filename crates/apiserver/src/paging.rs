//! `limit`/`continue` paging from one snapshot, as kube-apiserver pages from one etcd revision.
//!
//! Why a snapshot: clients (kube-runtime's watcher, client-go's reflector) list in pages and
//! then watch from the resourceVersion the pages report. If each page were read from the store
//! as it is at that moment, an object changed after its page was read but before the last page
//! would be missed twice: its page shows the old state and the watch starts after the change.
//! So the first page of a paged list records the whole (filtered) result under the version it
//! was read at, and every continuation reads the same record and reports the same version.
//!
//! Records are held for [`KEEP`] and at most [`MAX_SNAPSHOTS`] at a time; a continue token
//! whose record is gone (expired, evicted, or the server restarted) gets 410 `Expired`, as
//! kube-apiserver answers a token older than its compaction, and clients list again.

use crate::error::{ApiError, Result};
use base64::Engine;
use pv_store::Object;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a paged list stays continuable.
pub const KEEP: Duration = Duration::from_secs(300);
/// Paged lists held at once; the oldest is dropped first.
pub const MAX_SNAPSHOTS: usize = 64;

struct Snapshot {
    id: u64,
    rv: u64,
    items: Arc<Vec<Object>>,
    taken: Instant,
}

/// The held paged lists.
#[derive(Default)]
pub struct Snapshots {
    held: Mutex<(u64, VecDeque<Snapshot>)>,
}

/// A continue token: which snapshot, and the key of the last object already returned.
#[derive(Serialize, Deserialize)]
struct Token {
    rv: u64,
    snapshot: u64,
    start: (String, String),
}

/// One page and how to get the next.
pub struct Page {
    /// The objects of this page.
    pub items: Vec<Object>,
    /// The version every page of this list reports.
    pub rv: u64,
    /// The token for the next page, when there is one.
    pub next: Option<String>,
    /// Objects after this page.
    pub remaining: usize,
}

fn expired() -> ApiError {
    ApiError::Expired(
        "The provided continue parameter is too old to display a consistent list result. You can start a new \
         list without the continue parameter."
            .into(),
    )
}

fn encode(t: &Token) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(t).unwrap_or_default())
}

fn decode(token: &str) -> Result<Token> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| ApiError::BadRequest("invalid continue token".into()))
}

impl Snapshots {
    /// Pages a list. `read` gives the whole filtered result, sorted by `key` (namespace, name), and
    /// its version; it is called only for a first page. `limit` 0 means everything at once.
    pub fn page(
        &self,
        limit: usize,
        token: Option<&str>,
        key: impl Fn(&Object) -> (String, String),
        read: impl FnOnce() -> Result<(Vec<Object>, u64)>,
    ) -> Result<Page> {
        let (items, rv, snapshot, start) = match token.filter(|t| !t.is_empty()) {
            Some(t) => {
                let t = decode(t)?;
                let items = self.find(t.snapshot, t.rv).ok_or_else(expired)?;
                (items, t.rv, Some(t.snapshot), Some(t.start))
            }
            None => {
                let (items, rv) = read()?;
                (Arc::new(items), rv, None, None)
            }
        };
        let from = match &start {
            Some(s) => items.partition_point(|o| key(o) <= *s),
            None => 0,
        };
        let rest = &items[from..];
        if limit == 0 || rest.len() <= limit {
            return Ok(Page { items: rest.to_vec(), rv, next: None, remaining: 0 });
        }
        let page = rest[..limit].to_vec();
        let snapshot = match snapshot {
            Some(id) => id,
            None => self.hold(rv, items.clone()),
        };
        let start = key(&page[limit - 1]);
        Ok(Page { items: page, rv, next: Some(encode(&Token { rv, snapshot, start })), remaining: rest.len() - limit })
    }

    fn find(&self, id: u64, rv: u64) -> Option<Arc<Vec<Object>>> {
        let mut held = self.held.lock().unwrap();
        held.1.retain(|s| s.taken.elapsed() < KEEP);
        held.1.iter().find(|s| s.id == id && s.rv == rv).map(|s| s.items.clone())
    }

    fn hold(&self, rv: u64, items: Arc<Vec<Object>>) -> u64 {
        let mut held = self.held.lock().unwrap();
        held.0 += 1;
        let id = held.0;
        held.1.retain(|s| s.taken.elapsed() < KEEP);
        while held.1.len() >= MAX_SNAPSHOTS {
            held.1.pop_front();
        }
        held.1.push_back(Snapshot { id, rv, items, taken: Instant::now() });
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn objs(names: &[&str]) -> Vec<Object> {
        names.iter().map(|n| Object::new(&json!({"metadata": {"name": n}}))).collect()
    }
    fn key(o: &Object) -> (String, String) {
        o.key()
    }
    fn names(p: &Page) -> Vec<String> {
        p.items.iter().map(|o| key(o).1).collect()
    }

    #[test]
    fn continuations_read_the_first_pages_snapshot() {
        let s = Snapshots::default();
        let p1 = s.page(2, None, key, || Ok((objs(&["a", "b", "c", "d", "e"]), 7))).unwrap();
        assert_eq!(names(&p1), ["a", "b"]);
        assert_eq!((p1.rv, p1.remaining), (7, 3));
        // The store has moved on; the continuation must not read it.
        let p2 = s.page(2, p1.next.as_deref(), key, || panic!("a continuation re-read the store")).unwrap();
        assert_eq!(names(&p2), ["c", "d"]);
        assert_eq!(p2.rv, 7);
        let p3 = s.page(2, p2.next.as_deref(), key, || unreachable!()).unwrap();
        assert_eq!(names(&p3), ["e"]);
        assert!(p3.next.is_none());
    }

    #[test]
    fn unknown_or_evicted_snapshots_are_expired_and_garbage_is_bad_request() {
        let s = Snapshots::default();
        let first = s.page(1, None, key, || Ok((objs(&["a", "b"]), 1))).unwrap();
        for i in 0..MAX_SNAPSHOTS {
            s.page(1, None, key, || Ok((objs(&["a", "b"]), i as u64 + 2))).unwrap();
        }
        let e = s.page(1, first.next.as_deref(), key, || unreachable!()).err().unwrap();
        assert_eq!(e.code(), 410);
        let e = s.page(1, Some("!!"), key, || unreachable!()).err().unwrap();
        assert_eq!(e.code(), 400);
    }

    #[test]
    fn no_limit_returns_everything_without_holding_a_snapshot() {
        let s = Snapshots::default();
        let p = s.page(0, None, key, || Ok((objs(&["a", "b"]), 3))).unwrap();
        assert_eq!(names(&p), ["a", "b"]);
        assert!(p.next.is_none());
        assert!(s.held.lock().unwrap().1.is_empty());
    }
}
