//! Running the controller on tokio: worker tasks per queue, the resync timer, and the timer that
//! releases delayed (backed-off) keys. Used by `up` and `run`; `simulate` drives the same
//! controller step by step instead.

use crate::controller::Controller;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Workers per queue by default: a sync mostly waits on API round trips or durable commits (a
/// bind is four sequential writes), so throughput is workers / (4 × round trip) until the API
/// server is saturated, and a server saturated by many clients gives each a share that grows
/// with what it keeps in flight. 128 per core, at least 64, at most 256 (BENCHMARKS.md,
/// "Workers per queue, against a real kube-apiserver").
pub fn default_workers() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) * 128).clamp(64, 256)
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
    // One timer releases delayed (backed-off) keys and runs the periodic resync: it sleeps on the
    // controller's clock until the earliest of the next due key and the next resync, and wakes
    // sooner when a key is delayed to before that.
    let c = controller.clone();
    let timers = tokio::spawn(async move {
        let period = c.config().resync_period.as_millis() as u64;
        let clock = c.clock().clone();
        let mut next_resync = clock.now_ms() + period;
        let timer = c.timer();
        loop {
            timer.promote_due();
            let now = clock.now_ms();
            if now >= next_resync {
                tracing::debug!("periodic resync");
                c.resync();
                next_resync = now + period;
            }
            timer.sleep_until(next_resync).await;
        }
    });
    // The sweep of assets interrupted provisionings left behind, three times per resync period
    // (an asset goes at the second sweep that finds it unused: within 5 to 10 s by default).
    let c = controller.clone();
    let sweeper = tokio::spawn(async move {
        let period = (c.config().resync_period / 3).max(Duration::from_secs(1));
        let clock = c.clock().clone();
        loop {
            clock.sleep(period).await;
            c.sweep_unused_assets().await;
        }
    });
    // Events are written by one task, in the order they were recorded (see `events`).
    let (events_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let c = controller.clone();
    let events = tokio::spawn(async move {
        c.recorder()
            .run(async move {
                let _ = stopped.await;
            })
            .await
    });
    shutdown.await;
    timers.abort();
    sweeper.abort();
    controller.claim_queue.shutdown();
    controller.volume_queue.shutdown();
    for t in tasks {
        let _ = t.await;
    }
    // What the workers recorded last is still written.
    let _ = events_stop.send(());
    let _ = events.await;
}
