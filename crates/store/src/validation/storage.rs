//! The CSI kinds of `storage.k8s.io/v1` (upstream's `pkg/apis/storage/validation`, the v1
//! defaults and the `registry/storage/*` strategies): CSIDriver, CSINode, VolumeAttachment,
//! CSIStorageCapacity and VolumeAttributesClass.
//!
//! Each kind has its defaults, the rules of its spec (metadata is checked by the caller, as for
//! every kind), and what an update may not change. Paths, error types and messages are
//! kube-apiserver 1.37's, which checks some fields twice: by hand and declaratively
//! (`zz_generated.validations.go`). Where the declarative check is the one that answers (a
//! VolumeAttachment's `attacher` and immutable `spec`), its wording and place are kept: its
//! errors come after the hand-written ones, and it does not look again at a field an update
//! leaves as it was. Feature gates are 1.37's defaults: `VolumeLimitScaling` and
//! `SELinuxMountReadWriteOncePod` on (their CSIDriver fields are defaulted and required),
//! `CSIVolumeHealth` off (a CSINode's `status.storageHealth` is dropped), and
//! `MutableCSINodeAllocatableCount` on (a driver's `allocatable` may change).

use super::names;
use super::selectors::validate_label_selector;
use super::validate_access_modes;
use crate::error::{go_quote, FieldError, FieldErrorKind};
use pv_model::quantity::Quantity;
use serde_json::{json, Map, Value};

const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: &[&str] = &["Persistent", "Ephemeral"];
const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_SIZE: usize = 256 * 1024;
const MAX_ATTACHMENT_METADATA_SIZE: usize = 256 * 1024;
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;
const CSI_NODE_ID_MAX_LENGTH: usize = 256;
const MIN_TOKEN_SECONDS: i64 = 600;
const MAX_TOKEN_SECONDS: i64 = 1 << 32;

/// The warning kube-apiserver gives a CSIDriver that asks for tokens without saying where they go.
pub const TOKEN_IN_SECRETS_WARNING: &str = "spec.serviceAccountTokenInSecrets is unset; if supported by this CSI driver, set to true to prevent possible logging of tokens in volume attributes";

fn set(v: Option<&Value>) -> Option<&Value> {
    v.filter(|x| !x.is_null())
}

fn text<'a>(v: &'a Value, f: &str) -> &'a str {
    v.get(f).and_then(Value::as_str).unwrap_or("")
}

fn too_long(path: impl Into<String>, max: usize) -> FieldError {
    FieldError { path: path.into(), kind: FieldErrorKind::TooLong(max), detail: String::new() }
}

/// A value as `field.Invalid` prints a non-string: compact JSON (`null` when unset).
fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "null".into(), Value::to_string)
}

/// core's `ValidateCSIDriverName`: required, at most 63 bytes, a DNS subdomain once lowercased.
fn csi_driver_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    if name.len() > 63 {
        errs.push(too_long(path, 63));
    }
    for m in names::dns1123_subdomain(&name.to_lowercase()) {
        errs.push(FieldError::invalid(path, name, m));
    }
}

/// The declarative check of a VolumeAttachment's `attacher`: required, a caseless DNS subdomain
/// (`format=k8s-long-name-caseless`), at most 63 characters.
fn declared_attacher(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    if name.len() > 253 {
        errs.push(FieldError::invalid(path, name, names::max_len_error(253)));
    }
    let caseless_label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    if !name.split('.').all(caseless_label) {
        errs.push(FieldError::invalid(
            path,
            name,
            names::regex_error(
                "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                &["Example.com"],
            ),
        ));
    }
    if name.chars().count() > 63 {
        errs.push(FieldError { path: path.into(), kind: FieldErrorKind::TooLongChars(63), detail: String::new() });
    }
}

/// upstream's `validateProvisioner`: required, a qualified name once lowercased (the message
/// shows the lowercased value).
pub(super) fn validate_provisioner(value: &str, path: &str, errs: &mut Vec<FieldError>) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let lower = value.to_lowercase();
    for m in names::qualified_name(&lower) {
        errs.push(FieldError::invalid(path, lower.as_str(), m));
    }
}

