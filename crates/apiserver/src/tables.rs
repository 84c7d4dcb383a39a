//! Server-side printing: `meta.k8s.io/v1` Tables with the columns kubectl shows on a real
//! cluster (kubectl asks with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints
//! whatever columns come back; `-o wide` shows the priority-1 ones too).

use crate::select::field_value as field;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

/// What each row carries besides its cells (`?includeObject=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default): what kubectl needs for labels and namespaces.
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// From the query parameter.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// True when the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=Table"))
}

/// Kubernetes' short human duration (`5s`, `3m20s`, `2d4h`).
pub fn human_duration(d: SignedDuration) -> String {
    let s = d.as_secs();
    if s < -1 {
        return "<invalid>".into();
    }
    if s < 0 {
        return "0s".into();
    }
    let (m, h) = (s / 60, s / 3600);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{}d", h / 24)
        } else {
            format!("{}d{}h", h / 24, h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{}d", h / 24)
    } else if h < 24 * 365 * 8 {
        let days = h / 24;
        if days % 365 == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{}d", days / 365, days % 365)
        }
    } else {
        format!("{}y", h / 24 / 365)
    }
}

fn age(obj: &Value, path: &str, now: Timestamp) -> String {
    let t = field(obj, path);
    match t.parse::<Timestamp>() {
        Ok(t) => human_duration(now.duration_since(t)),
        Err(_) => "<unknown>".into(),
    }
}

fn or(s: String, default: &str) -> String {
    if s.is_empty() {
        default.into()
    } else {
        s
    }
}

fn access_modes(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter().filter_map(Value::as_str).map(pv_model::helpers::access_mode_short).collect::<Vec<_>>().join(",")
        })
        .unwrap_or_default()
}

/// One object being printed, and the moment its ages are measured from.
struct Row<'a> {
    o: &'a Value,
    now: Timestamp,
}

impl Row<'_> {
    /// The text at a dotted field path ("" when missing).
    fn f(&self, path: &str) -> String {
        field(self.o, path)
    }

    /// Whether the object is being deleted.
    fn deleting(&self) -> bool {
        !self.f("metadata.deletionTimestamp").is_empty()
    }

    /// The phase, or `Terminating` while the object is being deleted (upstream's printers for
    /// volumes and claims).
    fn phase_or_terminating(&self) -> String {
        if self.deleting() {
            "Terminating".into()
        } else {
            self.f("status.phase")
        }
    }

    /// The object's age.
    fn age(&self) -> String {
        age(self.o, "metadata.creationTimestamp", self.now)
    }
}

/// A column: its header, its priority (1: shown by `-o wide` only), its type and format as
/// kube-apiserver's printers declare them, and how a row's cell reads. A cell is read as text
/// and sent as the JSON its Go value is (`enc`: a `boolean` or `integer` cell is a JSON boolean
/// or number), which is not always the declared type (a class's `AllowVolumeExpansion` is
/// declared a string and sent as a boolean).
struct Column {
    name: &'static str,
    priority: u8,
    ty: &'static str,
    format: &'static str,
    enc: &'static str,
    cell: fn(&Row) -> String,
}

const fn col(name: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 0, ty: "string", format: "", enc: "string", cell }
}

const fn wide(name: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 1, ty: "string", format: "", enc: "string", cell }
}

/// A column of another type than string (`boolean`, `integer`).
const fn typed(name: &'static str, ty: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 0, ty, format: "", enc: ty, cell }
}

impl Column {
    /// The cell of a row, typed as the column is.
    fn value(&self, row: &Row) -> Value {
        let text = (self.cell)(row);
        match self.enc {
            "boolean" => Value::Bool(text == "true"),
            "integer" => text.parse::<i64>().map_or(Value::String(text), Value::from),
            _ => Value::String(text),
        }
    }
}

/// A boolean field, with the value upstream's printer assumes when it is unset.
fn flag(r: &Row, path: &str, unset: bool) -> String {
    match r.f(path).as_str() {
        "" => unset.to_string(),
        v => v.to_string(),
    }
}

