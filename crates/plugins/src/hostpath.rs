//! The host-path plugin: one directory per volume under a root.

use async_trait::async_trait;
use pv_core::{PluginError, ProvisionOptions, RecyclerEvents, VolumePlugin};
use pv_model::annotations::{CREATED_BY, HOST_PATH_PLUGIN};
use pv_model::helpers;
use pv_model::k8s::{K8sQuantity, ObjectMeta, PersistentVolume, PersistentVolumeSpec};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod confined;

/// Provisions, deletes and recycles directories under `root`.
///
/// A volume of this plugin is one plain directory directly under the root (`ROOT/NAME`, the
/// layout [`VolumePlugin::provision`] makes). Any other `hostPath` is refused: outside the root,
/// nested deeper, `..`, or a symlink (to another volume or elsewhere). Deletion and recycling
/// work by descriptor from the opened root (see `confined`), so a directory swapped for a
/// symlink while they run cannot redirect them outside the volume.
///
/// Nothing touches the disk until the plugin first acts: the root is created and resolved then,
/// so a plugin that only names itself in a plan (`pv-controller explain`) leaves no trace.
#[derive(Debug, Clone)]
pub struct HostPathPlugin {
    /// The root as configured.
    configured: PathBuf,
    place: OnceLock<Place>,
    #[cfg(test)]
    hook: Option<TestHook>,
}

/// Where the root is, resolved at first use.
#[derive(Debug, Clone)]
struct Place {
    /// The canonical root.
    root: PathBuf,
    /// The root as given, when it differs from its canonical form (paths may use either).
    given: Option<PathBuf>,
}

/// Called before each step that opens or removes a name (tests race through it).
#[cfg(test)]
#[derive(Clone)]
struct TestHook(std::sync::Arc<dyn Fn(&str) + Send + Sync>);

#[cfg(test)]
impl std::fmt::Debug for TestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestHook")
    }
}

impl HostPathPlugin {
    /// A plugin rooted at `root` (created, if missing, when the plugin first acts).
    pub fn new(root: PathBuf) -> Self {
        HostPathPlugin {
            configured: root,
            place: OnceLock::new(),
            #[cfg(test)]
            hook: None,
        }
    }

    fn place(&self) -> &Place {
        self.place.get_or_init(|| {
            let root = &self.configured;
            let _ = std::fs::create_dir_all(root);
            let given = std::path::absolute(root).unwrap_or_else(|_| root.clone());
            let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| given.clone());
            Place { given: (given != canonical).then_some(given), root: canonical }
        })
    }

    /// The root directory, canonical (created if missing).
    pub fn root(&self) -> &Path {
        &self.place().root
    }

    fn hook(&self) -> Option<confined::Hook<'_>> {
        #[cfg(test)]
        if let Some(h) = &self.hook {
            return Some(&*h.0);
        }
        None
    }

    /// The volume's name under the root, if its path is `ROOT/NAME` read literally: absolute,
    /// no `.` or `..`, exactly one component below the root (given or canonical form).
    fn volume_name(&self, volume: &PersistentVolume, role: &str) -> Result<OsString, PluginError> {
        let path = volume
            .spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| PathBuf::from(&h.path))
            .ok_or_else(|| PluginError::new("volume has no hostPath source"))?;
        let refuse = |why: &str| {
            PluginError::new(format!(
                "host_path {role} only supports paths under {} but received provided {}: {why}",
                self.root().display(),
                path.display()
            ))
        };
        let raw = path.as_os_str().as_encoded_bytes();
        if !path.is_absolute() || raw.split(|b| *b == b'/').any(|c| c == b"." || c == b"..") {
            return Err(refuse("not an absolute path without . or .."));
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(refuse("the root itself is not a volume"));
        };
        let place = self.place();
        if parent != place.root && place.given.as_deref() != Some(parent) {
            return Err(refuse("a volume is a directory directly under the root"));
        }
        Ok(name.to_os_string())
    }

    fn open_root(&self) -> Result<confined::Root, PluginError> {
        confined::Root::open(self.root())
            .map_err(|e| PluginError::new(format!("opening host-path root {}: {e}", self.root().display())))
    }
}

