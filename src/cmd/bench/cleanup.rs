//! Removing what a run created: claims, volumes, and the Events recorded about them.

use super::*;

/// Deletes the run's claims, then its PVs: the static ones it created, and for provisioned
/// claims the volumes whose Retain policy would keep them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn cleanup(
    claims: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    run: &str,
    concurrency: usize,
    n_claims: usize,
    n_pvs: usize,
    w: &Workload,
    volumes: &HashMap<String, String>,
) -> Result<(), String> {
    async fn delete<K>(api: Api<K>, name: String) -> Result<(), String>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let mut delay = Duration::from_millis(100);
        for attempt in 0.. {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => return Ok(()),
                Err(e) if is_code(&e, 404) => return Ok(()),
                Err(e) if attempt < 5 && transient(&e) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => return Err(format!("deleting {name}: {e}")),
            }
        }
        Ok(())
    }
    for_each_bounded(n_claims, concurrency, None, |i| delete(claims.clone(), pvc_name(run, i))).await?;
    if let Workload::Pairs(_) = w {
        for_each_bounded(n_pvs, concurrency, None, |i| delete(pvs.clone(), pv_name(run, i))).await?;
        wait_gone(claims, pvs, run).await?;
        return delete_events(claims, run, volumes, concurrency).await;
    }
    let names: Vec<String> = volumes.values().cloned().collect();
    for_each_bounded(names.len(), concurrency, None, |i| {
        let (api, name) = (pvs.clone(), names[i].clone());
        async move {
            let retained = match api.get_opt(&name).await {
                Ok(Some(pv)) => pv.spec.and_then(|s| s.persistent_volume_reclaim_policy).as_deref() == Some("Retain"),
                Ok(None) => false,
                Err(e) => return Err(format!("reading PV {name}: {e}")),
            };
            if retained {
                delete(api, name).await
            } else {
                Ok(())
            }
        }
    })
    .await?;
    wait_gone(claims, pvs, run).await?;
    delete_events(claims, run, volumes, concurrency).await
}

/// Waits until no claim or volume of the run is left: a delete only marks an object that a
/// finalizer holds (the pvc- and pv-protection controllers release them once nothing uses them,
/// and a volume's reclaim takes as long as the controller's client allows: upstream's releases
/// about 20 writes a second). The wait lasts as long as objects keep going, and gives up only
/// when none has gone for a minute.
pub(super) async fn wait_gone(
    claims: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    run: &str,
) -> Result<(), String> {
    const STALL: Duration = Duration::from_secs(60);
    let lp = kube::api::ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    let mut left = usize::MAX;
    let mut deadline = Instant::now() + STALL;
    loop {
        let c = claims.list_metadata(&lp).await.map_err(|e| format!("listing the run's claims: {e}"))?.items.len();
        let v = pvs.list_metadata(&lp).await.map_err(|e| format!("listing the run's PVs: {e}"))?.items.len();
        if c + v == 0 {
            return Ok(());
        }
        if c + v < left {
            left = c + v;
            deadline = Instant::now() + STALL;
        } else if Instant::now() >= deadline {
            return Err(format!(
                "{c} claims and {v} PVs of the run are still there, and none has gone for {}s (finalizers hold them)",
                STALL.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deletes the Events the controller recorded about the run's objects: its claims' (in the run's
/// namespace) and its volumes' (Events about cluster-scoped objects live in `default`). Objects
/// are recognised by name (the run id prefixes every name the bench gives) and by the volumes
/// the run's claims were bound to.
pub(super) async fn delete_events(
    claims: &Api<PersistentVolumeClaim>,
    run: &str,
    volumes: &HashMap<String, String>,
    concurrency: usize,
) -> Result<(), String> {
    let client = claims.clone().into_client();
    let namespace = claims.namespace().unwrap_or("default").to_string();
    let prefix = format!("{run}-");
    let ours = |e: &CoreEvent| {
        let name = e.involved_object.name.as_deref().unwrap_or("");
        name.starts_with(&prefix) || volumes.values().any(|v| v == name)
    };
    let mut doomed: Vec<(String, String)> = Vec::new();
    let mut spaces = vec![namespace.clone()];
    if namespace != "default" {
        spaces.push("default".into());
    }
    for ns in spaces {
        let api: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
        let list = api.list(&Default::default()).await.map_err(|e| format!("listing events in {ns}: {e}"))?;
        for e in list.items.iter().filter(|e| ours(e)) {
            doomed.push((ns.clone(), e.metadata.name.clone().unwrap_or_default()));
        }
    }
    for_each_bounded(doomed.len(), concurrency, None, |i| {
        let (ns, name) = doomed[i].clone();
        let api: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
        async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) if is_code(&e, 404) => Ok(()),
                Err(e) => Err(format!("deleting event {ns}/{name}: {e}")),
            }
        }
    })
    .await
}