/// upstream's `validateParameters`: at most 512 entries and 256 KiB, no empty key; with
/// `allow_empty` false, at least one entry.
pub(super) fn validate_parameters(params: Option<&Value>, allow_empty: bool, path: &str, errs: &mut Vec<FieldError>) {
    let map = set(params).and_then(Value::as_object);
    if let Some(p) = set(params).filter(|p| !p.is_object()) {
        errs.push(FieldError::invalid(path, p.to_string(), "must be a map of strings"));
        return;
    }
    let len = map.map_or(0, Map::len);
    if len > MAX_PARAMETERS {
        errs.push(too_long(path, MAX_PARAMETERS));
        return;
    }
    let mut size = 0;
    for (k, v) in map.into_iter().flatten() {
        if k.is_empty() {
            errs.push(FieldError::invalid(path, "", "field can not be empty."));
        }
        size += k.len() + v.as_str().map_or(0, str::len);
    }
    if size > MAX_PARAMETERS_SIZE {
        errs.push(too_long(path, MAX_PARAMETERS_SIZE));
    }
    if !allow_empty && len == 0 {
        errs.push(FieldError::required(path, "must contain at least one key/value pair"));
    }
}

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let o = v.as_object_mut()?;
    let e = o.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut()
}

fn default_value(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), value);
    }
}

// ---------------------------------------------------------------------------------------------
// CSIDriver

/// upstream's `SetDefaults_CSIDriver` with 1.37's gates.
pub fn default_csi_driver(obj: &mut Value) {
    let Some(spec) = obj_mut(obj, "spec") else { return };
    default_value(spec, "attachRequired", json!(true));
    default_value(spec, "podInfoOnMount", json!(false));
    default_value(spec, "storageCapacity", json!(false));
    default_value(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    if spec.get("volumeLifecycleModes").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
    default_value(spec, "requiresRepublish", json!(false));
    default_value(spec, "seLinuxMount", json!(false));
    default_value(spec, "preventPodSchedulingIfMissing", json!(false));
    // Stored as Go writes it: no empty token request list.
    if spec.get("tokenRequests").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        spec.remove("tokenRequests");
    }
}

