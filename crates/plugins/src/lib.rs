//! Volume plugins the controller runs in-process.
//!
//! Only `kubernetes.io/host-path` is internal: it provisions, deletes and recycles real directories
//! under a configured root and refuses to touch any path outside it (upstream's equivalent refuses
//! anything outside `/tmp`). Every other provisioner is external (handed off by annotation) or, for
//! the in-tree cloud plugins, migrated to CSI (see `pv_model::csi`).

pub mod hostpath;

pub use hostpath::HostPathPlugin;

use pv_core::PluginRegistry;
use std::path::PathBuf;
use std::sync::Arc;

/// The registry every mode uses: host-path under `hostpath_root` when one is given.
pub fn registry(hostpath_root: Option<PathBuf>) -> PluginRegistry {
    let mut r = PluginRegistry::new();
    if let Some(root) = hostpath_root {
        r.register(Arc::new(HostPathPlugin::new(root)));
    }
    r
}