#[async_trait]
impl VolumePlugin for HostPathPlugin {
    fn name(&self) -> &str {
        HOST_PATH_PLUGIN
    }
    fn can_provision(&self) -> bool {
        true
    }
    fn supports_mount_options(&self) -> bool {
        false
    }
    fn can_support(&self, volume: &PersistentVolume) -> bool {
        volume.spec.as_ref().is_some_and(|s| s.host_path.is_some())
    }
    fn can_delete(&self) -> bool {
        true
    }
    fn can_recycle(&self) -> bool {
        true
    }

    async fn provision(&self, o: &ProvisionOptions) -> Result<PersistentVolume, PluginError> {
        if o.pv_name.is_empty() || o.pv_name.contains('/') || o.pv_name.starts_with('.') {
            return Err(PluginError::new(format!("invalid volume name {:?}", o.pv_name)));
        }
        // As upstream's host-path provisioner: a directory is no block device.
        if helpers::claim_volume_mode(&o.claim) == "Block" {
            return Err(PluginError::new(format!("{} does not support block volume provisioning", self.name())));
        }
        let dir = self.root().join(&o.pv_name);
        self.open_root()?
            .create_dir(o.pv_name.as_ref())
            .map_err(|e| PluginError::new(format!("creating {}: {e}", dir.display())))?;
        let spec = o.claim.spec.clone().unwrap_or_default();
        let modes = spec.access_modes.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| vec!["ReadWriteOnce".into()]);
        let request = helpers::claim_request(&o.claim);
        Ok(PersistentVolume {
            metadata: ObjectMeta {
                name: Some(o.pv_name.clone()),
                annotations: Some([(CREATED_BY.to_string(), "hostpath-dynamic-provisioner".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(o.reclaim_policy.clone()),
                access_modes: Some(modes),
                capacity: Some([("storage".to_string(), K8sQuantity(request.to_string()))].into()),
                host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                    path: dir.to_string_lossy().into_owned(),
                    type_: None,
                }),
                ..Default::default()
            }),
            status: None,
        })
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), PluginError> {
        let name = self.volume_name(volume, "deleter")?;
        let dir = self.root().join(&name);
        self.open_root()?
            .remove_tree(&name, self.hook())
            .map(|_| ())
            .map_err(|e| PluginError::new(format!("removing {}: {e}", dir.display())))
    }

    async fn recycle(&self, volume: &PersistentVolume, _events: &dyn RecyclerEvents) -> Result<(), PluginError> {
        let name = self.volume_name(volume, "recycler")?;
        let dir = self.root().join(&name);
        self.open_root()?
            .empty(&name, self.hook())
            .map_err(|e| PluginError::new(format!("recycling {}: {e}", dir.display())))
    }

    async fn provisioned_assets(&self) -> Result<Vec<String>, PluginError> {
        let names = self
            .open_root()?
            .directories()
            .map_err(|e| PluginError::new(format!("listing {}: {e}", self.root().display())))?;
        Ok(names.into_iter().filter(|n| is_provisioned_name(n)).collect())
    }

    fn asset_of(&self, volume: &PersistentVolume) -> Option<String> {
        self.volume_name(volume, "sweep").ok().and_then(|n| n.into_string().ok())
    }

    async fn remove_unused_asset(&self, name: &str) -> Result<bool, PluginError> {
        if !is_provisioned_name(name) {
            return Ok(false);
        }
        self.open_root()?
            .remove_if_empty(name.as_ref())
            .map_err(|e| PluginError::new(format!("removing {}: {e}", self.root().join(name).display())))
    }
}

