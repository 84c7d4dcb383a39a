//! The objects a run creates: names carrying the run id, PVs, claims, and the class check.

use super::*;

pub(super) fn run_id() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    format!("b{:x}{:x}", ms & 0xff_ffff_ffff, std::process::id() & 0xfff)
}

pub(super) fn pv_name(run: &str, i: usize) -> String {
    format!("{run}-pv-{i:06}")
}

pub(super) fn pvc_name(run: &str, i: usize) -> String {
    format!("{run}-pvc-{i:06}")
}

pub(super) fn size(i: usize) -> String {
    format!("{}Gi", 1 + i % 10)
}

/// The i-th static PV of a run: distinct NFS path, class "", Retain (the default for static PVs).
pub fn pv_object(run: &str, i: usize) -> Result<PersistentVolume, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name(run, i), "labels": {RUN_LABEL: run}},
        "spec": {"capacity": {"storage": size(i)}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain",
                 "nfs": {"server": "bench.invalid", "path": format!("/pv-bench/{run}/{i}")}}
    }))
}

/// The i-th claim of a run: for pairs, the size of the i-th PV and class ""; else 1Gi of `class`.
pub fn pvc_object(run: &str, i: usize, w: &Workload) -> Result<PersistentVolumeClaim, serde_json::Error> {
    let (class, size) = match w {
        Workload::Pairs(_) => ("", size(i)),
        Workload::Claims { class, .. } => (class.as_str(), "1Gi".to_string()),
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc_name(run, i), "labels": {RUN_LABEL: run}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}}
    }))
}

/// The class, if its claims can become Bound with nothing but the controller; else why not: a
/// class that does not exist, binds on first consumer (nothing schedules the bench's claims),
/// or names no provisioner.
pub fn bindable_class(class: &str, found: Option<StorageClass>) -> Result<StorageClass, String> {
    let Some(c) = found else {
        return Err(format!("--class {class}: StorageClass {class:?} does not exist"));
    };
    if c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
        return Err(format!(
            "--class {class}: StorageClass {class:?} has volumeBindingMode WaitForFirstConsumer: its claims stay \
             Pending until a pod that uses them is scheduled, and the bench creates no pods; use a class with \
             volumeBindingMode Immediate"
        ));
    }
    if c.provisioner == "kubernetes.io/no-provisioner" {
        return Err(format!(
            "--class {class}: StorageClass {class:?} has provisioner {}: nothing provisions its claims; use \
             --pairs for static volumes",
            c.provisioner
        ));
    }
    Ok(c)
}
