//! Against an API server: creating the run's objects with bounded concurrency and rate, watching claims to Bound.

use super::*;
use pv_model::annotations as ann;
use pv_model::helpers::{claim_reference, set_annotation};

/// Hands out creation slots at `rate` per second (0: no pacing), shared by PVs and claims.
pub(super) struct Pacer {
    start: Instant,
    rate: f64,
    next: AtomicU64,
}

impl Pacer {
    async fn wait(&self) {
        if self.rate > 0.0 {
            let slot = self.next.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep_until((self.start + Duration::from_secs_f64(slot as f64 / self.rate)).into()).await;
        }
    }
}

/// What the claim watch has seen.
#[derive(Default)]
pub(super) struct Seen {
    bound: HashMap<String, Instant>,
    volumes: HashMap<String, String>,
    /// Claims whose Bound state only the backstop list saw.
    late: usize,
}

/// Waits until the controller has marked all `n` PVs of the run Available. Why: the controller
/// (like upstream) only matches Available volumes, so a claim created while a volume of its exact
/// size is still Pending takes the next larger one, and the last claim of the largest size is then
/// left with none: the workload would not be bindable.
pub(super) async fn wait_available(
    api: &Api<PersistentVolume>,
    run: &str,
    n: usize,
    timeout: Duration,
) -> Result<(), String> {
    // A watch, not a polled list: listing every PV of the run ten times a second would load the
    // server being measured.
    let config = watcher::Config::default().labels(&format!("{RUN_LABEL}={run}"));
    let mut available = std::collections::HashSet::new();
    let wait = async {
        let stream = watcher(api.clone(), config).default_backoff();
        futures_util::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(pv)) | Ok(Event::InitApply(pv)) => {
                    let name = pv.metadata.name.clone().unwrap_or_default();
                    if pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available") {
                        available.insert(name);
                    } else {
                        available.remove(&name);
                    }
                }
                Ok(Event::Delete(pv)) => {
                    available.remove(pv.metadata.name.as_deref().unwrap_or_default());
                }
                Ok(Event::Init) => available.clear(),
                Ok(Event::InitDone) => {}
                Err(e) => tracing::warn!(error = %e, "volume watch failed, retrying"),
            }
            if available.len() >= n {
                return;
            }
        }
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(()) => Ok(()),
        Err(_) => Err(format!("only {} of {n} PVs became Available within {timeout:?}", available.len())),
    }
}

/// A backstop for the watch: every few seconds, lists the run's claims and records Bound ones the
/// watch has not reported (a watch that silently missed an event would otherwise make the bench
/// wait for its whole timeout). Returns once every claim is known Bound.
pub(super) async fn poll_bound(api: &Api<PersistentVolumeClaim>, run: &str, seen: Arc<Mutex<Seen>>, n: usize) {
    let lp = kube::api::ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        if seen.lock().unwrap_or_else(|p| p.into_inner()).bound.len() >= n {
            return;
        }
        let Ok(list) = api.list(&lp).await else { continue };
        let now = Instant::now();
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        for c in list.items {
            if c.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Bound") {
                let name = c.metadata.name.clone().unwrap_or_default();
                if let std::collections::hash_map::Entry::Vacant(e) = s.bound.entry(name.clone()) {
                    e.insert(now);
                    s.late += 1;
                    if let Some(v) = c.spec.and_then(|sp| sp.volume_name) {
                        s.volumes.insert(name, v);
                    }
                }
            }
        }
        if s.bound.len() >= n {
            return;
        }
    }
}

/// Whether a failed request is worth repeating (overload, server error, transport).
pub(super) fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 500 | 502 | 503 | 504),
        _ => true,
    }
}

pub(super) fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Creates an object, retrying transient failures; a 409 after a retry means an earlier attempt
/// was applied and its answer lost.
pub(super) async fn create_with_retry<K>(api: Api<K>, obj: K, what: String) -> Result<K, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut delay = Duration::from_millis(100);
    let mut attempt = 0;
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(created) => return Ok(created),
            Err(e) if attempt > 0 && is_code(&e, 409) => {
                let name = obj.meta().name.clone().unwrap_or_default();
                return api.get(&name).await.map_err(|e| format!("reading {what} after a lost answer: {e}"));
            }
            Err(e) if attempt < 5 && transient(&e) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            Err(e) => return Err(format!("creating {what}: {e}")),
        }
    }
}