fn strings_at<'a>(o: &'a Value, pointer: &str) -> Option<Vec<&'a str>> {
    o.pointer(pointer).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect())
}

/// A column that names the object (format `name`).
const fn name_col(name: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 0, ty: "string", format: "name", enc: "string", cell }
}

const NAME: Column = name_col("Name", |r| r.f("metadata.name"));
const AGE: Column = col("Age", |r| r.age());

/// upstream's `printPersistentVolume`.
const PERSISTENT_VOLUME: &[Column] = &[
    NAME,
    col("Capacity", |r| r.f("spec.capacity.storage")),
    col("Access Modes", |r| access_modes(r.o.pointer("/spec/accessModes"))),
    col("Reclaim Policy", |r| r.f("spec.persistentVolumeReclaimPolicy")),
    col("Status", |r| r.phase_or_terminating()),
    col("Claim", |r| {
        if r.f("spec.claimRef.name").is_empty() {
            String::new()
        } else {
            format!("{}/{}", r.f("spec.claimRef.namespace"), r.f("spec.claimRef.name"))
        }
    }),
    col("StorageClass", |r| r.f("spec.storageClassName")),
    col("VolumeAttributesClass", |r| or(r.f("spec.volumeAttributesClassName"), "<unset>")),
    col("Reason", |r| r.f("status.reason")),
    AGE,
    wide("VolumeMode", |r| or(r.f("spec.volumeMode"), "<unset>")),
];

/// upstream's `printPersistentVolumeClaim`.
const PERSISTENT_VOLUME_CLAIM: &[Column] = &[
    NAME,
    col("Status", |r| r.phase_or_terminating()),
    col("Volume", |r| r.f("spec.volumeName")),
    col("Capacity", |r| r.f("status.capacity.storage")),
    col("Access Modes", |r| access_modes(r.o.pointer("/status/accessModes"))),
    col("StorageClass", |r| r.f("spec.storageClassName")),
    col("VolumeAttributesClass", |r| or(r.f("status.currentVolumeAttributesClassName"), "<unset>")),
    AGE,
    wide("VolumeMode", |r| or(r.f("spec.volumeMode"), "<unset>")),
];

/// upstream's `printStorageClass`.
const STORAGE_CLASS: &[Column] = &[
    name_col("Name", |r| {
        let name = r.f("metadata.name");
        if is_default_class(r.o) {
            format!("{name} (default)")
        } else {
            name
        }
    }),
    col("Provisioner", |r| r.f("provisioner")),
    col("ReclaimPolicy", |r| r.f("reclaimPolicy")),
    col("VolumeBindingMode", |r| r.f("volumeBindingMode")),
    Column { enc: "boolean", ..col("AllowVolumeExpansion", |r| or(r.f("allowVolumeExpansion"), "false")) },
    AGE,
];

/// upstream's `printCSIDriver`.
const CSI_DRIVER: &[Column] = &[
    NAME,
    typed("AttachRequired", "boolean", |r| flag(r, "spec.attachRequired", true)),
    typed("PodInfoOnMount", "boolean", |r| flag(r, "spec.podInfoOnMount", false)),
    typed("StorageCapacity", "boolean", |r| flag(r, "spec.storageCapacity", false)),
    col("TokenRequests", |r| {
        let audiences = r.o.pointer("/spec/tokenRequests").and_then(Value::as_array).filter(|a| !a.is_empty());
        match audiences {
            Some(a) => a.iter().map(|t| field(t, "audience")).collect::<Vec<_>>().join(","),
            None => "<unset>".into(),
        }
    }),
    typed("RequiresRepublish", "boolean", |r| flag(r, "spec.requiresRepublish", false)),
    col("Modes", |r| or(strings_at(r.o, "/spec/volumeLifecycleModes").unwrap_or_default().join(","), "<none>")),
    AGE,
];