/// A name this provisioner gives: `pvc-` and a claim UID (8-4-4-4-12 hexadecimal digits).
fn is_provisioned_name(name: &str) -> bool {
    let Some(uid) = name.strip_prefix("pvc-") else { return false };
    let groups: Vec<&str> = uid.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::HostPathVolumeSource;
    use pv_core::NoRecyclerEvents;

    #[tokio::test]
    async fn a_plugin_touches_the_disk_only_when_it_acts() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("volumes");
        let p = HostPathPlugin::new(root.clone());
        assert_eq!(p.name(), HOST_PATH_PLUGIN);
        assert!(!root.exists(), "naming the plugin created its root");
        assert!(p.provisioned_assets().await.unwrap().is_empty());
        assert!(root.is_dir(), "acting did not create the root");
    }

    fn pv_at(path: &str) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource { path: path.into(), type_: None }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn delete_removes_the_directory_and_refuses_paths_outside_the_root() {
        let root = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let dir = p.root().join("pv1");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        p.delete(&pv_at(dir.to_str().unwrap())).await.unwrap();
        assert!(!dir.exists());
        let outside = tempfile::tempdir().unwrap();
        let err = p.delete(&pv_at(outside.path().to_str().unwrap())).await.unwrap_err();
        assert!(err.message.contains("only supports paths under"), "{err}");
        assert!(outside.path().exists());
        let traversal = format!("{}/../../etc", p.root().display());
        assert!(p.delete(&pv_at(&traversal)).await.is_err());
        assert!(p.delete(&pv_at(p.root().to_str().unwrap())).await.is_err(), "the root itself is not a volume");
    }

    #[tokio::test]
    async fn recycle_empties_the_directory_but_keeps_it() {
        let root = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let dir = p.root().join("pv1");
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("f"), "data").unwrap();
        p.recycle(&pv_at(dir.to_str().unwrap()), &NoRecyclerEvents).await.unwrap();
        assert!(dir.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn symlink_escaping_the_root_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let link = p.root().join("link");
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        assert!(p.delete(&pv_at(link.to_str().unwrap())).await.is_err());
        assert!(outside.path().exists());
    }

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn hooked(p: HostPathPlugin, f: impl Fn(&str) + Send + Sync + 'static) -> HostPathPlugin {
        HostPathPlugin { hook: Some(TestHook(Arc::new(f))), ..p }
    }

    /// Replaces the directory `dir` by a symlink to `target` (the directory moves aside).
    fn swap_for_symlink(dir: &Path, target: &Path) {
        let aside = dir.with_file_name(format!(".{}-aside", dir.file_name().unwrap().to_string_lossy()));
        std::fs::rename(dir, aside).unwrap();
        std::os::unix::fs::symlink(target, dir).unwrap();
    }

    /// Runs `f` the first time the plugin is about to open or remove `name`; the flag tells
    /// whether it ran (a test whose swap never happened proves nothing).
    fn once_at(
        name: &'static str,
        f: impl Fn() + Send + Sync + 'static,
    ) -> (impl Fn(&str) + Send + Sync + 'static, Arc<AtomicBool>) {
        let done = Arc::new(AtomicBool::new(false));
        let fired = done.clone();
        let hook = move |step: &str| {
            if step == name && !done.swap(true, Ordering::SeqCst) {
                f()
            }
        };
        (hook, fired)
    }

    fn victim(outside: &Path, name: &str) -> PathBuf {
        let v = outside.join(name);
        std::fs::create_dir_all(v.join("deep")).unwrap();
        std::fs::write(v.join("keep"), "outside data").unwrap();
        v
    }

    fn intact(v: &Path) -> bool {
        v.join("keep").exists() && v.join("deep").is_dir()
    }

    #[tokio::test]
    async fn a_volume_below_another_directory_is_refused_before_anything_is_opened() {
        // Only directories directly under the root are volumes, so no parent below the root can
        // be swapped for a symlink: the path is refused before the plugin opens anything (the
        // swap planted on the way never runs).
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let v = victim(outside.path(), "vol");
        for recycle in [false, true] {
            let plain = HostPathPlugin::new(root.path().to_path_buf());
            let flip = plain.root().join("flip");
            let _ = std::fs::remove_file(&flip);
            std::fs::create_dir_all(flip.join("vol")).unwrap();
            let (f, o) = (flip.clone(), outside.path().to_path_buf());
            let (hook, swapped) = once_at("vol", move || swap_for_symlink(&f, &o));
            let p = hooked(plain, hook);
            let pv = pv_at(flip.join("vol").to_str().unwrap());
            let r = if recycle { p.recycle(&pv, &NoRecyclerEvents).await } else { p.delete(&pv).await };
            assert!(!swapped.load(Ordering::SeqCst), "recycle={recycle}: nothing was opened");
            let err = r.unwrap_err();
            assert!(err.message.contains("directly under the root"), "{err}");
            assert!(intact(&v), "recycle={recycle}: the outside directory was touched");
        }
    }

    #[tokio::test]
    async fn a_directory_swapped_for_a_symlink_inside_the_volume_is_unlinked_not_followed() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for recycle in [false, true] {
            let v = victim(outside.path(), &format!("victim-{recycle}"));
            let plain = HostPathPlugin::new(root.path().to_path_buf());
            let dir = plain.root().join("pv1");
            std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
            std::fs::write(dir.join("sub/deeper/f"), "volume data").unwrap();
            std::fs::write(dir.join("top"), "volume data").unwrap();
            let (sub, target) = (dir.join("sub"), v.clone());
            let (hook, swapped) = once_at("sub", move || swap_for_symlink(&sub, &target));
            let p = hooked(plain, hook);
            let pv = pv_at(dir.to_str().unwrap());
            if recycle {
                p.recycle(&pv, &NoRecyclerEvents).await.unwrap();
                assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the volume is empty");
            } else {
                p.delete(&pv).await.unwrap();
                assert!(!dir.exists());
            }
            assert!(swapped.load(Ordering::SeqCst), "recycle={recycle}: the directory was swapped");
            assert!(intact(&v), "recycle={recycle}: the outside directory was touched");
        }
    }

    #[tokio::test]
    async fn a_volume_swapped_for_a_symlink_before_it_is_opened_is_refused() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let v = victim(outside.path(), "victim");
        let plain = HostPathPlugin::new(root.path().to_path_buf());
        let dir = plain.root().join("pv1");
        std::fs::create_dir_all(&dir).unwrap();
        let (d, target) = (dir.clone(), v.clone());
        let (hook, swapped) = once_at("pv1", move || swap_for_symlink(&d, &target));
        let p = hooked(plain, hook);
        let err = p.delete(&pv_at(dir.to_str().unwrap())).await.unwrap_err();
        assert!(swapped.load(Ordering::SeqCst), "the volume was swapped");
        assert!(err.message.contains("not a plain directory"), "{err}");
        assert!(p.recycle(&pv_at(dir.to_str().unwrap()), &NoRecyclerEvents).await.is_err());
        assert!(intact(&v));
    }

    #[tokio::test]
    async fn recycling_an_in_root_symlink_to_another_volume_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let other = p.root().join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("data"), "another volume's data").unwrap();
        let link = p.root().join("link");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let err = p.recycle(&pv_at(link.to_str().unwrap()), &NoRecyclerEvents).await.unwrap_err();
        assert!(err.message.contains("not a plain directory"), "{err}");
        assert!(p.delete(&pv_at(link.to_str().unwrap())).await.is_err());
        assert!(other.join("data").exists(), "the other volume keeps its data");
    }

    #[tokio::test]
    async fn a_path_through_an_in_root_symlink_is_refused_even_when_nothing_below_exists() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let p = HostPathPlugin::new(root.path().to_path_buf());
        std::os::unix::fs::symlink(outside.path(), p.root().join("outlink")).unwrap();
        let tail = p.root().join("outlink/nonexistent/tail");
        // Whatever appears there meanwhile must survive.
        let planted = outside.path().join("nonexistent/tail");
        let (t, o) = (planted.clone(), outside.path().to_path_buf());
        let p = hooked(p, move |_| {
            let _ = victim(&o, t.strip_prefix(&o).unwrap().to_str().unwrap());
        });
        assert!(p.delete(&pv_at(tail.to_str().unwrap())).await.is_err());
        assert!(p.recycle(&pv_at(tail.to_str().unwrap()), &NoRecyclerEvents).await.is_err());
        assert!(!planted.exists() || intact(&planted));
    }

    #[tokio::test]
    async fn only_provisioned_names_are_listed_and_only_empty_directories_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let p = HostPathPlugin::new(root.clone());
        let (empty, full) = ("pvc-0a0b0c0d-0000-4000-8000-00000000000a", "pvc-0a0b0c0d-0000-4000-8000-00000000000b");
        let link = "pvc-0a0b0c0d-0000-4000-8000-00000000000c";
        std::fs::create_dir_all(root.join(empty)).unwrap();
        std::fs::create_dir_all(root.join(full)).unwrap();
        std::fs::write(root.join(full).join("data"), "x").unwrap();
        std::fs::create_dir_all(root.join("static-1")).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join(link)).unwrap();
        let mut listed = p.provisioned_assets().await.unwrap();
        listed.sort();
        assert_eq!(listed, [empty, full], "provisioned names only, symlinks not listed");
        assert!(!p.remove_unused_asset(full).await.unwrap(), "a directory with anything in it stays");
        assert!(root.join(full).join("data").exists());
        assert!(p.remove_unused_asset(link).await.is_err() || root.join(link).exists(), "a link is never followed");
        assert!(outside.exists());
        assert!(!p.remove_unused_asset("static-1").await.unwrap(), "only provisioned names");
        assert!(p.remove_unused_asset(empty).await.unwrap());
        assert!(!root.join(empty).exists());
    }

    #[tokio::test]
    async fn provision_refuses_a_symlink_where_the_volume_directory_goes() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let p = HostPathPlugin::new(root.path().to_path_buf());
        std::os::unix::fs::symlink(outside.path(), p.root().join("pvc-1")).unwrap();
        let o = ProvisionOptions {
            pv_name: "pvc-1".into(),
            claim: Default::default(),
            class: Default::default(),
            reclaim_policy: "Delete".into(),
            mount_options: vec![],
            parameters: Default::default(),
            selected_node: None,
        };
        let err = p.provision(&o).await.unwrap_err();
        assert!(err.message.contains("not a plain directory"), "{err}");
        let o = ProvisionOptions { pv_name: "pvc-2".into(), ..o };
        let pv = p.provision(&o).await.unwrap();
        assert_eq!(pv.spec.unwrap().host_path.unwrap().path, p.root().join("pvc-2").to_str().unwrap());
        assert!(p.root().join("pvc-2").is_dir());
    }

    /// A thread flips directories between real and a symlink to an outside victim while delete
    /// and recycle run, both inside a volume (`ROOT/pv-N/sub`) and above one
    /// (`ROOT/nest-N/vol`). `HOSTPATH_RACE_ITERATIONS` sets the number of rounds (default 300).
    #[tokio::test]
    async fn racing_symlink_flips_never_touch_a_directory_outside_the_root() {
        let rounds: usize = std::env::var("HOSTPATH_RACE_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let mut victims = Vec::new();
        for i in 0..rounds {
            let recycle = i % 2 == 1;
            let inner_victim = victim(outside.path(), &format!("in-{i}"));
            let outer_victim = victim(&outside.path().join(format!("out-{i}")), "vol");
            let vol = p.root().join(format!("pv-{i}"));
            for d in ["sub/a/b", "sub/c", "other"] {
                std::fs::create_dir_all(vol.join(d)).unwrap();
                std::fs::write(vol.join(d).join("f"), "x").unwrap();
            }
            let nest = p.root().join(format!("nest-{i}"));
            std::fs::create_dir_all(nest.join("vol/deep")).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let racer = {
                let stop = stop.clone();
                let flips =
                    [(vol.join("sub"), inner_victim.clone()), (nest.clone(), outer_victim.parent().unwrap().into())];
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for (dir, target) in &flips {
                            let aside = dir.with_extension("aside");
                            if std::fs::rename(dir, &aside).is_ok() {
                                let _ = std::os::unix::fs::symlink(target, dir);
                                std::thread::yield_now();
                                let _ = std::fs::remove_file(dir);
                                let _ = std::fs::rename(&aside, dir);
                            }
                        }
                    }
                })
            };
            for pv in [pv_at(vol.to_str().unwrap()), pv_at(nest.join("vol").to_str().unwrap())] {
                let _ = if recycle { p.recycle(&pv, &NoRecyclerEvents).await } else { p.delete(&pv).await };
            }
            stop.store(true, Ordering::Relaxed);
            racer.join().unwrap();
            victims.push(inner_victim);
            victims.push(outer_victim);
        }
        let touched = victims.iter().filter(|v| !intact(v)).count();
        println!("host-path race: {rounds} rounds, {} outside directories, touched: {touched}", victims.len());
        assert_eq!(touched, 0);
    }
}
