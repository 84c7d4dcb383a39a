//! Load: a burst of concurrent client writes plus open watches against the durable server.
//! Every acknowledged write must be readable and seen by every watcher; latency percentiles are
//! printed for RELIABILITY.md. `PV_LOAD_N` sets the number of writes (default 2000).

use pv_apiserver::{Server, ServerConfig};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pv(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "nfs": {"server": "s", "path": "/x"}}})
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_concurrent_writes_and_watches_loses_nothing() {
    let n: usize = std::env::var("PV_LOAD_N").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let clients = 64;
    let watchers = 8;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::new(dir.path(), "127.0.0.1:0".parse().unwrap());
    cfg.tls = false;
    let h = Server::start(cfg).await.unwrap();
    let base = h.url().to_string();
    let token = h.token().to_string();
    let client = Client::new();

    // Watchers from the current version: each must see every create.
    let (_, list) = {
        let r = client.get(format!("{base}/api/v1/persistentvolumes")).bearer_auth(&token).send().await.unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut watch_tasks = Vec::new();
    for _ in 0..watchers {
        let url = format!("{base}/api/v1/persistentvolumes?watch=true&resourceVersion={rv}&timeoutSeconds=120");
        let req = client.get(url).bearer_auth(&token);
        watch_tasks.push(tokio::spawn(async move {
            let mut resp = req.send().await.unwrap();
            let mut seen = HashSet::new();
            let mut buf = Vec::new();
            while seen.len() < n {
                let chunk = match tokio::time::timeout(Duration::from_secs(60), resp.chunk()).await {
                    Ok(Ok(Some(c))) => c,
                    _ => break,
                };
                buf.extend_from_slice(&chunk);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    if let Ok(ev) = serde_json::from_slice::<Value>(&line) {
                        if ev["type"] == "ADDED" {
                            seen.insert(ev["object"]["metadata"]["name"].as_str().unwrap_or("").to_string());
                        }
                    }
                }
            }
            seen.len()
        }));
    }

    let t0 = Instant::now();
    let latencies = Arc::new(std::sync::Mutex::new(Vec::with_capacity(n)));
    let mut tasks = Vec::new();
    for w in 0..clients {
        let (client, base, token, latencies) = (client.clone(), base.clone(), token.clone(), latencies.clone());
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(clients) {
                let start = Instant::now();
                let r = client
                    .post(format!("{base}/api/v1/persistentvolumes"))
                    .bearer_auth(&token)
                    .json(&pv(&format!("load-{i}")))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::CREATED);
                latencies.lock().unwrap().push(start.elapsed());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let wall = t0.elapsed();
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort();
    println!(
        "{n} creates from {clients} clients with {watchers} watches: {:.2}s wall, {:.0} writes/s, latency p50 {:?} p99 {:?} max {:?}",
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.last().unwrap()
    );
    for t in watch_tasks {
        assert_eq!(t.await.unwrap(), n, "a watcher missed acknowledged writes");
    }
    let list: Value = client
        .get(format!("{base}/api/v1/persistentvolumes"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), n, "every acknowledged write is readable");
    h.shutdown().await.unwrap();
}
