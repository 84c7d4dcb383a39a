//! One writer per object: every write of a volume or a claim goes through
//! [`crate::Controller`]'s `save_volume` or `save_claim` (`exec/save.rs`), which take turns per
//! object here.
//!
//! Why: several workers write the same object (the volume worker a volume's phase, the claim
//! worker its claimRef and Bound; the claim worker a claim's phase, a provisioning operation its
//! provisioner annotation). Two writes made from the same cached version race, and one gets a 409
//! and a retry with backoff (upstream, kubernetes/kubernetes#135127). Here the second writer
//! waits for the first, finds the cache newer than its base, sends nothing, and returns
//! [`crate::Error::Stale`]: its key is synced again at once, from the newer object. The write it
//! skipped could only have failed: the cache is never ahead of the API server.

use crate::error::{Error, Result};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// Per-object write turns, by object key.
#[derive(Default)]
pub(crate) struct Writers {
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Writers {
    /// Runs `write` in `key`'s turn, unless `cached` (read in the turn) is newer than `base`: then
    /// nothing is sent and the result is [`Error::Stale`].
    pub(crate) async fn write<T, F>(
        &self,
        key: &str,
        base: &ObjectMeta,
        cached: impl FnOnce() -> Option<String>,
        step: &'static str,
        write: F,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        let turn = self.turns.lock().unwrap().entry(key.to_string()).or_default().clone();
        let result = {
            let _mine = turn.lock().await;
            let cached = cached();
            let newer = cached.as_deref().is_some_and(|c| {
                Some(c) != base.resource_version.as_deref()
                    && crate::cache::is_newer_or_same(base.resource_version.as_deref(), Some(c))
            });
            if newer {
                Err(Error::Stale(step))
            } else {
                write.await
            }
        };
        let mut turns = self.turns.lock().unwrap();
        // The map's reference and ours: nobody else is waiting, so the entry can go.
        if Arc::strong_count(&turn) == 2 {
            turns.remove(key);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn meta(rv: &str) -> ObjectMeta {
        ObjectMeta { resource_version: Some(rv.into()), ..Default::default() }
    }

    #[tokio::test]
    async fn a_write_from_the_cached_version_is_sent() {
        let w = Writers::default();
        let r = w.write("ns/c", &meta("5"), || Some("5".into()), "saving", async { Ok(6) }).await;
        assert_eq!(r.unwrap(), 6);
        assert!(w.turns.lock().unwrap().is_empty(), "the turn is dropped once nobody waits");
    }

    #[tokio::test]
    async fn a_write_from_an_older_version_than_the_cache_sends_nothing_and_is_stale() {
        let w = Writers::default();
        let sent = AtomicUsize::new(0);
        let r = w
            .write("ns/c", &meta("5"), || Some("7".into()), "saving claim provisioner", async {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .await;
        assert!(matches!(r, Err(Error::Stale("saving claim provisioner"))), "{r:?}");
        assert_eq!(sent.load(Ordering::SeqCst), 0);
        // A cache that lost the object, or one behind the base (a watch not yet delivered), does
        // not stop the write: only the API server can refuse it.
        assert!(w.write("ns/c", &meta("5"), || None, "s", async { Ok(()) }).await.is_ok());
        assert!(w.write("ns/c", &meta("5"), || Some("4".into()), "s", async { Ok(()) }).await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_second_writer_of_one_object_waits_for_the_first_and_finds_its_base_stale() {
        let w = Arc::new(Writers::default());
        let cache = Arc::new(Mutex::new("5".to_string()));
        let (entered_tx, entered_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (w, cache) = (w.clone(), cache.clone());
            tokio::spawn(async move {
                let c = cache.clone();
                w.write("ns/c", &meta("5"), move || Some(c.lock().unwrap().clone()), "first", async move {
                    entered_tx.send(()).unwrap();
                    release_rx.await.unwrap();
                    *cache.lock().unwrap() = "6".into();
                    Ok(())
                })
                .await
            })
        };
        entered_rx.await.unwrap();
        // Another key is not held up by the first object's turn.
        assert!(w.write("ns/other", &meta("1"), || Some("1".into()), "other", async { Ok(()) }).await.is_ok());
        let second = {
            let (w, cache) = (w.clone(), cache.clone());
            tokio::spawn(async move {
                w.write("ns/c", &meta("5"), move || Some(cache.lock().unwrap().clone()), "second", async { Ok(()) })
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the second writer waits for the first one's turn");
        release_tx.send(()).unwrap();
        assert!(first.await.unwrap().is_ok());
        assert!(matches!(second.await.unwrap(), Err(Error::Stale("second"))));
        assert!(w.turns.lock().unwrap().is_empty());
    }
}