/// A driver's spec (upstream's `validateCSIDriverSpec`).
pub fn validate_csi_driver(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    // The path of `attachRequired` is upstream's own (`attachedRequired`).
    for (field, path) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
    ] {
        if set(spec.get(field)).is_none() {
            errs.push(FieldError::required(path, ""));
        }
    }
    if let Some(p) = set(spec.get("fsGroupPolicy")) {
        let p = p.as_str().unwrap_or("");
        if !FS_GROUP_POLICIES.contains(&p) {
            errs.push(FieldError::not_supported("spec.fsGroupPolicy", p, FS_GROUP_POLICIES));
        }
    }
    let token_requests = spec.get("tokenRequests").and_then(Value::as_array);
    let mut audiences: Vec<&str> = Vec::new();
    for (i, t) in token_requests.into_iter().flatten().enumerate() {
        let p = format!("spec.tokenRequests[{i}]");
        let audience = text(t, "audience");
        if audiences.contains(&audience) {
            errs.push(FieldError::duplicate(format!("{p}.audience"), audience));
            continue;
        }
        audiences.push(audience);
        if let Some(s) = t.get("expirationSeconds").and_then(Value::as_i64) {
            if s < MIN_TOKEN_SECONDS {
                errs.push(FieldError::invalid_value(
                    format!("{p}.expirationSeconds"),
                    s.to_string(),
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if s > MAX_TOKEN_SECONDS {
                errs.push(FieldError::invalid_value(
                    format!("{p}.expirationSeconds"),
                    s.to_string(),
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
    }
    for m in spec.get("volumeLifecycleModes").and_then(Value::as_array).into_iter().flatten() {
        let m = m.as_str().unwrap_or("");
        if !LIFECYCLE_MODES.contains(&m) {
            errs.push(FieldError::not_supported("spec.volumeLifecycleModes", m, LIFECYCLE_MODES));
        }
    }
    if set(spec.get("seLinuxMount")).is_none() {
        errs.push(FieldError::required("spec.seLinuxMount", ""));
    }
    if let Some(p) = spec.get("nodeAllocatableUpdatePeriodSeconds").and_then(Value::as_i64) {
        if p < 10 {
            errs.push(FieldError::invalid_value(
                "spec.nodeAllocatableUpdatePeriodSeconds",
                p.to_string(),
                "must be greater than or equal to 10 seconds",
            ));
        }
    }
    if let Some(v) = set(spec.get("serviceAccountTokenInSecrets")) {
        if token_requests.is_none_or(Vec::is_empty) {
            errs.push(FieldError::invalid_value(
                "spec.serviceAccountTokenInSecrets",
                v.to_string(),
                "serviceAccountTokenInSecrets is set but no tokenRequests are specified",
            ));
        }
    }
    if set(spec.get("preventPodSchedulingIfMissing")).is_none() {
        errs.push(FieldError::required("spec.preventPodSchedulingIfMissing", ""));
    }
}

/// What a driver update may not change: `attachRequired` (at upstream's path
/// `spec.attachedRequired`) and the lifecycle modes.
pub fn validate_csi_driver_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let field = |o: &Value, f: &str| set(o.get("spec").and_then(|s| s.get(f))).cloned();
    for (f, path) in
        [("attachRequired", "spec.attachedRequired"), ("volumeLifecycleModes", "spec.volumeLifecycleModes")]
    {
        let n = field(new, f);
        if field(old, f) != n {
            errs.push(FieldError::invalid_value(path, shown(n.as_ref()), "field is immutable"));
        }
    }
}

/// Whether a driver update changes its spec (its generation then counts up, from none).
pub fn csi_driver_spec_changed(old: &Value, new: &Value) -> bool {
    old.get("spec") != new.get("spec")
}

/// The warnings of a driver write: tokens requested (on an update: requested differently)
/// with `serviceAccountTokenInSecrets` unset.
pub fn csi_driver_warnings(old: Option<&Value>, new: &Value) -> Vec<String> {
    let tokens = |o: &Value| o.pointer("/spec/tokenRequests").cloned().filter(|t| !t.is_null());
    let requested = tokens(new).and_then(|t| t.as_array().map(|a| !a.is_empty())).unwrap_or(false);
    let changed = old.is_none_or(|o| tokens(o) != tokens(new));
    if requested && changed && set(new.pointer("/spec/serviceAccountTokenInSecrets")).is_none() {
        vec![TOKEN_IN_SECRETS_WARNING.to_string()]
    } else {
        Vec::new()
    }
}

// ---------------------------------------------------------------------------------------------
// CSINode

/// A node's drivers as kube-apiserver stores them: an empty list (and a driver's empty
/// topology keys) read back as `null`; the status is empty, as `CSIVolumeHealth` is off.
pub fn default_csi_node(obj: &mut Value) {
    if let Some(spec) = obj_mut(obj, "spec") {
        let empty = spec.get("drivers").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if empty {
            spec.insert("drivers".into(), Value::Null);
        }
        for d in spec.get_mut("drivers").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(d) = d.as_object_mut() {
                if d.get("topologyKeys").and_then(Value::as_array).is_none_or(Vec::is_empty) {
                    d.insert("topologyKeys".into(), Value::Null);
                }
            }
        }
    }
    if let Some(o) = obj.as_object_mut() {
        o.insert("status".into(), json!({}));
    }
}

/// A node's drivers (upstream's `validateCSINodeDrivers`).
pub fn validate_csi_node(obj: &Value, errs: &mut Vec<FieldError>) {
    let drivers = obj.pointer("/spec/drivers").and_then(Value::as_array);
    let mut seen: Vec<&str> = Vec::new();
    for (i, d) in drivers.into_iter().flatten().enumerate() {
        let p = format!("spec.drivers[{i}]");
        let name = text(d, "name");
        csi_driver_name(name, &format!("{p}.name"), errs);
        let node_id = text(d, "nodeID");
        if node_id.is_empty() {
            errs.push(FieldError::required(format!("{p}.nodeID"), ""));
        }
        if node_id.len() > CSI_NODE_ID_MAX_LENGTH {
            errs.push(FieldError::invalid(
                format!("{p}.nodeID"),
                node_id,
                format!("must be {CSI_NODE_ID_MAX_LENGTH} characters or less"),
            ));
        }
        if let Some(c) = d.pointer("/allocatable/count").and_then(Value::as_i64) {
            if c < 0 {
                errs.push(FieldError::invalid_value(
                    format!("{p}.allocatable.count"),
                    c.to_string(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        if seen.contains(&name) {
            errs.push(FieldError::duplicate(format!("{p}.name"), name));
        }
        seen.push(name);
        let mut keys: Vec<&str> = Vec::new();
        for key in d.get("topologyKeys").and_then(Value::as_array).into_iter().flatten() {
            let key = key.as_str().unwrap_or("");
            if key.is_empty() {
                errs.push(FieldError::required(p.as_str(), ""));
            }
            if keys.contains(&key) {
                errs.push(FieldError::duplicate(p.as_str(), key));
            }
            keys.push(key);
            for m in names::qualified_name(key) {
                errs.push(FieldError::invalid(p.as_str(), key, m));
            }
        }
    }
}

/// A driver as `field.Invalid` prints upstream's internal type (Go field names, no tags), with
/// its `allocatable` left out as the comparison leaves it out.
fn go_driver(d: &Value) -> String {
    let keys = match d.get("topologyKeys").and_then(Value::as_array) {
        Some(k) => Value::Array(k.clone()).to_string(),
        None => "null".into(),
    };
    format!(
        "{{\"Name\":{},\"NodeID\":{},\"TopologyKeys\":{keys},\"Allocatable\":null}}",
        go_quote(text(d, "name")),
        go_quote(text(d, "nodeID")),
    )
}

/// What a node update may not change: a driver already registered keeps its node ID and
/// topology keys (its `allocatable` may change).
pub fn validate_csi_node_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let drivers = |o: &Value| o.pointer("/spec/drivers").and_then(Value::as_array).cloned().unwrap_or_default();
    let comparable = |d: &Value| {
        let keys = d.get("topologyKeys").and_then(Value::as_array).filter(|k| !k.is_empty()).cloned();
        (text(d, "name").to_string(), text(d, "nodeID").to_string(), keys)
    };
    for od in drivers(old) {
        for nd in drivers(new) {
            if text(&od, "name") == text(&nd, "name") && comparable(&od) != comparable(&nd) {
                errs.push(FieldError::invalid_value("spec.drivers", go_driver(&nd), "field is immutable"));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// VolumeAttachment

/// An attachment's status as Go writes it: `attached` always, and a volume error's unset `time`
/// as `null`.
pub fn default_volume_attachment(obj: &mut Value) {
    let Some(status) = obj_mut(obj, "status") else { return };
    default_value(status, "attached", json!(false));
    for e in ["attachError", "detachError"] {
        if let Some(err) = status.get_mut(e).and_then(Value::as_object_mut) {
            err.entry("time").or_insert(Value::Null);
        }
    }
}

/// An attachment (upstream's `ValidateVolumeAttachment` but its metadata); `create` adds the
/// declarative check of `attacher`, which an update does not repeat (the spec is immutable).
pub fn validate_volume_attachment(obj: &Value, create: bool, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let source = spec.get("source").unwrap_or(&Value::Null);
    let (inline, pv_name) = (set(source.get("inlineVolumeSpec")), set(source.get("persistentVolumeName")));
    const ONE_OF: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (inline, pv_name) {
        (None, None) => errs.push(FieldError::required("spec.source", ONE_OF)),
        (Some(_), Some(_)) => errs.push(FieldError::forbidden("spec.source", ONE_OF)),
        (None, Some(n)) => {
            if n.as_str().unwrap_or("").is_empty() {
                errs.push(FieldError::required(
                    "spec.source.persistentVolumeName",
                    "must specify non empty persistentVolumeName",
                ));
            }
        }
        (Some(spec), None) => validate_inline_volume_spec(spec, "spec.source.inlineVolumeSpec", errs),
    }
    let node = text(spec, "nodeName");
    for m in names::dns1123_subdomain(node) {
        errs.push(FieldError::invalid("spec.nodeName", node, m));
    }
    let status = obj.get("status").unwrap_or(&Value::Null);
    let metadata = status.get("attachmentMetadata").and_then(Value::as_object);
    let size: usize = metadata.into_iter().flatten().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    if size > MAX_ATTACHMENT_METADATA_SIZE {
        errs.push(too_long("status.attachmentMetadata", MAX_ATTACHMENT_METADATA_SIZE));
    }
    for e in ["attachError", "detachError"] {
        let Some(err) = set(status.get(e)) else { continue };
        if text(err, "message").len() > MAX_VOLUME_ERROR_MESSAGE {
            errs.push(too_long(format!("status.{e}.message"), MAX_VOLUME_ERROR_MESSAGE));
        }
        if let Some(code) = err.get("errorCode").and_then(Value::as_i64) {
            if code < 0 {
                errs.push(FieldError::invalid_value(
                    format!("status.{e}.errorCode"),
                    code.to_string(),
                    "must be between 0 and 2147483647, inclusive",
                ));
            }
        }
    }
    if let Some(n) = pv_name {
        let n = n.as_str().unwrap_or("");
        for m in names::dns1123_subdomain(n) {
            errs.push(FieldError::invalid("spec.source.persistentVolumeName", n, m));
        }
    }
    if create {
        declared_attacher(text(spec, "attacher"), "spec.attacher", errs);
    }
}

/// An attachment update (main resource or status): the attachment's rules, then its spec, which
/// never changes (the declarative check, which prints no value).
pub fn validate_volume_attachment_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    validate_volume_attachment(new, false, errs);
    if old.get("spec") != new.get("spec") {
        errs.push(FieldError::invalid_value("spec", "null", "field is immutable"));
    }
}

/// upstream's `ValidatePersistentVolumeSpec` for an inline (CSI migration) volume.
fn validate_inline_volume_spec(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let inline_forbidden = "may not be specified in the context of inline volumes";
    if set(spec.get("claimRef")).is_some() {
        errs.push(FieldError::forbidden(format!("{path}.claimRef"), inline_forbidden));
    }
    if spec.get("capacity").and_then(Value::as_object).is_some_and(|c| !c.is_empty()) {
        errs.push(FieldError::forbidden(format!("{path}.capacity"), inline_forbidden));
    }
    if set(spec.get("csi")).is_none() {
        errs.push(FieldError::required(format!("{path}.csi"), "has to be specified in the context of inline volumes"));
    }
    let mut modes = Vec::new();
    validate_access_modes("accessModes", spec.get("accessModes"), "", &mut modes);
    errs.extend(modes.into_iter().map(|mut e| {
        e.path = format!("{path}.{}", e.path);
        e
    }));
    let policy = text(spec, "persistentVolumeReclaimPolicy");
    if !policy.is_empty() && policy != "Retain" {
        errs.push(FieldError::forbidden(
            format!("{path}.persistentVolumeReclaimPolicy"),
            "may only be Retain in the context of inline volumes",
        ));
    }
    if set(spec.get("nodeAffinity")).is_some() {
        errs.push(FieldError::forbidden(format!("{path}.nodeAffinity"), inline_forbidden));
    }
    // The volume source: exactly one, checked as a volume's.
    let mut sources = Vec::new();
    let wrapped = json!({"spec": spec});
    super::pv::validate_sources(&wrapped, &mut sources);
    errs.extend(sources.into_iter().map(|mut e| {
        e.path = match e.path.strip_prefix("spec") {
            Some(rest) => format!("{path}{rest}"),
            None => e.path,
        };
        e
    }));
    if !text(spec, "storageClassName").is_empty() {
        errs.push(FieldError::forbidden(format!("{path}.storageClassName"), inline_forbidden));
    }
    if let Some(m) = spec.get("volumeMode").and_then(Value::as_str) {
        if m != "Filesystem" {
            errs.push(FieldError::forbidden(
                format!("{path}.volumeMode"),
                "may not specify volumeMode other than Filesystem in the context of inline volumes",
            ));
        }
    }
    if let Some(vac) = spec.get("volumeAttributesClassName").and_then(Value::as_str) {
        if vac.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.volumeAttributesClassName"),
                "an empty string is disallowed",
            ));
        } else {
            for m in names::dns1123_subdomain(vac) {
                errs.push(FieldError::invalid(format!("{path}.volumeAttributesClassName"), vac, m));
            }
        }
        if set(spec.get("csi")).is_none() {
            errs.push(FieldError::required(
                format!("{path}.csi"),
                "has to be specified when using volumeAttributesClassName",
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CSIStorageCapacity

/// A capacity (upstream's `ValidateCSIStorageCapacity` but its metadata): a valid node
/// topology selector, a class name, a capacity that is not negative.
pub fn validate_csi_storage_capacity(obj: &Value, errs: &mut Vec<FieldError>) {
    if let Some(sel) = set(obj.get("nodeTopology")) {
        validate_label_selector(sel, "nodeTopology", errs);
    }
    let class = text(obj, "storageClassName");
    for m in names::dns1123_subdomain(class) {
        errs.push(FieldError::invalid("storageClassName", class, m));
    }
    if let Some(c) = set(obj.get("capacity")) {
        let s = match c {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match Quantity::parse(&s) {
            Err(e) => errs.push(FieldError::invalid("capacity", s, e.to_string())),
            Ok(q) if q.value() < 0 || (q.value() == 0 && q.nanos() < 0) => {
                errs.push(FieldError::invalid("capacity", s, "must be greater than or equal to 0"))
            }
            Ok(_) => {}
        }
    }
}

/// What a capacity update may not change: its node topology and class (the inputs of the CSI
/// `GetCapacity` call it reports).
pub fn validate_csi_storage_capacity_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let topology = |o: &Value| set(o.get("nodeTopology")).cloned();
    if topology(old) != topology(new) {
        errs.push(FieldError::invalid_value("nodeTopology", shown(topology(new).as_ref()), "field is immutable"));
    }
    let class = text(new, "storageClassName");
    if text(old, "storageClassName") != class {
        errs.push(FieldError::invalid("storageClassName", class, "field is immutable"));
    }
}

// ---------------------------------------------------------------------------------------------
// VolumeAttributesClass

/// A class (upstream's `ValidateVolumeAttributesClass` but its metadata): a driver name that is
/// a qualified name, at least one parameter.
pub fn validate_volume_attributes_class(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_provisioner(text(obj, "driverName"), "driverName", errs);
    validate_parameters(obj.get("parameters"), false, "parameters", errs);
}

/// A class update: its driver and parameters never change, and then the class's rules (in
/// upstream's order: the forbidden changes first).
pub fn validate_volume_attributes_class_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    if text(old, "driverName") != text(new, "driverName") {
        errs.push(FieldError::forbidden("driverName", "updates to driverName are forbidden."));
    }
    let params = |o: &Value| set(o.get("parameters")).filter(|p| p.as_object().is_none_or(|m| !m.is_empty())).cloned();
    if params(old) != params(new) {
        errs.push(FieldError::forbidden("parameters", "updates to parameters are forbidden."));
    }
    validate_volume_attributes_class(new, errs);
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