/// Binds a fresh pair the way a controller does, with its four writes and nothing else: the
/// PV's `claimRef`, the PV's phase, the claim's `volumeName` and the claim's status (upstream's
/// bindVolumeToClaim, updateVolumePhase, bindClaimToVolume, updateClaimStatus).
pub(super) async fn bind_pair(
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    mut pv: PersistentVolume,
    pvc: PersistentVolumeClaim,
) -> Result<(), String> {
    let pp = PostParams::default();
    let (pv_name, pvc_name) =
        (pv.metadata.name.clone().unwrap_or_default(), pvc.metadata.name.clone().unwrap_or_default());
    let write = |what: &str, e: kube::Error| format!("binding {pvc_name} to {pv_name}: {what}: {e}");
    pv.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_reference(&pvc));
    set_annotation(&mut pv.metadata, ann::BOUND_BY_CONTROLLER, "yes");
    let pv = pvs.replace(&pv_name, &pp, &pv).await.map_err(|e| write("PV claimRef", e))?;
    finish_bind(pvs, claims, pv, pvc).await
}

/// With `--claims --bind-itself`: provisions `pvc` as a controller's in-process provisioner does,
/// with the requests ours and upstream's make for a provisioned claim, in their order: the claim
/// annotated with its provisioner, a GET of the volume it is about to create (not found), the
/// volume's create (bound to the claim, as the provisioner makes it), the ProvisioningSucceeded
/// event, then the bind: the volume's phase, the claim's volumeName, the claim's phase. No
/// directory is made: what this measures is the API server.
pub(super) async fn provision_claim(
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    events: Api<CoreEvent>,
    mut pvc: PersistentVolumeClaim,
    class: &StorageClass,
) -> Result<(), String> {
    let provisioner = class.provisioner.as_str();
    // A provisioned volume takes its class's reclaim policy; the controller's finalizer guards the
    // asset of one it will delete.
    let policy = class.reclaim_policy.as_deref().unwrap_or("Delete");
    let finalizers: &[&str] = if policy == "Delete" { &[pv_model::finalizers::PV_CONTROLLER] } else { &[] };
    let pp = PostParams::default();
    let pvc_name = pvc.metadata.name.clone().unwrap_or_default();
    let pv_name = format!("pvc-{}", pvc.metadata.uid.as_deref().unwrap_or_default());
    let write = |what: &str, e: kube::Error| format!("provisioning {pvc_name}: {what}: {e}");
    set_annotation(&mut pvc.metadata, ann::BETA_STORAGE_PROVISIONER, provisioner);
    set_annotation(&mut pvc.metadata, ann::STORAGE_PROVISIONER, provisioner);
    let pvc = claims.replace(&pvc_name, &pp, &pvc).await.map_err(|e| write("claim provisioner", e))?;
    match pvs.get_opt(&pv_name).await {
        Ok(None) => {}
        Ok(Some(_)) => return Err(format!("provisioning {pvc_name}: PV {pv_name} exists already")),
        Err(e) => return Err(write("PV lookup", e)),
    }
    let spec = pvc.spec.clone().unwrap_or_default();
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {
            "name": pv_name,
            "annotations": {ann::CREATED_BY: "hostpath-dynamic-provisioner",
                            ann::BOUND_BY_CONTROLLER: "yes",
                            ann::PROVISIONED_BY: provisioner},
            "finalizers": finalizers,
        },
        "spec": {
            "accessModes": spec.access_modes,
            "capacity": {"storage": spec.resources.and_then(|r| r.requests).and_then(|r| r.get("storage").cloned())},
            "hostPath": {"path": format!("/var/lib/pv-controller-bench/{pv_name}")},
            "persistentVolumeReclaimPolicy": policy,
            "storageClassName": spec.storage_class_name,
            "claimRef": claim_reference(&pvc),
        },
    }))
    .map_err(|e| format!("provisioning {pvc_name}: {e}"))?;
    let pv = pvs.create(&pp, &pv).await.map_err(|e| write("PV create", e))?;
    let event: CoreEvent = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{pvc_name}.")},
        "involvedObject": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": pvc.metadata.namespace,
                           "name": pvc_name, "uid": pvc.metadata.uid, "resourceVersion": pvc.metadata.resource_version},
        "reason": "ProvisioningSucceeded",
        "message": format!("Successfully provisioned volume {pv_name} using {provisioner}"),
        "type": "Normal",
        "source": {"component": ann::EVENT_COMPONENT},
        "count": 1,
    }))
    .map_err(|e| format!("provisioning {pvc_name}: {e}"))?;
    events.create(&pp, &event).await.map_err(|e| write("event", e))?;
    finish_bind(pvs, claims, pv, pvc).await
}

