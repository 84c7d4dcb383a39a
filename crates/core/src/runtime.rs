//! Running the controller on tokio: worker tasks per queue, the resync timer, and the timer that
//! releases delayed (backed-off) keys. Used by `up` and `run`; `simulate` drives the same
//! controller step by step instead.

use crate::controller::Controller;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Workers per queue by default: a sync mostly waits on API round trips or durable commits (a
/// bind is four sequential writes), so several workers per core keep the store busy; 8 per
/// core, at least 8, at most 64.
pub fn default_workers() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) * 8).clamp(8, 64)
}

/// Runs workers until `shutdown` resolves, then drains and stops.
pub async fn run(controller: Arc<Controller>, workers: usize, shutdown: impl Future<Output = ()>) {
    let workers = workers.max(1);
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let c = controller.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(key) = c.claim_queue.get().await {
                c.process_claim(key).await;
            }
        }));
        let c = controller.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(key) = c.volume_queue.get().await {
                c.process_volume(key).await;
            }
        }));
    }
    let c = controller.clone();
    let timers = tokio::spawn(async move {
        let period = c.config().resync_period;
        let mut next_resync = tokio::time::Instant::now() + period;
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            c.volume_queue.promote_due();
            c.claim_queue.promote_due();
            if tokio::time::Instant::now() >= next_resync {
                tracing::debug!("periodic resync");
                c.resync();
                next_resync = tokio::time::Instant::now() + period;
            }
        }
    });
    // The sweep of assets interrupted provisionings left behind, three times per resync period
    // (an asset goes at the second sweep that finds it unused: within 5 to 10 s by default).
    let c = controller.clone();
    let sweeper = tokio::spawn(async move {
        let period = (c.config().resync_period / 3).max(Duration::from_secs(1));
        loop {
            tokio::time::sleep(period).await;
            c.sweep_unused_assets().await;
        }
    });
    shutdown.await;
    timers.abort();
    sweeper.abort();
    controller.claim_queue.shutdown();
    controller.volume_queue.shutdown();
    for t in tasks {
        let _ = t.await;
    }
}
