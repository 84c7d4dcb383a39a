//! Running the binder on tokio: its queues on a [`crate::runner::Runner`] in real time (worker
//! tasks per queue, one timer for delayed keys and the periodic resync), the sweep of unused
//! assets and the event writer. Used by `up` and `run`; `simulate` steps the same runner.

use crate::controller::Controller;
use crate::runner::Periodic;
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

/// Runs workers until `shutdown` resolves, then drains and stops: the binder's queues on a
/// [`crate::runner::Runner`] with the periodic resync, the sweep of unused assets and the event
/// writer beside it.
pub async fn run(controller: Arc<Controller>, workers: usize, shutdown: impl Future<Output = ()>) {
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
    let c = controller.clone();
    let resync = Periodic {
        period: controller.config().resync_period,
        run: Box::new(move || {
            tracing::debug!("periodic resync");
            c.resync();
        }),
    };
    // The sweep stops with the shutdown, before the workers drain.
    let shutdown = async move {
        shutdown.await;
        sweeper.abort();
    };
    controller.runner(false).run(workers, Some(resync), shutdown).await;
    // What the workers recorded last is still written.
    let _ = events_stop.send(());
    let _ = events.await;
}