/// upstream's `printCSINode`.
const CSI_NODE: &[Column] = &[
    NAME,
    typed("Drivers", "integer", |r| {
        r.o.pointer("/spec/drivers").and_then(Value::as_array).map_or(0, Vec::len).to_string()
    }),
    AGE,
];

/// upstream's `printVolumeAttachment`.
const VOLUME_ATTACHMENT: &[Column] = &[
    NAME,
    name_col("Attacher", |r| r.f("spec.attacher")),
    col("PV", |r| r.f("spec.source.persistentVolumeName")),
    col("Node", |r| r.f("spec.nodeName")),
    typed("Attached", "boolean", |r| flag(r, "status.attached", false)),
    AGE,
];

/// kube-apiserver's default table convertor: the name and the creation time (as a date). It
/// serves CSIStorageCapacities, whose registry does not use the printer kubectl's own code has.
const DEFAULT_CONVERTOR: &[Column] = &[
    NAME,
    Column {
        name: "Created At",
        priority: 0,
        ty: "date",
        format: "",
        enc: "string",
        cell: |r| r.f("metadata.creationTimestamp"),
    },
];

/// upstream's `printVolumeAttributesClass`.
const VOLUME_ATTRIBUTES_CLASS: &[Column] = &[NAME, col("DriverName", |r| r.f("driverName")), AGE];

/// upstream's `printEvent`.
const EVENT: &[Column] = &[
    col("Last Seen", |r| event_time(r.o, r.now, false)),
    col("Type", |r| r.f("type")),
    col("Reason", |r| r.f("reason")),
    col("Object", |r| format!("{}/{}", r.f("involvedObject.kind").to_lowercase(), r.f("involvedObject.name"))),
    wide("Subobject", |r| r.f("involvedObject.fieldPath")),
    wide("Source", |r| {
        let c = or(r.f("source.component"), &r.f("reportingComponent"));
        let h = r.f("source.host");
        if h.is_empty() {
            c
        } else {
            format!("{c}, {h}")
        }
    }),
    col("Message", |r| r.f("message").trim().to_string()),
    wide("First Seen", |r| event_time(r.o, r.now, true)),
    Column { enc: "integer", ..wide("Count", |r| or(r.f("count"), &or(r.f("series.count"), "1"))) },
    Column { priority: 1, ..NAME },
];

