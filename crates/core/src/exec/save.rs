//! Saving a volume or a claim in its write turn ([`crate::writer`]): every write the executor
//! makes of either kind goes through here, and what was saved is cached at once.

use crate::controller::Controller;
use crate::error::{Error, Result};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use std::sync::Arc;

impl Controller {
    /// Saves `changed`, a modified copy of `base`, in the volume's write turn; `status` picks the
    /// status subresource. Returns the saved volume, now cached.
    pub(crate) async fn save_volume(
        &self,
        base: &PersistentVolume,
        changed: &PersistentVolume,
        status: bool,
        step: &'static str,
    ) -> Result<Arc<PersistentVolume>> {
        let name = helpers::name(&base.metadata);
        let cached = || self.caches.volume(name).and_then(|v| v.metadata.resource_version.clone());
        let write = async {
            let saved = if status {
                self.api.update_volume_status(changed).await
            } else {
                self.api.update_volume(changed).await
            };
            saved.map(|v| self.caches.store_volume(v)).map_err(Error::api(step))
        };
        self.volume_writers.write(name, &base.metadata, cached, step, write).await
    }

    /// Saves `changed`, a modified copy of `base`, in the claim's write turn; `status` picks the
    /// status subresource. Returns the saved claim, now cached.
    pub(crate) async fn save_claim(
        &self,
        base: &PersistentVolumeClaim,
        changed: &PersistentVolumeClaim,
        status: bool,
        step: &'static str,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let key = helpers::claim_key(base);
        let cached = || self.caches.claim(&key).and_then(|c| c.metadata.resource_version.clone());
        let write = async {
            let saved =
                if status { self.api.update_claim_status(changed).await } else { self.api.update_claim(changed).await };
            saved.map(|c| self.caches.store_claim(c)).map_err(Error::api(step))
        };
        self.claim_writers.write(&key, &base.metadata, cached, step, write).await
    }
}