/// The bind's last three writes, on a volume whose claimRef names the claim: the volume's phase,
/// the claim's volumeName (and annotations), the claim's phase.
async fn finish_bind(
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    mut pv: PersistentVolume,
    mut pvc: PersistentVolumeClaim,
) -> Result<(), String> {
    let pp = PostParams::default();
    let (pv_name, pvc_name) =
        (pv.metadata.name.clone().unwrap_or_default(), pvc.metadata.name.clone().unwrap_or_default());
    let write = |what: &str, e: kube::Error| format!("binding {pvc_name} to {pv_name}: {what}: {e}");
    pv.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
    let pv = pvs.replace_status(&pv_name, &pp, &pv).await.map_err(|e| write("PV status", e))?;

    pvc.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.clone());
    set_annotation(&mut pvc.metadata, ann::BIND_COMPLETED, "yes");
    set_annotation(&mut pvc.metadata, ann::BOUND_BY_CONTROLLER, "yes");
    let mut pvc = claims.replace(&pvc_name, &pp, &pvc).await.map_err(|e| write("claim volumeName", e))?;
    let pv_spec = pv.spec.unwrap_or_default();
    let status = pvc.status.get_or_insert_with(Default::default);
    status.phase = Some("Bound".into());
    status.access_modes = pv_spec.access_modes;
    status.capacity = pv_spec.capacity;
    claims.replace_status(&pvc_name, &pp, &pvc).await.map_err(|e| write("claim status", e))?;
    Ok(())
}

/// Runs `make(i)` for i in 0..n, at most `concurrency` at once, paced by `pacer`; stops at the
/// first error.
pub(super) async fn for_each_bounded<F, Fut>(
    n: usize,
    concurrency: usize,
    pacer: Option<&Pacer>,
    make: F,
) -> Result<(), String>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let sem = Arc::new(Semaphore::new(concurrency));
    let mut set = JoinSet::new();
    let check = |r: Result<Result<(), String>, tokio::task::JoinError>| match r {
        Ok(r) => r,
        Err(e) => Err(format!("request task failed: {e}")),
    };
    for i in 0..n {
        if let Some(p) = pacer {
            p.wait().await;
        }
        let permit = sem.clone().acquire_owned().await.map_err(|e| e.to_string())?;
        let fut = make(i);
        set.spawn(async move {
            let r = fut.await;
            drop(permit);
            r
        });
        while let Some(r) = set.try_join_next() {
            check(r)?;
        }
    }
    while let Some(r) = set.join_next().await {
        check(r)?;
    }
    Ok(())
}

/// Fails before anything is created when the `--claims` class cannot bind them; else gives the
/// class (`--bind-itself` provisions as its provisioner would).
pub(super) async fn check_class(client: &Client, class: &str) -> anyhow::Result<StorageClass> {
    let api: Api<StorageClass> = Api::all(client.clone());
    let found = api.get_opt(class).await.map_err(|e| user(format!("reading StorageClass {class}: {e}")))?;
    bindable_class(class, found).map_err(user)
}

pub(super) async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(name).await.map_err(|e| user(format!("reading namespace {name}: {e}")))?.is_some() {
        return Ok(());
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, 409) => Ok(()),
        Err(e) => Err(user(format!("creating namespace {name}: {e}"))),
    }
}

