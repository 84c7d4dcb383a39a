//! Pure decisions of the PersistentVolume controller.
//!
//! Nothing in this crate performs I/O, awaits, or reads a clock. It holds what the controller
//! *decides* from a read-only view of objects: annotation keys and event reasons (one place each),
//! resource quantities, PV/PVC helpers, the matching rules (each returning a typed [`Verdict`] that
//! `explain` and the FailedBinding message reuse) and the [`VolumeIndex`] that finds the best
//! match for a claim without scanning every volume.

pub mod annotations;
pub mod binding;
pub mod csi;
pub mod finalizers;
pub mod helpers;
pub mod hostpath;
pub mod index;
pub mod key;
pub mod matching;
pub mod messages;
pub mod ownership;
pub mod packed;
pub mod phase;
pub mod quantity;
pub mod reasons;
pub mod selector;
pub mod topology;

pub use index::VolumeIndex;
pub use key::ObjectKey;
pub use matching::{Verdict, VerdictKind};
pub use packed::{Dictionary, Held, Packed};
pub use quantity::Quantity;

/// Kubernetes API types used throughout, re-exported so every crate agrees on one version.
pub mod k8s {
    pub use k8s_openapi::api::core::v1::{
        Event, Namespace, Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
        PersistentVolumeClaimStatus, PersistentVolumeSpec, PersistentVolumeStatus, Pod,
    };
    pub use k8s_openapi::api::storage::v1::StorageClass;
    pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
    pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
}
