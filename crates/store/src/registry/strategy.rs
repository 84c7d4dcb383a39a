//! What a kind adds to the store's generic create, update and delete: the [`Strategy`] every
//! kind's file implements. Below the kinds' files and the list of them in `registry/mod.rs`.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::meta::meta_mut;
use crate::table::{self, Column};
use crate::validation::meta::{validate_meta, validate_meta_update, NameRule};
use serde_json::Value;

/// The fields a field selector may name on a kind that has upstream's field label conversion
/// function (`AddFieldLabelConversionFunc`, pkg/apis/core/v1/conversion.go): `fields` are taken
/// as they are, `renamed` are old names matched as the new one.
#[derive(Clone, Copy, Debug)]
pub struct FieldLabels {
    /// The field labels the kind supports as they are.
    pub fields: &'static [&'static str],
    /// Old field labels and the field each is matched as.
    pub renamed: &'static [(&'static str, &'static str)],
}

/// What a kind adds to the store's generic create, update and delete. Every hook has the
/// behaviour most kinds share as its default, so a kind's file states only what differs.
pub(crate) trait Strategy: Sync {
    /// The resource served.
    fn resource(&self) -> &'static ResourceType;

    /// The object decoded into the kind's k8s-openapi type and encoded back ([`crate::typed`]):
    /// what kube-apiserver's decoding keeps of it. A kind without a type (a custom resource's is
    /// its schema) cannot be decoded this way.
    fn roundtrip(&self, _value: &Value) -> Result<Value, String> {
        Err(format!("no type is known for kind {}", self.resource().kind))
    }

    /// The `Warning` headers an accepted create (`old` None) or update of the main resource
    /// gets (upstream's `WarningsOnCreate` and `WarningsOnUpdate`).
    fn warnings(&self, _old: Option<&Value>, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// The columns of the kind's rows in a Table (upstream's printer of the kind, in
    /// `pkg/printers/internalversion`): the name and the age unless the kind has its own.
    fn columns(&self) -> &'static [Column] {
        table::DEFAULT
    }

    /// The categories discovery lists the kind in (upstream's `CategoriesProvider`: `kubectl get
    /// all` reads them); none by default.
    fn categories(&self) -> &'static [&'static str] {
        &[]
    }

    /// The field labels of the kind's field label conversion function; `None` (the default) for
    /// a kind without one, which takes `metadata.name` and `metadata.namespace` only.
    fn field_labels(&self) -> Option<FieldLabels> {
        None
    }

    /// The value a field selector compares for `label` (a supported, converted label) on an
    /// object of the kind, as upstream's selectable field set of the kind has it: the field's
    /// text by default.
    fn selectable_value(&self, obj: &Value, label: &str) -> String {
        table::field_value(obj, label)
    }

    /// Whether a DELETE that removes the object at once answers with the object (upstream's
    /// `ReturnDeletedObject`) or with a success Status naming it.
    fn returns_deleted_object(&self) -> bool {
        true
    }

    /// Whether injected faults hit writes of the kind.
    fn faulted(&self) -> bool {
        true
    }

    /// Whether a write of the main resource or its status may leave out
    /// `metadata.resourceVersion` and apply to the latest object (upstream's
    /// `AllowUnconditionalUpdate`); a kind that says no answers such a write with 422.
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// A new object before anything else (a Namespace's `kubernetes` finalizer).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// The status a new object starts with: none for a kind with a status subresource (its
    /// status is written through that subresource only).
    fn reset_status_for_create(&self, obj: &mut Value) {
        if self.resource().status_subresource {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
    }

    /// A write of the main resource before defaulting, given the stored object.
    fn prepare_for_update(&self, _old: &Value, _obj: &mut Value) {}

    /// The API's defaults (`SetDefaults_<Kind>`), applied to every write.
    fn default(&self, _obj: &mut Value) {}

    /// The spec's normalisation before validation, given the stored object on an update (a
    /// claim's data sources).
    fn normalize(&self, _old: Option<&Value>, _obj: &mut Value) {}

    /// How the kind's names are checked (upstream's `ValidateNameFunc` of the kind).
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Validation of a new object: its metadata, then the kind's rules.
    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        validate_meta(self.resource(), self.name_rule(), obj, errs);
        self.validate_spec(obj, errs);
    }

    /// The kind's own rules for an object, on create and on update.
    fn validate_spec(&self, _obj: &Value, _errs: &mut Vec<FieldError>) {}

    /// Validation of a write of the main resource: the create rules, then what the kind
    /// forbids to change.
    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(self.resource(), old, new, errs);
        self.validate_spec(new, errs);
        self.validate_spec_update(old, new, errs);
    }

    /// What the kind forbids an update to change.
    fn validate_spec_update(&self, _old: &Value, _new: &Value, _errs: &mut Vec<FieldError>) {}

    /// Validation of a status write (the spec is the stored one).
    fn validate_status_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(self.resource(), old, new, errs);
    }

    /// Whether `metadata.generation` counts changes of the spec.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Whether an update changes what the generation counts (the `spec`).
    fn spec_changed(&self, old: &Value, new: &Value) -> bool {
        old.get("spec") != new.get("spec")
    }

    /// Metadata a status write keeps from the stored object besides what the server owns.
    fn kept_by_status_update(&self) -> &'static [&'static str] {
        &[]
    }

    /// A new object once stored, at `now`.
    fn created(&self, _obj: &mut Value, _now: &str) {}

    /// An update that changes something, before it is stored, at `now` (after the generation).
    fn updated(&self, _old: &Value, _new: &mut Value, _status: bool, _now: &str) {}

    /// Finalizers a delete adds to an object not yet being deleted (a CustomResourceDefinition's
    /// cleanup of its objects, upstream's `customresourcecleanup.apiextensions.k8s.io`).
    fn finalizers_on_delete(&self) -> &'static [&'static str] {
        &[]
    }

    /// An object that finalizers hold, marked deleted: a grace period of 0 (kinds without
    /// graceful deletion).
    fn mark_deleted(&self, obj: &mut Value) {
        meta_mut(obj).insert("deletionGracePeriodSeconds".into(), Value::from(0));
    }
}