fn container_statuses(o: &Value) -> &[Value] {
    o.pointer("/status/containerStatuses").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// upstream's `printPod`, without its readiness gates and container reasons.
const POD: &[Column] = &[
    NAME,
    col("Ready", |r| {
        let total = r.o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
        let ready = container_statuses(r.o).iter().filter(|c| c["ready"] == Value::Bool(true)).count();
        format!("{ready}/{total}")
    }),
    col("Status", |r| {
        // upstream's printPod: the status reason over the phase; a pod being deleted is
        // Terminating until it reaches a terminal phase (Unknown when its node is lost).
        let phase = or(r.f("status.phase"), "Pending");
        let reason = r.f("status.reason");
        match (r.deleting(), reason.as_str(), phase.as_str()) {
            (true, "NodeLost", _) => "Unknown".into(),
            (true, _, p) if p != "Succeeded" && p != "Failed" => "Terminating".into(),
            (_, "", _) => phase,
            _ => reason,
        }
    }),
    col("Restarts", |r| {
        container_statuses(r.o).iter().filter_map(|c| c["restartCount"].as_i64()).sum::<i64>().to_string()
    }),
    AGE,
    wide("IP", |r| or(r.f("status.podIP"), "<none>")),
    wide("Node", |r| or(r.f("spec.nodeName"), "<none>")),
];

/// upstream's `printNode`.
const NODE: &[Column] = &[
    NAME,
    col("Status", |r| {
        r.o.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map(|c| if c["status"] == "True" { "Ready" } else { "NotReady" })
            .unwrap_or("Unknown")
            .into()
    }),
    col("Roles", |_| "<none>".into()),
    AGE,
    col("Version", |r| r.f("status.nodeInfo.kubeletVersion")),
];

const NAMESPACE: &[Column] = &[NAME, col("Status", |r| or(r.f("status.phase"), "Active")), AGE];

const LEASE: &[Column] = &[NAME, col("Holder", |r| r.f("spec.holderIdentity")), AGE];

/// The number of keys of the maps at `fields`.
fn keys(r: &Row, fields: &[&str]) -> String {
    fields.iter().map(|f| r.o.get(*f).and_then(Value::as_object).map_or(0, |m| m.len())).sum::<usize>().to_string()
}

/// upstream's `printSecret` (its Data column is declared a string and sent as a number).
const SECRET: &[Column] =
    &[NAME, col("Type", |r| r.f("type")), Column { enc: "integer", ..col("Data", |r| keys(r, &["data"])) }, AGE];

/// upstream's `printConfigMap`.
const CONFIG_MAP: &[Column] =
    &[NAME, Column { enc: "integer", ..col("Data", |r| keys(r, &["data", "binaryData"])) }, AGE];

/// apiextensions-apiserver's printer of CustomResourceDefinitions.
const CUSTOM_RESOURCE_DEFINITION: &[Column] = &[
    NAME,
    col("Scope", |r| r.f("spec.scope")),
    col("Versions", |r| {
        let vs = r.o.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
        vs.iter()
            .map(|v| {
                let name = v.get("name").and_then(Value::as_str).unwrap_or("");
                if v.get("storage").and_then(Value::as_bool) == Some(true) {
                    format!("{name}(storage)")
                } else {
                    name.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }),
    Column { ty: "date", ..col("Created At", |r| r.f("metadata.creationTimestamp")) },
    wide("Group", |r| r.f("spec.group")),
    wide("Kind", |r| r.f("spec.names.kind")),
    wide("ShortNames", |r| strings_at(r.o, "/spec/names/shortNames").unwrap_or_default().join(",")),
    Column {
        ty: "boolean",
        enc: "boolean",
        ..wide("Established", |r| {
            let conds = r.o.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            conds
                .iter()
                .any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Established")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
                .to_string()
        })
    },
];

/// kube-apiserver's default printer, for kinds without their own.
const DEFAULT: &[Column] = &[NAME, AGE];

/// The printer of a kind: its columns, each with how its cell reads.
fn printer(kind: &str) -> &'static [Column] {
    match kind {
        "PersistentVolume" => PERSISTENT_VOLUME,
        "PersistentVolumeClaim" => PERSISTENT_VOLUME_CLAIM,
        "StorageClass" => STORAGE_CLASS,
        "CSIDriver" => CSI_DRIVER,
        "CSINode" => CSI_NODE,
        "VolumeAttachment" => VOLUME_ATTACHMENT,
        "CSIStorageCapacity" => DEFAULT_CONVERTOR,
        "VolumeAttributesClass" => VOLUME_ATTRIBUTES_CLASS,
        "Event" => EVENT,
        "Pod" => POD,
        "Node" => NODE,
        "Namespace" => NAMESPACE,
        "Lease" => LEASE,
        "CustomResourceDefinition" => CUSTOM_RESOURCE_DEFINITION,
        "Secret" => SECRET,
        "ConfigMap" => CONFIG_MAP,
        _ => DEFAULT,
    }
}

fn event_time(o: &Value, now: Timestamp, first: bool) -> String {
    let candidates: &[&str] = if first {
        &["firstTimestamp", "eventTime", "metadata.creationTimestamp"]
    } else {
        &["series.lastObservedTime", "lastTimestamp", "eventTime", "metadata.creationTimestamp"]
    };
    candidates.iter().find(|p| !field(o, p).is_empty()).map(|p| age(o, p, now)).unwrap_or_else(|| "<unknown>".into())
}

fn is_default_class(o: &Value) -> bool {
    let ann = o.pointer("/metadata/annotations");
    ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
        .iter()
        .any(|k| ann.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"))
}

fn row_object(o: &Value, inc: IncludeObject) -> Option<Value> {
    match inc {
        IncludeObject::None => None,
        IncludeObject::Object => Some(o.clone()),
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or(Value::Null),
        })),
    }
}

/// How the rows of a resource are printed: a built-in kind's printer, or a custom resource's
/// `additionalPrinterColumns`.
#[derive(Clone, Debug)]
pub enum Printer {
    /// The printer of a built-in kind.
    Kind(&'static str),
    /// A custom resource's columns, after its Name column.
    Custom(std::sync::Arc<[CustomColumn]>),
}

/// One of a custom resource's `additionalPrinterColumns`.
#[derive(Clone, Debug)]
pub struct CustomColumn {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    path: String,
}

/// `ObjectMeta`'s description of `name`, which custom resources' Name column carries.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

impl Printer {
    /// The printer of a served version of a custom resource: its columns, or Age alone when it
    /// declares none (as apiextensions-apiserver's table convertor).
    pub fn custom(version: Option<&Value>) -> Printer {
        let declared = version.and_then(|v| v.get("additionalPrinterColumns")).and_then(Value::as_array);
        let cols: Vec<CustomColumn> = match declared {
            Some(cols) if !cols.is_empty() => cols
                .iter()
                .map(|c| {
                    let f = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    let path = f("jsonPath");
                    let description = match f("description") {
                        d if d.is_empty() => format!("Custom resource definition column (in JSONPath format): {path}"),
                        d => d,
                    };
                    CustomColumn {
                        name: f("name"),
                        ty: f("type"),
                        format: f("format"),
                        description,
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        path,
                    }
                })
                .collect(),
            _ => vec![CustomColumn {
                name: "Age".into(),
                ty: "date".into(),
                format: String::new(),
                description: "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"
                    .into(),
                priority: 0,
                path: ".metadata.creationTimestamp".into(),
            }],
        };
        Printer::Custom(cols.into())
    }

    fn definitions(&self) -> Vec<Value> {
        match self {
            Printer::Kind(kind) => printer(kind)
                .iter()
                .map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": "", "priority": c.priority}))
                .collect(),
            Printer::Custom(cols) => {
                let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name",
                                           "description": NAME_DESCRIPTION, "priority": 0})];
                defs.extend(cols.iter().map(|c| {
                    json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description,
                           "priority": c.priority})
                }));
                defs
            }
        }
    }

    fn cells(&self, o: &Value, now: Timestamp) -> Vec<Value> {
        match self {
            Printer::Kind(kind) => {
                let row = Row { o, now };
                printer(kind).iter().map(|c| c.value(&row)).collect()
            }
            Printer::Custom(cols) => {
                let mut cells = vec![json!(field(o, "metadata.name"))];
                cells.extend(cols.iter().map(|c| custom_cell(c, o, now)));
                cells
            }
        }
    }
}