/// Watches the run's claims, noting when each is first Bound; signals once the initial list is
/// done, so that no Bound transition can be missed.
pub(super) fn spawn_claim_watch(
    api: Api<PersistentVolumeClaim>,
    run: &str,
    seen: Arc<Mutex<Seen>>,
    count: tokio::sync::watch::Sender<usize>,
) -> (tokio::task::JoinHandle<()>, tokio::sync::oneshot::Receiver<()>) {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let config = watcher::Config::default().labels(&format!("{RUN_LABEL}={run}"));
    let task = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let stream = watcher(api, config).default_backoff();
        futures_util::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(c)) | Ok(Event::InitApply(c)) => {
                    let now = Instant::now();
                    if c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
                        continue;
                    }
                    let name = c.metadata.name.clone().unwrap_or_default();
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(v) = c.spec.as_ref().and_then(|s| s.volume_name.clone()) {
                        s.volumes.insert(name.clone(), v);
                    }
                    if let std::collections::hash_map::Entry::Vacant(e) = s.bound.entry(name) {
                        e.insert(now);
                        let n = s.bound.len();
                        drop(s);
                        let _ = count.send(n);
                    }
                }
                Ok(Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "claim watch failed, retrying"),
            }
        }
    });
    (task, ready_rx)
}

/// The run against an API server. Returns the report and, when not every claim became Bound or
/// cleanup failed, the error to exit with after printing it.
pub(super) async fn against_server(a: &BenchArgs, w: &Workload) -> anyhow::Result<(Report, Option<String>)> {
    let (client, url, _) = a.kube.connect(REQUEST_TIMEOUT).await?;
    let class = match w {
        Workload::Claims { class, .. } => Some(Arc::new(check_class(&client, class).await?)),
        Workload::Pairs(_) => None,
    };
    ensure_namespace(&client, &a.namespace).await?;

    let run = run_id();
    let n = w.claims();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &a.namespace);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), &a.namespace);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (count_tx, mut count_rx) = tokio::sync::watch::channel(0usize);
    let (watch_task, ready) = spawn_claim_watch(claims.clone(), &run, seen.clone(), count_tx);
    if tokio::time::timeout(REQUEST_TIMEOUT, ready).await.map_or(true, |r| r.is_err()) {
        watch_task.abort();
        return Err(user(format!("{url}: the claim watch did not start within {REQUEST_TIMEOUT:?}")));
    }

    let pacer = Pacer { start: Instant::now(), rate: a.rate, next: AtomicU64::new(0) };
    let start = pacer.start;
    let created: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; n]));
    let pv_created: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; n]));
    // With --bind-itself: the created PVs, for the bench's own binding writes.
    let pv_objects: Arc<Mutex<Vec<Option<PersistentVolume>>>> =
        Arc::new(Mutex::new(if a.bind_itself { vec![None; n] } else { Vec::new() }));
    let bind_itself = a.bind_itself;
    let create_pvs = || {
        for_each_bounded(n, a.concurrency, Some(&pacer), |i| {
            let (api, obj, created, objects) =
                (pvs.clone(), pv_object(&run, i), pv_created.clone(), pv_objects.clone());
            async move {
                created.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(Instant::now());
                let mut pv = create_with_retry(api.clone(), obj.map_err(|e| e.to_string())?, format!("PV {i}")).await?;
                if bind_itself {
                    // What a controller's first sync of a new volume writes: phase Available.
                    pv.status.get_or_insert_with(Default::default).phase = Some("Available".into());
                    let name = pv.metadata.name.clone().unwrap_or_default();
                    pv = api
                        .replace_status(&name, &PostParams::default(), &pv)
                        .await
                        .map_err(|e| format!("PV {i} status Available: {e}"))?;
                }
                if let Some(slot) = objects.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i) {
                    *slot = Some(pv);
                }
                Ok(())
            }
        })
    };
    let create_claims = || {
        for_each_bounded(n, a.concurrency, Some(&pacer), |i| {
            let (api, obj, created) = (claims.clone(), pvc_object(&run, i, w), created.clone());
            let pv = pv_objects.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i).and_then(Option::take);
            let (pv_api, events, class) = (pvs.clone(), events.clone(), class.clone());
            async move {
                created.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(Instant::now());
                let pvc = create_with_retry(api.clone(), obj.map_err(|e| e.to_string())?, format!("claim {i}")).await?;
                match pv {
                    Some(pv) => bind_pair(pv_api, api, pv, pvc).await,
                    None => match class.filter(|_| bind_itself) {
                        Some(class) => provision_claim(pv_api, api, events, pvc, &class).await,
                        None => Ok(()),
                    },
                }
            }
        })
    };
    let progress = (std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
        let (created, bound) = (created.clone(), count_rx.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let c = created.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|c| c.is_some()).count();
                eprint!("\r\x1b[K{}", progress_line(c, *bound.borrow(), n, start.elapsed()));
            }
        })
    });
    let result = match (w, a.claims_first) {
        (Workload::Claims { .. }, _) => create_claims().await,
        (Workload::Pairs(_), false) => match create_pvs().await {
            // No controller makes the PVs Available when the bench binds them itself.
            Ok(()) if a.bind_itself => create_claims().await,
            Ok(()) => match wait_available(&pvs, &run, n, a.timeout).await {
                Ok(()) => create_claims().await,
                e => e,
            },
            e => e,
        },
        (Workload::Pairs(_), true) => match create_claims().await {
            Ok(()) => create_pvs().await,
            e => e,
        },
    };
    let create_time = start.elapsed();
    let mut failure = result.err();
    if failure.is_none() {
        let done = count_rx.wait_for(|c| *c >= n);
        let backstop = poll_bound(&claims, &run, seen.clone(), n);
        let either = async {
            tokio::select! {
                _ = done => {}
                _ = backstop => {}
            }
        };
        if tokio::time::timeout(a.timeout.saturating_sub(start.elapsed()), either).await.is_err() {
            failure = Some(format!("not every claim became Bound within {:?}", a.timeout));
        }
    }
    let gave_up = Instant::now();
    watch_task.abort();
    if let Some(p) = progress {
        p.abort();
        eprint!("\r\x1b[K");
    }
    let late = seen.lock().unwrap_or_else(|p| p.into_inner()).late;

    let (bound, volumes) = {
        let s = seen.lock().unwrap_or_else(|p| p.into_inner());
        (s.bound.clone(), s.volumes.clone())
    };
    let created = created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let pv_created = pv_created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Creates run in index order, so everything created lies below the last index seen.
    let pvs_created = pv_created.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    let mut claim_times = Vec::with_capacity(bound.len());
    let mut last = start;
    for (i, c) in created.iter().enumerate() {
        if let (Some(c), Some(b)) = (c, bound.get(&pvc_name(&run, i))) {
            let from = pv_created.get(i).copied().flatten().map_or(*c, |p| p.max(*c));
            claim_times.push(ClaimTime {
                created: from.saturating_duration_since(start),
                to_bound: b.saturating_duration_since(from),
            });
            last = last.max(*b);
        }
    }
    // A run that gave up lasted until it gave up, not until its last bind.
    let wall = if failure.is_some() {
        gave_up.saturating_duration_since(start)
    } else {
        last.saturating_duration_since(start)
    };
    let mut r = Report {
        mode: "api".into(),
        workload: w.kind().into(),
        description: format!(
            "{} in namespace {} at {url}{}",
            w.describe(),
            a.namespace,
            match (a.bind_itself, w) {
                (true, Workload::Pairs(_)) => ", bound by the bench itself (the five writes a controller makes per pair)",
                (true, Workload::Claims { .. }) =>
                    ", provisioned and bound by the bench itself (the requests a controller makes per provisioned claim)",
                (false, _) => "",
            }
        ),
        n,
        run: run.clone(),
        wall_seconds: wall.as_secs_f64(),
        create_seconds: Some(create_time.as_secs_f64()),
        note: Some(latency_note(w).into()),
        ..Default::default()
    };
    fill_latencies(&mut r, claim_times);
    r.binds_per_second = r.bound as f64 / wall.as_secs_f64().max(1e-9);
    if late > 0 {
        r.note = Some(format!(
            "{late} claims were seen Bound by the periodic list, not the watch: their time is an upper bound"
        ));
    }
    if failure.is_some() && r.bound < n {
        let f = failure.take().unwrap_or_default();
        failure = Some(format!("{f} ({} of {n} bound)", r.bound));
    }

    if !a.keep {
        let t = Instant::now();
        let created_claims = created.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        if let Err(e) = cleanup(&claims, &pvs, &run, a.concurrency, created_claims, pvs_created, w, &volumes).await {
            failure.get_or_insert(format!("cleanup of run {RUN_LABEL}={run}: {e}"));
        }
        r.cleanup_seconds = Some(t.elapsed().as_secs_f64());
    }
    Ok((r, failure))
}
