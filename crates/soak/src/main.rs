//! `pv-soak`: hours of random churn against `pv-controller up`, or against a real control plane
//! (etcd + kube-apiserver + kube-controller-manager without its PV binder) with two
//! `pv-controller run` replicas under leader election, while processes are killed with SIGKILL
//! and paused with SIGSTOP past their lease and, in the real cluster, every connection between
//! the controller and kube-apiserver goes through a chaos proxy. Invariants are checked every
//! few seconds and once more after quiescence; see `check`.
//!
//! ```text
//! pv-soak up|real DURATION_S --bin PV_CONTROLLER --work DIR --repo REPO [--seed N]
//! ```
//! `scripts/soak.sh` builds and runs it. The last line is `soak: N operations, K kills, V
//! violations`; the exit code is 0 only when V is 0.
//!
//! Process kills (and pauses past a lease, which make a replica exit and restart) happen in the
//! first 60 % of the run only, so that the last 40 % measures memory and descriptors of
//! long-lived processes under churn and connection faults.

mod check;
mod churn;
mod kubelet;
mod procs;
mod proxy;

use check::{Checker, Endpoint, Graces};
use churn::Churn;
use procs::{Proc, Series};
use proxy::Proxy;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the checks run.
/// How long `up`'s memory grows by design: its watch history keeps every change for 15 minutes
/// (bounded in bytes and events; `crates/apiserver/src/limits.rs`), so RSS is judged only after
/// that window, plus a minute.
const UP_HISTORY_FILL: Duration = Duration::from_secs(16 * 60);

const CHECK_EVERY: Duration = Duration::from_secs(5);
/// How long findings may last during the churn before they count.
const GRACES: Graces = Graces {
    invariant: Duration::from_secs(20),
    // A provisioned directory waits for its PV while the controller retries saving it: five
    // attempts 10 s apart (upstream's createProvisionedPVRetryCount and Interval), through an
    // API server killed and restarted, then it deletes the directory; plus a lease handover.
    asset: Duration::from_secs(75),
    // Covers a stalled watch: the proxy stalls one for at most 20 s, then resets it.
    cache: Duration::from_secs(60),
};
/// How long after the churn stops every claim that can bind must be Bound.
const BIND_BOUND: Duration = Duration::from_secs(120);
/// Lease settings of the replicas.
const LEASE: [&str; 6] = [
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "500ms",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Up,
    Real,
}

struct Args {
    mode: Mode,
    duration: Duration,
    bin: PathBuf,
    work: PathBuf,
    repo: PathBuf,
    seed: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: pv-soak up|real DURATION_S --bin PATH --work DIR --repo DIR [--seed N]";
    anyhow::ensure!(a.len() >= 2, "{usage}");
    let mode = match a[0].as_str() {
        "up" => Mode::Up,
        "real" => Mode::Real,
        _ => anyhow::bail!("{usage}"),
    };
    let duration = Duration::from_secs(a[1].parse().map_err(|_| anyhow::anyhow!("{usage}"))?);
    let mut opts: HashMap<&str, &str> = HashMap::new();
    for pair in a[2..].chunks(2) {
        anyhow::ensure!(pair.len() == 2 && pair[0].starts_with("--"), "{usage}");
        opts.insert(&pair[0][2..], &pair[1]);
    }
    let get = |k: &str| opts.get(k).map(PathBuf::from).ok_or_else(|| anyhow::anyhow!("{usage}"));
    let seed = match opts.get("seed") {
        Some(s) => s.parse()?,
        None => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs(),
    };
    Ok(Args { mode, duration, bin: get("bin")?, work: get("work")?, repo: get("repo")?, seed })
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Everything that runs, by role.
struct Rig {
    procs: Vec<Proc>,
    /// Index of `up` (up mode) or of the replicas (real mode) in `procs`, with metrics address.
    controllers: Vec<(usize, SocketAddr)>,
    /// Index of kube-apiserver (real mode).
    apiserver: Option<usize>,
    /// Pids of processes only sampled (etcd).
    sampled: Vec<(String, PathBuf)>,
    proxy: Option<Proxy>,
    kubeconfig: PathBuf,
    root: PathBuf,
    cluster_dir: Option<PathBuf>,
}

async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let opts = pv_kube::connect::ClientOptions { kubeconfig: Some(kubeconfig.to_path_buf()), ..Default::default() };
    let config = pv_kube::connect::load_config(&opts).await?;
    Ok(pv_kube::connect::client(config, &opts)?)
}

