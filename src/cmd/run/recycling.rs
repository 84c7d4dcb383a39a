//! `run`'s recycler flags, kube-controller-manager's names and defaults: NFS and host-path
//! volumes with reclaim policy Recycle are emptied by a recycler pod (see `pv_kube::recycler`).

use super::super::user;
use clap::Args;
use pv_kube::recycler::{load_template, PodRecyclers, RecyclerConfig};
use std::path::PathBuf;

/// Recycler pod templates and timeouts.
#[derive(Args, Debug)]
pub struct RecyclerFlags {
    /// Pod template (YAML or JSON) for recycling NFS volumes (default: upstream's).
    #[arg(long, value_name = "FILE")]
    pub pv_recycler_pod_template_filepath_nfs: Option<PathBuf>,
    /// Least activeDeadlineSeconds of an NFS recycler pod.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub pv_recycler_minimum_timeout_nfs: u32,
    /// Seconds per GiB added to an NFS recycler pod's activeDeadlineSeconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub pv_recycler_increment_timeout_nfs: u32,
    /// Pod template (YAML or JSON) for recycling host-path volumes (default: upstream's).
    #[arg(long, value_name = "FILE")]
    pub pv_recycler_pod_template_filepath_hostpath: Option<PathBuf>,
    /// Least activeDeadlineSeconds of a host-path recycler pod.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub pv_recycler_minimum_timeout_hostpath: u32,
    /// Seconds per GiB added to a host-path recycler pod's activeDeadlineSeconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub pv_recycler_timeout_increment_hostpath: u32,
}

impl RecyclerFlags {
    /// The recyclers, templates read and checked (a bad file stops `run` at start, as upstream).
    pub fn recyclers(&self) -> anyhow::Result<PodRecyclers> {
        let config = |path: &Option<PathBuf>, flag: &str, minimum: u32, increment: u32| {
            let template = match path {
                Some(p) => load_template(p).map_err(|e| user(format!("--{flag}: {e}")))?,
                None => pv_kube::recycler::default_template(),
            };
            Ok::<_, anyhow::Error>(RecyclerConfig {
                template,
                minimum_timeout: minimum.into(),
                timeout_increment: increment.into(),
            })
        };
        Ok(PodRecyclers {
            nfs: config(
                &self.pv_recycler_pod_template_filepath_nfs,
                "pv-recycler-pod-template-filepath-nfs",
                self.pv_recycler_minimum_timeout_nfs,
                self.pv_recycler_increment_timeout_nfs,
            )?,
            host_path: config(
                &self.pv_recycler_pod_template_filepath_hostpath,
                "pv-recycler-pod-template-filepath-hostpath",
                self.pv_recycler_minimum_timeout_hostpath,
                self.pv_recycler_timeout_increment_hostpath,
            )?,
        })
    }
}
