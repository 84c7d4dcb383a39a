//! VolumeAttachments (`pkg/registry/storage/volumeattachment`): cluster-scoped, created by the
//! attach-detach controller with an empty status that external-attacher fills through the status
//! subresource. The spec never changes; a status write is validated as a whole update and keeps
//! the stored metadata (`ResetObjectMetaForStatus`).

use super::csi_node::RESET_FOR_STATUS;
use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, flag, name_col, typed, Column, AGE, NAME};
use crate::validation::meta::{validate_meta, validate_meta_update, NameRule};
use crate::validation::storage;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "storage.k8s.io",
    version: "v1",
    kind: "VolumeAttachment",
    plural: "volumeattachments",
    key: "volumeattachments",
    singular: "volumeattachment",
    namespaced: false,
    status_subresource: true,
    short_names: &[],
};

/// upstream's `printVolumeAttachment`.
const COLUMNS: &[Column] = &[
    NAME,
    name_col("Attacher", |r| r.f("spec.attacher")),
    col("PV", |r| r.f("spec.source.persistentVolumeName")),
    col("Node", |r| r.f("spec.nodeName")),
    typed("Attached", "boolean", |r| flag(r, "status.attached", false)),
    AGE,
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::storage::v1::VolumeAttachment>(value)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// kube-apiserver's strategy refuses an update without a resourceVersion (422).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        storage::default_volume_attachment(obj);
    }

    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        validate_meta(&RESOURCE, NameRule::Subdomain, obj, errs);
        storage::validate_volume_attachment(obj, true, errs);
    }

    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(&RESOURCE, old, new, errs);
        storage::validate_volume_attachment_update(old, new, errs);
    }

    fn validate_status_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(&RESOURCE, old, new, errs);
        storage::validate_volume_attachment_update(old, new, errs);
    }

    fn kept_by_status_update(&self) -> &'static [&'static str] {
        RESET_FOR_STATUS
    }
}