async fn wait_api(c: &kube::Client, within: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(5), c.apiserver_version()).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    false
}

async fn rig_up(a: &Args) -> anyhow::Result<Rig> {
    let data = a.work.join("data");
    let (port, mport) = (free_port()?, free_port()?);
    let metrics: SocketAddr = format!("127.0.0.1:{mport}").parse()?;
    let argv = vec![
        a.bin.to_string_lossy().into_owned(),
        "up".into(),
        "--data-dir".into(),
        data.to_string_lossy().into_owned(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--metrics-addr".into(),
        metrics.to_string(),
    ];
    let mut up = Proc::new("up", argv, a.work.join("up.log"));
    up.start()?;
    let kubeconfig = data.join("kubeconfig");
    let t0 = Instant::now();
    while !kubeconfig.exists() {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(60), "up wrote no kubeconfig within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Rig {
        procs: vec![up],
        controllers: vec![(0, metrics)],
        apiserver: None,
        sampled: vec![],
        proxy: None,
        kubeconfig,
        root: data.join("volumes"),
        cluster_dir: None,
    })
}

async fn rig_real(a: &Args) -> anyhow::Result<Rig> {
    let cluster = a.work.join("cluster");
    let out = std::process::Command::new(a.repo.join("scripts/real-cluster.sh"))
        .arg("up")
        .arg(&cluster)
        .args(["--kcm", "*,-persistentvolume-binder-controller"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(out.status.success(), "real-cluster.sh up failed:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    let server =
        text.lines().find_map(|l| l.strip_prefix("server: ")).ok_or_else(|| anyhow::anyhow!("no server line"))?;
    let upstream: SocketAddr = server.trim_start_matches("https://").parse()?;
    let proxy = Proxy::start(upstream).await?;
    let kubeconfig = cluster.join("kubeconfig");
    let via_proxy = a.work.join("replica.kubeconfig");
    let kc = std::fs::read_to_string(&kubeconfig)?;
    std::fs::write(&via_proxy, kc.replace(server, &format!("https://{}", proxy.addr)))?;
    let root = a.work.join("volumes");
    std::fs::create_dir_all(&root)?;
    let mut procs = Vec::new();
    let mut controllers = Vec::new();
    for r in ["a", "b"] {
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let mut argv: Vec<String> = vec![
            a.bin.to_string_lossy().into_owned(),
            "run".into(),
            "--kubeconfig".into(),
            via_proxy.to_string_lossy().into_owned(),
            "--leader-elect".into(),
            "--leader-elect-namespace".into(),
            "kube-system".into(),
            "--metrics-addr".into(),
            metrics.to_string(),
            "--hostpath-root".into(),
            root.to_string_lossy().into_owned(),
        ];
        argv.extend(LEASE.iter().map(|s| s.to_string()));
        let mut p = Proc::new(&format!("replica-{r}"), argv, a.work.join(format!("replica-{r}.log")));
        p.start()?;
        controllers.push((procs.len(), metrics));
        procs.push(p);
    }
    let logs = cluster.join("logs");
    procs.push(Proc::adopt(
        "kube-apiserver",
        &cluster.join("pids/kube-apiserver.pid"),
        logs.join("kube-apiserver.log"),
    )?);
    Ok(Rig {
        apiserver: Some(procs.len() - 1),
        procs,
        controllers,
        sampled: vec![("etcd".into(), cluster.join("pids/etcd.pid"))],
        proxy: Some(proxy),
        kubeconfig,
        root,
        cluster_dir: Some(cluster),
    })
}

/// Fault and restart counts.
#[derive(Default)]
struct FaultCounts {
    kills: AtomicU64,
    pauses: AtomicU64,
    restarts: AtomicU64,
    self_exits: AtomicU64,
    by_kind: Mutex<HashMap<String, u64>>,
}

impl FaultCounts {
    fn note(&self, kind: &str) {
        *self.by_kind.lock().unwrap().entry(kind.to_string()).or_default() += 1;
    }
}

fn leader(rig: &Rig, metrics: &HashMap<usize, String>) -> Option<usize> {
    rig.controllers.iter().map(|(i, _)| *i).find(|i| {
        metrics
            .get(i)
            .is_some_and(|m| m.lines().any(|l| l == "leader_election_master_status{name=\"pv-controller\"} 1"))
    })
}

async fn scrape(rig: &Arc<Mutex<Rig>>) -> HashMap<usize, String> {
    let eps: Vec<(usize, SocketAddr)> = rig.lock().unwrap().controllers.clone();
    let mut out = HashMap::new();
    for (i, addr) in eps {
        if let Some(m) = check::http_get(addr, "/metrics").await {
            out.insert(i, m);
        }
    }
    out
}

/// One random fault. `kills`: process kills and pauses are allowed now.
async fn fault(mode: Mode, rig: &Arc<Mutex<Rig>>, rng: &mut SmallRng, kills: bool, f: &FaultCounts) {
    let metrics = if mode == Mode::Real { scrape(rig).await } else { HashMap::new() };
    let mut r = rig.lock().unwrap();
    let proxy = r.proxy.clone();
    let choice = rng.random_range(0..100);
    match mode {
        Mode::Up => {
            let up = &mut r.procs[0];
            if !up.serving() {
                return;
            }
            if kills && choice < 50 {
                up.kill9(Duration::from_millis(rng.random_range(0..3000)));
                f.kills.fetch_add(1, Ordering::Relaxed);
                f.note("kill -9 up");
            } else {
                up.pause(Duration::from_millis(rng.random_range(1000..8000)));
                f.pauses.fetch_add(1, Ordering::Relaxed);
                f.note("SIGSTOP up");
            }
        }
        Mode::Real => {
            let proxy = proxy.expect("a proxy");
            let lead = leader(&r, &metrics);
            match choice {
                0..=14 if kills => {
                    let target = lead.or(r.controllers.first().map(|c| c.0));
                    if let Some(i) = target.filter(|i| r.procs[*i].serving()) {
                        r.procs[i].kill9(Duration::from_millis(rng.random_range(500..5000)));
                        f.kills.fetch_add(1, Ordering::Relaxed);
                        f.note(if Some(i) == lead { "kill -9 leader" } else { "kill -9 replica" });
                    }
                }
                15..=24 if kills => {
                    if let Some(i) = lead.filter(|i| r.procs[*i].serving()) {
                        // Past the 3 s lease: the standby takes over; the paused one must stop
                        // writing when it wakes (it exits and is restarted).
                        r.procs[i].pause(Duration::from_millis(rng.random_range(4000..8000)));
                        f.pauses.fetch_add(1, Ordering::Relaxed);
                        f.note("SIGSTOP leader past its lease");
                    }
                }
                25..=31 if kills => {
                    let i = r.apiserver.expect("kube-apiserver");
                    if r.procs[i].serving() {
                        r.procs[i].kill9(Duration::from_millis(rng.random_range(0..2000)));
                        f.kills.fetch_add(1, Ordering::Relaxed);
                        f.note("kill -9 kube-apiserver");
                    }
                }
                0..=44 => {
                    proxy.reset_one(rng.random::<u64>() as usize);
                    f.note("proxy: reset a connection");
                }
                45..=54 => {
                    proxy.reset_all();
                    f.note("proxy: reset every connection");
                }
                55..=64 => {
                    proxy.drop_one(rng.random::<u64>() as usize);
                    f.note("proxy: close a connection");
                }
                65..=79 => {
                    let secs = rng.random_range(5..=20);
                    proxy.stall(rng.random::<u64>() as usize, Duration::from_secs(secs), rng.random_bool(0.7));
                    f.note("proxy: stall a long-lived connection");
                }
                80..=91 => {
                    proxy.latency(rng.random_range(20..300), Duration::from_secs(rng.random_range(10..30)));
                    f.note("proxy: latency window");
                }
                _ => {
                    proxy.refuse(Duration::from_secs(rng.random_range(2..8)));
                    f.note("proxy: refuse new connections");
                }
            }
        }
    }
}

/// Continues paused processes at their time, restarts killed and exited ones. `now`: at once.
fn supervise(rig: &mut Rig, f: &FaultCounts, violations: &mut Vec<String>, now: bool, mode: Mode) {
    for (i, p) in rig.procs.iter_mut().enumerate() {
        let before = p.instance;
        match p.supervise(now) {
            Ok(Some(status)) => {
                f.self_exits.fetch_add(1, Ordering::Relaxed);
                let is_replica = rig.controllers.iter().any(|c| c.0 == i) && mode == Mode::Real;
                // A replica exits 1 when it finds it lost its lease (by design: it restarts
                // as a fresh candidate). Anything else is a crash.
                if !(is_replica && status.contains("exit status: 1")) {
                    let v = format!("{} exited by itself: {status} (log: {})", p.name, p.log().display());
                    eprintln!("VIOLATION: {v}");
                    violations.push(v);
                }
            }
            Ok(None) => {}
            Err(e) => eprintln!("soak: supervising {}: {e:#}", p.name),
        }
        if p.instance > before {
            f.restarts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn endpoints(rig: &Rig) -> Vec<Endpoint> {
    rig.controllers
        .iter()
        .filter(|(i, _)| rig.procs[*i].serving())
        .map(|(i, addr)| Endpoint { id: format!("{}#{}", rig.procs[*i].name, rig.procs[*i].instance), addr: *addr })
        .collect()
}

fn sample_all(rig: &Rig, t: f64, series: &mut HashMap<(String, u64), Series>) {
    let mut add = |name: &str, instance: u64, pid: u32| {
        if let Some((rss, fds)) = procs::sample(pid) {
            let s = series.entry((name.to_string(), instance)).or_default();
            s.points.push((t, rss as f64, fds as f64));
        }
    };
    for p in &rig.procs {
        if let Some(pid) = p.pid().filter(|_| p.restart_at.is_none()) {
            add(&p.name, p.instance, pid);
        }
    }
    for (name, pidfile) in &rig.sampled {
        if let Some(pid) = std::fs::read_to_string(pidfile).ok().and_then(|s| s.trim().parse().ok()) {
            add(name, 1, pid);
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(1);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    match rt.block_on(soak(args)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            println!("soak: 0 operations, 0 kills, 1 violations");
            ExitCode::from(2)
        }
    }
}

async fn soak(a: Args) -> anyhow::Result<usize> {
    std::fs::create_dir_all(&a.work)?;
    println!("soak: {:?} for {} s, seed {}, work {}", a.mode, a.duration.as_secs(), a.seed, a.work.display());
    let rig = match a.mode {
        Mode::Up => rig_up(&a).await?,
        Mode::Real => rig_real(&a).await?,
    };
    let rig = Arc::new(Mutex::new(rig));
    // SIGINT/SIGTERM end the run early, but still stop every process it started.
    let result = tokio::select! {
        r = drive(&a, &rig) => r,
        _ = interrupted() => Err(anyhow::anyhow!("interrupted")),
    };
    {
        let mut r = rig.lock().unwrap();
        for p in r.procs.iter_mut() {
            p.stop();
        }
        if let Some(dir) = &r.cluster_dir {
            let _ = std::process::Command::new(a.repo.join("scripts/real-cluster.sh"))
                .arg("down")
                .arg(dir)
                .stdout(std::process::Stdio::null())
                .status();
        }
    }
    result
}

async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else { return std::future::pending().await };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn drive(a: &Args, rig: &Arc<Mutex<Rig>>) -> anyhow::Result<usize> {
    let (kubeconfig, root) = {
        let r = rig.lock().unwrap();
        (r.kubeconfig.clone(), r.root.clone())
    };
    let c = client(&kubeconfig).await?;
    anyhow::ensure!(wait_api(&c, Duration::from_secs(60)).await, "the API server did not answer within 60 s");
    let churn = Arc::new(Churn::new(c.clone(), std::fs::canonicalize(&root).unwrap_or(root)));
    churn.setup().await?;
    let mut checker = Checker::new(c.clone(), churn.clone());
    let faults = Arc::new(FaultCounts::default());
    let mut violations: Vec<String> = Vec::new();
    let start = Instant::now();
    let end = start + a.duration;
    let kills_until = start + a.duration.mul_f64(0.6);
    let stop = Arc::new(AtomicBool::new(false));

    let churn_task = {
        let (churn, stop, seed) = (churn.clone(), stop.clone(), a.seed);
        tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed);
            while !stop.load(Ordering::Relaxed) {
                // A paused or dead server must not hold the churn (or the end of the run).
                let _ = tokio::time::timeout(Duration::from_secs(10), churn.step(&mut rng)).await;
                tokio::time::sleep(Duration::from_millis(rng.random_range(100..300))).await;
            }
        })
    };
    // Against the real cluster `run` recycles through recycler pods: stand in for their kubelet.
    let kubelet_stats = Arc::new(kubelet::KubeletStats::default());
    let kubelet_task = (a.mode == Mode::Real)
        .then(|| tokio::spawn(kubelet::run(c.clone(), "default", churn.root.clone(), kubelet_stats.clone())));
    let fault_task = {
        let (rig, stop, faults, seed, mode) = (rig.clone(), stop.clone(), faults.clone(), a.seed, a.mode);
        tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed.wrapping_add(1));
            tokio::time::sleep(Duration::from_secs(10)).await;
            while !stop.load(Ordering::Relaxed) {
                fault(mode, &rig, &mut rng, Instant::now() < kills_until, &faults).await;
                let pause = match mode {
                    Mode::Up => rng.random_range(10..30),
                    Mode::Real => rng.random_range(4..15),
                };
                tokio::time::sleep(Duration::from_secs(pause)).await;
            }
        })
    };

    let mut series: HashMap<(String, u64), Series> = HashMap::new();
    let mut next_check = Instant::now() + CHECK_EVERY;
    let mut next_report = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(500)).await;
        supervise(&mut rig.lock().unwrap(), &faults, &mut violations, false, a.mode);
        if Instant::now() >= next_check {
            next_check = Instant::now() + CHECK_EVERY;
            let eps = endpoints(&rig.lock().unwrap());
            checker.round(&eps, GRACES).await;
            sample_all(&rig.lock().unwrap(), start.elapsed().as_secs_f64(), &mut series);
        }
        if Instant::now() >= next_report {
            next_report = Instant::now() + Duration::from_secs(60);
            let s = &churn.stats;
            println!(
                "  t={:>5} s: {} ops ({} refused, {} unanswered), {} kills, {} pauses, {} check rounds, {} violations",
                start.elapsed().as_secs(),
                s.ok.load(Ordering::Relaxed) + s.refused.load(Ordering::Relaxed) + s.failed.load(Ordering::Relaxed),
                s.refused.load(Ordering::Relaxed),
                s.failed.load(Ordering::Relaxed),
                faults.kills.load(Ordering::Relaxed),
                faults.pauses.load(Ordering::Relaxed),
                checker.counts.rounds,
                checker.violations.len() + violations.len()
            );
        }
    }

    // --- quiescence ----------------------------------------------------------------------------
    stop.store(true, Ordering::Relaxed);
    // Not awaited: a step may wait for a paused server that only the supervisor below resumes.
    churn_task.abort();
    fault_task.abort();
    let quiet = Instant::now();
    {
        let mut r = rig.lock().unwrap();
        if let Some(p) = &r.proxy {
            p.heal();
        }
        supervise(&mut r, &faults, &mut violations, true, a.mode);
    }
    anyhow::ensure!(wait_api(&c, Duration::from_secs(60)).await, "the API server did not come back within 60 s");
    let mut bound_after = None;
    let mut last = Vec::new();
    while quiet.elapsed() < BIND_BOUND {
        supervise(&mut rig.lock().unwrap(), &faults, &mut violations, false, a.mode);
        if let Ok(l) = checker.lists().await {
            last = check::bindable_unbound(&l);
            last.extend(check::unreclaimed(&l, &churn.root));
            if last.is_empty() {
                bound_after = Some(quiet.elapsed());
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for f in &last {
        let v = format!("{f} {} s after the churn stopped", BIND_BOUND.as_secs());
        eprintln!("VIOLATION: {v}");
        violations.push(v);
    }
    // The final checks must hold at one moment within a minute.
    let final_t0 = Instant::now();
    let mut held_after = None;
    while final_t0.elapsed() < Duration::from_secs(60) {
        supervise(&mut rig.lock().unwrap(), &faults, &mut violations, false, a.mode);
        let eps = endpoints(&rig.lock().unwrap());
        let want = if a.mode == Mode::Real { 2 } else { 1 };
        let findings = checker.round(&eps, Graces::ENDLESS).await;
        if findings.is_empty() && eps.len() == want {
            held_after = Some(final_t0.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    if held_after.is_none() {
        // Whatever is still wrong now counts.
        let eps = endpoints(&rig.lock().unwrap());
        let want = if a.mode == Mode::Real { 2 } else { 1 };
        for f in checker.round(&eps, Graces::NONE).await {
            if f.ends_with("/debug/caches did not answer") {
                violations.push(format!("after quiescence {f}"));
            }
        }
        if eps.len() != want {
            violations.push(format!("after quiescence {} of {want} controller(s) serve /debug/caches", eps.len()));
        }
    }
    sample_all(&rig.lock().unwrap(), start.elapsed().as_secs_f64(), &mut series);

    // --- report ----------------------------------------------------------------------------------
    let logs: Vec<(String, PathBuf)> = {
        let r = rig.lock().unwrap();
        r.controllers.iter().map(|(i, _)| (r.procs[*i].name.clone(), r.procs[*i].log().to_path_buf())).collect()
    };
    for (name, log) in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let panics = text.lines().filter(|l| l.contains("panicked at")).count();
        if panics > 0 {
            violations.push(format!("{name} panicked {panics} time(s) (log: {})", log.display()));
        }
    }
    let minutes = a.duration.as_secs_f64() / 60.0;
    println!(
        "memory and descriptors (after a warm-up of 60 s, {} s for `up` while its watch history fills, or a quarter of each process's life):",
        UP_HISTORY_FILL.as_secs()
    );
    let mut keys: Vec<&(String, u64)> = series.keys().collect();
    keys.sort();
    let mut longest: HashMap<&str, (f64, String)> = HashMap::new();
    for k in keys {
        let warmup = if k.0 == "up" { UP_HISTORY_FILL.as_secs_f64() } else { 60.0 };
        let Some(t) = series[k].trend(warmup) else { continue };
        let line = format!(
            "  {}#{}: {:.0} s measured, RSS mean {:.1} MiB, slope {:+.1} MiB/h (fit {:+.1} MiB over the window), fds {}→{} ({:+.1}/h)",
            k.0, k.1, t.window_s, t.rss_mean_mib, t.rss_mib_per_h, t.rss_growth_mib, t.fds.0, t.fds.1, t.fds_per_h
        );
        println!("{line}");
        let ours = k.0 == "up" || k.0.starts_with("replica");
        // Judged only on a long window: memory that keeps growing, or descriptors that leak.
        if ours && t.window_s >= 300.0 {
            if t.rss_growth_mib > (0.10 * t.rss_mean_mib).max(16.0) {
                violations
                    .push(format!("{}#{}: RSS grew {:+.1} MiB in {:.0} s", k.0, k.1, t.rss_growth_mib, t.window_s));
            }
            if t.fds_per_h * t.window_s / 3600.0 > 20.0 {
                violations.push(format!("{}#{}: descriptors grew {}→{}", k.0, k.1, t.fds.0, t.fds.1));
            }
        }
        let e = longest.entry(&k.0).or_insert((0.0, String::new()));
        if t.window_s > e.0 {
            *e = (t.window_s, line);
        }
    }
    let s = &churn.stats;
    let (ok, refused, failed) =
        (s.ok.load(Ordering::Relaxed), s.refused.load(Ordering::Relaxed), s.failed.load(Ordering::Relaxed));
    let ops = ok + refused + failed;
    let kills = faults.kills.load(Ordering::Relaxed);
    if let Some(t) = kubelet_task {
        t.abort();
        println!(
            "recycler pods (the runner as their kubelet): {} succeeded, {} failed",
            kubelet_stats.recycled.load(Ordering::Relaxed),
            kubelet_stats.failed.load(Ordering::Relaxed)
        );
    }
    let cc = &checker.counts;
    println!("duration: {:.1} min, seed {}", minutes, a.seed);
    println!("operations: {ops} ({ok} acknowledged, {refused} refused by the server as the state moved on, {failed} unanswered)");
    let mut kinds: Vec<(String, u64)> = faults.by_kind.lock().unwrap().iter().map(|(k, v)| (k.clone(), *v)).collect();
    kinds.sort();
    println!(
        "faults: {kills} kill -9, {} SIGSTOP, {} restarts, {} exits by a replica that lost its lease",
        faults.pauses.load(Ordering::Relaxed),
        faults.restarts.load(Ordering::Relaxed),
        faults.self_exits.load(Ordering::Relaxed)
    );
    for (k, v) in kinds {
        println!("  {k}: {v}");
    }
    if let Some(p) = &rig.lock().unwrap().proxy {
        let ps = &p.stats;
        println!(
            "proxy: {} connections, {} reset, {} closed, {} stalled, {} refused, {} latency windows",
            ps.connections.load(Ordering::Relaxed),
            ps.resets.load(Ordering::Relaxed),
            ps.drops.load(Ordering::Relaxed),
            ps.stalls.load(Ordering::Relaxed),
            ps.refused.load(Ordering::Relaxed),
            ps.latency_windows.load(Ordering::Relaxed)
        );
    }
    println!(
        "checks: {} rounds, {} invariant checks, {} cache comparisons ({} equal at once, the rest converged within {} s), {} volume-marker checks, {} acknowledged-create checks",
        cc.rounds, cc.invariant_checks, cc.cache_checks, cc.cache_equal, GRACES.cache.as_secs(), cc.marker_checks, cc.ack_checks
    );
    match bound_after {
        Some(d) => {
            println!("quiescence: every claim that can bind Bound {:.1} s after the churn stopped", d.as_secs_f64())
        }
        None => println!("quiescence: claims still unbound after {} s", BIND_BOUND.as_secs()),
    }
    match held_after {
        Some(d) => println!(
            "final checks (invariants, caches equal to the API with resourceVersions): held after {:.1} s",
            d.as_secs_f64()
        ),
        None => println!("final checks: did not hold within 60 s"),
    }
    let total = violations.len() + checker.violations.len();
    for v in violations.iter().chain(&checker.violations) {
        println!("violation: {v}");
    }
    println!("soak: {ops} operations, {kills} kills, {total} violations");
    Ok(total)
}
