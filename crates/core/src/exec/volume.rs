//! The volume sync: carry out [`crate::steps::volume_steps`], reading the claim when a step asks.

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::plan::ClaimLookup;
use crate::steps::{self, Edit, On, Outcome, Read, Step, SyncReport, Synced, Taken, VolumeStep};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::ObjectKey;
use std::sync::Arc;

impl Controller {
    /// Looks a claim up by key: cache, then the API server.
    async fn find_claim(&self, namespace: &str, name: &str) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        if let Some(c) = self.caches.claim(&ObjectKey::new(namespace, name)) {
            return Ok(Some(c));
        }
        self.get_claim_from_api(namespace, name).await
    }

    async fn get_claim_from_api(&self, namespace: &str, name: &str) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        match self.api.get_claim(namespace, name).await {
            Ok(c) => Ok(Some(self.caches.store_claim(c))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(Error::api("reading claim")(e)),
        }
    }

    /// The claim a volume's claimRef names, as [`plan::claim_lookup`] says to find it: the cache,
    /// then (for volumes not yet released) the API server; a cached claim of the same name with
    /// another uid is checked with the API server too, the cache may be behind.
    async fn look_up_claim(&self, lookup: &ClaimLookup) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        let ClaimLookup::Claim { namespace, name, uid, ask_api } = lookup else { return Ok(None) };
        let claim = if *ask_api {
            self.find_claim(namespace, name).await?
        } else {
            self.caches.claim(&ObjectKey::new(namespace, name))
        };
        if claim.as_ref().is_some_and(|c| helpers::uid(&c.metadata) != uid) {
            return Ok(self.get_claim_from_api(namespace, name).await?.filter(|c| helpers::uid(&c.metadata) == uid));
        }
        Ok(claim)
    }

    /// The volume state machine: carries out [`steps::volume_steps`] in order, acting on the
    /// volume as each write left it, and asks for the rest of the steps once the claim is read.
    /// Stops at the first error; the next sync resumes where this one stopped. An observer
    /// ([`crate::Config::observer`]) is told of the steps carried out.
    pub(crate) async fn sync_volume(&self, volume: Arc<PersistentVolume>) -> Result<()> {
        let Some(observer) = &self.config.observer else { return self.run_volume_steps(volume, &mut None).await };
        let name = helpers::name(&volume.metadata).to_string();
        let mut taken = Some(Vec::new());
        let result = self.run_volume_steps(volume, &mut taken).await;
        let steps = taken.unwrap_or_default();
        observer.synced(SyncReport { object: Synced::Volume(name.clone()), volume: name, steps });
        result
    }

    /// [`Controller::sync_volume`]'s steps, each noted in `taken` (when it is `Some`) with what
    /// came of it.
    async fn run_volume_steps(&self, volume: Arc<PersistentVolume>, taken: &mut Option<Vec<Taken>>) -> Result<()> {
        let mut volume = volume;
        let mut claim = None;
        let mut read = false;
        loop {
            let found = if read { Read::Claim(claim.as_ref()) } else { Read::Nothing };
            let steps = steps::volume_steps(&volume, found);
            // The volume as the decision read it: what a Settle step settles, which the caches
            // refuse once a write made a new version.
            let read_volume = volume.clone();
            let mut looked_up = false;
            for step in steps {
                // A copy for the observer only: nothing is copied when nobody observes.
                let noted = taken.is_some().then(|| step.clone());
                let done = match step {
                    VolumeStep::Write { edit, event } => match self.write_volume(&volume, &edit).await {
                        Ok(saved) => {
                            let wrote = !Arc::ptr_eq(&saved, &volume);
                            if let (Some((type_, reason)), Edit::Phase(_, message), true) = (event, &edit, wrote) {
                                self.recorder.event(&*saved, type_, reason, message).await;
                            }
                            volume = saved;
                            Ok(if wrote { Outcome::Done } else { Outcome::Unchanged })
                        }
                        Err(e) => Err(e),
                    },
                    VolumeStep::LookUpClaim(lookup) => self.look_up_claim(&lookup).await.map(|found| {
                        claim = found;
                        looked_up = true;
                        Outcome::Done
                    }),
                    VolumeStep::Event { on, type_, reason, message } => {
                        match on {
                            On::Volume => self.recorder.event(&*volume, type_, reason, message).await,
                            On::Claim(claim) => self.recorder.event(&*claim, type_, reason, message).await,
                        }
                        Ok(Outcome::Done)
                    }
                    VolumeStep::EnqueueClaim(key) => {
                        self.claim_queue.add(&key);
                        Ok(Outcome::Done)
                    }
                    // Settled unless a write above made a new version (which syncs again).
                    VolumeStep::Settle(claim) => {
                        self.caches.settle_volume(&read_volume, &claim);
                        Ok(Outcome::Done)
                    }
                    VolumeStep::Announce => {
                        tracing::info!(target: crate::PROGRESS, volume = %helpers::name(&volume.metadata), policy = helpers::reclaim_policy(&volume), "volume is released and its reclaim policy will be executed");
                        Ok(Outcome::Done)
                    }
                    VolumeStep::Reclaim(how) => {
                        self.reclaim_volume(volume.clone(), how);
                        Ok(Outcome::Done)
                    }
                };
                if let (Some(taken), Some(step)) = (taken.as_mut(), noted) {
                    let outcome = done.as_ref().map_or_else(|e| Outcome::Failed(e.to_string()), Outcome::clone);
                    taken.push(Taken { step: Step::Volume(step), outcome });
                }
                done?;
            }
            if !looked_up {
                return Ok(());
            }
            read = true;
        }
    }
}