/// A custom column's cell, as apiextensions-apiserver's `cellForJSONValue` types it (null when
/// the path finds nothing).
fn custom_cell(c: &CustomColumn, o: &Value, now: Timestamp) -> Value {
    let Some(v) = json_path(o, &c.path) else { return Value::Null };
    match (c.ty.as_str(), v) {
        (_, Value::Null) => Value::Null,
        ("string", Value::String(s)) => json!(s),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => {
            n.as_i64().map_or_else(|| json!(n.as_f64().unwrap_or(0.0) as i64), |i| json!(i))
        }
        ("number", Value::Number(n)) => json!(n.as_f64()),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => match s.parse::<Timestamp>() {
            Ok(t) => json!(human_duration(now.duration_since(t))),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

/// The first value a printer column's JSONPath finds: `.a.b`, `.a[0]`, `.a[*].b` and
/// `.a[?(@.type=="Ready")].status`.
fn json_path<'a>(o: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = vec![o];
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}').trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            cur = cur.into_iter().filter_map(|v| v.get(key)).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            cur = if inner == "*" {
                cur.into_iter().flat_map(|v| v.as_array().into_iter().flatten()).collect()
            } else if let Ok(i) = inner.parse::<usize>() {
                cur.into_iter().filter_map(|v| v.get(i)).collect()
            } else if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                cur.into_iter()
                    .flat_map(|v| v.as_array().into_iter().flatten())
                    .filter(|item| {
                        item.get(k.trim())
                            .is_some_and(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string) == want)
                    })
                    .collect()
            } else {
                return None;
            };
        } else {
            return None;
        }
    }
    cur.into_iter().next()
}

