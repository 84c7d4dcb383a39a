//! The event recorder remembers a bounded number of distinct events (as client-go's correlator
//! does with its 4096-entry LRU): a controller that runs for months over objects that come and go
//! does not grow without end, and a repeat of a remembered event still counts on its Event.

use pv_core::events::{Recorder, QUEUE_LENGTH, REMEMBERED};
use pv_core::SystemClock;
use pv_local::MemApi;
use pv_model::k8s::{ObjectMeta, PersistentVolume};
use pv_store::Store;
use std::sync::Arc;

fn volume(i: usize, rv: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("pv-{i}")),
            uid: Some(format!("uid-{i}")),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn events(store: &Store) -> Vec<serde_json::Value> {
    pv_sim::invariants::listed(store, "events")
}

fn count_for(store: &Store, name: &str) -> Vec<i64> {
    events(store)
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| e["count"].as_i64().unwrap_or(1))
        .collect()
}

#[tokio::test]
async fn the_recorder_forgets_the_least_recently_used_events_beyond_its_bound() {
    let store = Arc::new(Store::new());
    let recorder = Recorder::new(Arc::new(MemApi::new(store.clone())), SystemClock::new());
    let n = REMEMBERED + 500;
    for i in 0..n {
        recorder.event(&volume(i, "1"), "Warning", "VolumeFailedDelete", "gone").await;
        recorder.flush().await;
    }
    assert_eq!(events(&store).len(), n, "every event was written");
    assert_eq!(recorder.remembered(), REMEMBERED, "the recorder keeps only the most recent");

    // A remembered event repeats: counted on its one Event.
    let last = n - 1;
    recorder.event(&volume(last, "2"), "Warning", "VolumeFailedDelete", "gone").await;
    recorder.flush().await;
    assert_eq!(count_for(&store, &format!("pv-{last}")), vec![2]);

    // A forgotten one starts a new Event.
    recorder.event(&volume(0, "2"), "Warning", "VolumeFailedDelete", "gone").await;
    recorder.flush().await;
    let mut first = count_for(&store, "pv-0");
    first.sort();
    assert_eq!(first, vec![1, 1]);
    assert_eq!(recorder.remembered(), REMEMBERED);
}

#[tokio::test]
async fn a_changing_detail_updates_the_one_event_of_an_unchanged_message() {
    let store = Arc::new(Store::new());
    let recorder = Recorder::new(Arc::new(MemApi::new(store.clone())), SystemClock::new());
    let base = "no persistent volumes available for this claim and no storage class is set";
    recorder.event_with_detail(&volume(1, "1"), "Normal", "FailedBinding", base, " (1 volume: 1 too small)").await;
    recorder.event_with_detail(&volume(1, "1"), "Normal", "FailedBinding", base, " (2 volumes: 2 too small)").await;
    assert!(events(&store).is_empty(), "recording does not wait for the write");
    assert_eq!(recorder.flush().await, 2);
    let all = events(&store);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["count"], 2);
    assert_eq!(all[0]["message"], format!("{base} (2 volumes: 2 too small)"));
}

#[tokio::test]
async fn recording_never_waits_and_a_full_queue_drops_what_comes_beyond_it() {
    let store = Arc::new(Store::new());
    let recorder = Recorder::new(Arc::new(MemApi::new(store.clone())), SystemClock::new());
    for i in 0..QUEUE_LENGTH + 10 {
        recorder.event(&volume(i, "1"), "Warning", "VolumeFailedDelete", "gone").await;
    }
    assert_eq!(recorder.pending(), QUEUE_LENGTH);
    assert_eq!(recorder.dropped.load(std::sync::atomic::Ordering::Relaxed), 10);
    assert_eq!(recorder.flush().await, QUEUE_LENGTH);
    assert_eq!(events(&store).len(), QUEUE_LENGTH, "the queued events are written, in order");
    assert_eq!(count_for(&store, "pv-0"), vec![1]);
    assert!(count_for(&store, &format!("pv-{}", QUEUE_LENGTH)).is_empty(), "the dropped ones are not");
}