/// A Table of `objects`, consistent with `resource_version`.
pub fn table(
    printer: &Printer,
    objects: &[&Value],
    resource_version: &str,
    inc: IncludeObject,
    continue_token: Option<&str>,
) -> Value {
    let now = Timestamp::now();
    let mut t = table_head(printer, resource_version, continue_token);
    t["rows"] = objects.iter().map(|o| row(printer, o, inc, now)).collect();
    t
}

/// A Table without its rows (`rows` is empty): what comes before and after them.
pub fn table_head(printer: &Printer, resource_version: &str, continue_token: Option<&str>) -> Value {
    let defs = printer.definitions();
    let mut meta = json!({"resourceVersion": resource_version});
    if let Some(c) = continue_token {
        meta["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
           "columnDefinitions": defs, "rows": []})
}

/// The row of one object in a Table made at `now` (ages are measured from it).
pub fn row(printer: &Printer, o: &Value, inc: IncludeObject, now: Timestamp) -> Value {
    let cells = printer.cells(o, now);
    // Without an object (`includeObject=None`) the row's `object` is null.
    json!({"cells": cells, "object": row_object(o, inc)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_rows_carry_booleans_and_counts_as_upstream_types_them() {
        let driver = json!({"metadata": {"name": "d"}, "spec": {"podInfoOnMount": true, "volumeLifecycleModes": ["Persistent", "Ephemeral"],
                                                                "tokenRequests": [{"audience": "a"}, {"audience": "b"}]}});
        let t = table(&Printer::Kind("CSIDriver"), &[&driver], "1", IncludeObject::None, None);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["d", true, true, false, "a,b", false, "Persistent,Ephemeral", "<unknown>"])
        );
        assert_eq!(t["rows"][0]["object"], Value::Null);
        assert_eq!(t["columnDefinitions"][1]["type"], "boolean");
        let node = json!({"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            table(&Printer::Kind("CSINode"), &[&node], "1", IncludeObject::None, None)["rows"][0]["cells"][1],
            2
        );
        let va = json!({"metadata": {"name": "v"}, "spec": {"attacher": "x", "source": {"persistentVolumeName": "pv"}, "nodeName": "n"},
                        "status": {"attached": true}});
        let t = table(&Printer::Kind("VolumeAttachment"), &[&va], "1", IncludeObject::None, None);
        assert_eq!(t["rows"][0]["cells"], json!(["v", "x", "pv", "n", true, "<unknown>"]));
        assert_eq!(t["columnDefinitions"][1]["format"], "name");
        let capacity =
            json!({"metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"}, "storageClassName": "fast"});
        let t = table(&Printer::Kind("CSIStorageCapacity"), &[&capacity], "1", IncludeObject::None, None);
        assert_eq!(t["rows"][0]["cells"], json!(["c", "2020-01-01T00:00:00Z"]));
        assert_eq!(t["columnDefinitions"][1]["type"], "date");
        let sc = json!({"metadata": {"name": "s"}, "provisioner": "p"});
        let t = table(&Printer::Kind("StorageClass"), &[&sc], "1", IncludeObject::None, None);
        assert_eq!((&t["columnDefinitions"][4]["type"], &t["rows"][0]["cells"][4]), (&json!("string"), &json!(false)));
    }

    #[test]
    fn human_durations_match_kubernetes() {
        let d = SignedDuration::from_secs;
        assert_eq!(human_duration(d(5)), "5s");
        assert_eq!(human_duration(d(200)), "3m20s");
        assert_eq!(human_duration(d(3600 * 5 + 60)), "5h1m");
        assert_eq!(human_duration(d(86400 * 3 + 3600 * 4)), "3d4h");
    }

    #[test]
    fn pv_rows_show_claim_modes_and_unset_attributes_class() {
        let pv = json!({"metadata": {"name": "v", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                     "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "ns", "name": "c"},
                     "storageClassName": "fast", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        let t = table(&Printer::Kind("PersistentVolume"), &[&pv], "7", IncludeObject::Metadata, None);
        let c = &t["rows"][0]["cells"];
        assert_eq!(c[2], "RWO,ROX");
        assert_eq!(c[5], "ns/c");
        assert_eq!(c[7], "<unset>");
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 11);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn objects_being_deleted_show_terminating_as_upstream_prints_them() {
        let deleting = json!({"name": "x", "creationTimestamp": "2020-01-01T00:00:00Z",
                              "deletionTimestamp": "2020-01-02T00:00:00Z", "finalizers": ["f"]});
        let pv = json!({"metadata": deleting, "spec": {}, "status": {"phase": "Bound"}});
        let t = table(&Printer::Kind("PersistentVolume"), &[&pv], "1", IncludeObject::None, None);
        assert_eq!(t["rows"][0]["cells"][4], "Terminating");
        let pvc = json!({"metadata": deleting, "spec": {}, "status": {"phase": "Bound"}});
        let t = table(&Printer::Kind("PersistentVolumeClaim"), &[&pvc], "1", IncludeObject::None, None);
        assert_eq!(t["rows"][0]["cells"][1], "Terminating");
        let pod = |phase: &str, reason: &str, meta: &Value| {
            let p = json!({"metadata": meta, "spec": {"containers": []}, "status": {"phase": phase, "reason": reason}});
            table(&Printer::Kind("Pod"), &[&p], "1", IncludeObject::None, None)["rows"][0]["cells"][2].clone()
        };
        assert_eq!(pod("Running", "", &deleting), "Terminating");
        assert_eq!(pod("Succeeded", "", &deleting), "Succeeded");
        assert_eq!(pod("Running", "NodeLost", &deleting), "Unknown");
        let live = json!({"name": "x", "creationTimestamp": "2020-01-01T00:00:00Z"});
        assert_eq!(pod("Running", "", &live), "Running");
        assert_eq!(pod("Failed", "Evicted", &live), "Evicted");
        let pv = json!({"metadata": live, "spec": {}, "status": {"phase": "Released"}});
        assert_eq!(
            table(&Printer::Kind("PersistentVolume"), &[&pv], "1", IncludeObject::None, None)["rows"][0]["cells"][4],
            "Released"
        );
    }

    #[test]
    fn default_storage_class_is_marked() {
        let sc = json!({"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "p", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"});
        let t = table(&Printer::Kind("StorageClass"), &[&sc], "1", IncludeObject::None, None);
        assert_eq!(t["rows"][0]["cells"][0], "std (default)");
        assert_eq!(t["rows"][0]["cells"][4], false);
    }

    #[test]
    fn custom_columns_follow_their_json_paths_and_types() {
        let version = json!({"additionalPrinterColumns": [
            {"name": "Ready", "type": "boolean", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "First", "type": "string", "jsonPath": ".spec.items[0].name", "priority": 1},
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]});
        let printer = Printer::custom(Some(&version));
        let o = json!({"metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"},
                       "spec": {"items": [{"name": "a"}, {"name": "b"}], "size": 3},
                       "status": {"conditions": [{"type": "Other", "status": true}, {"type": "Ready", "status": false}]}});
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let r = row(&printer, &o, IncludeObject::None, now);
        assert_eq!(r["cells"], json!(["w", false, "a", 3, Value::Null, "5m"]));
        let head = table_head(&printer, "1", None);
        assert_eq!(head["columnDefinitions"][2]["priority"], 1);
        assert_eq!(head["columnDefinitions"][0]["format"], "name");
        // No columns declared: Name and Age.
        let plain = table_head(&Printer::custom(None), "1", None);
        let names: Vec<&str> =
            plain["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Name", "Age"]);
    }
}
