//! The columns of a kind's rows in a `meta.k8s.io/v1` Table, as kube-apiserver's printers
//! (`pkg/printers/internalversion`) declare and fill them: the [`Column`] type, what a cell reads
//! of an object, and the columns most kinds share. Each kind's file lists its own columns (its
//! strategy's `columns`); the API server builds the Tables from them. A leaf: it knows no kind.

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

/// The string value of a dotted field path (numbers and booleans as text, missing as "").
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for p in path.split('.') {
        match cur.get(p) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
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

/// The age at `now` of the time at a dotted field path (`<unknown>` when it is not one).
pub(crate) fn age(obj: &Value, path: &str, now: Timestamp) -> String {
    let t = field_value(obj, path);
    match t.parse::<Timestamp>() {
        Ok(t) => human_duration(now.duration_since(t)),
        Err(_) => "<unknown>".into(),
    }
}

/// `s`, or `default` when it is empty.
pub(crate) fn or(s: String, default: &str) -> String {
    if s.is_empty() {
        default.into()
    } else {
        s
    }
}

/// Access modes in their short form, comma-separated (`RWO,ROX`).
pub(crate) fn access_modes(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter().filter_map(Value::as_str).map(pv_model::helpers::access_mode_short).collect::<Vec<_>>().join(",")
        })
        .unwrap_or_default()
}

/// One object being printed, and the moment its ages are measured from.
pub(crate) struct Row<'a> {
    /// The object.
    pub(crate) o: &'a Value,
    /// When the Table is made.
    pub(crate) now: Timestamp,
}

impl Row<'_> {
    /// The text at a dotted field path ("" when missing).
    pub(crate) fn f(&self, path: &str) -> String {
        field_value(self.o, path)
    }

    /// Whether the object is being deleted.
    pub(crate) fn deleting(&self) -> bool {
        !self.f("metadata.deletionTimestamp").is_empty()
    }

    /// The phase, or `Terminating` while the object is being deleted (upstream's printers for
    /// volumes and claims).
    pub(crate) fn phase_or_terminating(&self) -> String {
        if self.deleting() {
            "Terminating".into()
        } else {
            self.f("status.phase")
        }
    }

    /// The object's age.
    pub(crate) fn age(&self) -> String {
        age(self.o, "metadata.creationTimestamp", self.now)
    }
}

/// A column: its header, its priority (1: shown by `-o wide` only), its type and format as
/// kube-apiserver's printers declare them, and how a row's cell reads. A cell is read as text
/// and sent as the JSON its Go value is (`enc`: a `boolean` or `integer` cell is a JSON boolean
/// or number), which is not always the declared type (a class's `AllowVolumeExpansion` is
/// declared a string and sent as a boolean).
#[derive(Debug)]
pub struct Column {
    /// The header.
    pub name: &'static str,
    /// 0, or 1 for a column `-o wide` alone shows.
    pub priority: u8,
    /// The declared type (`string`, `boolean`, `integer`, `date`).
    pub ty: &'static str,
    /// The declared format (`name` for the column that names the object).
    pub format: &'static str,
    /// The JSON type the cell is sent as.
    pub(crate) enc: &'static str,
    /// The cell's text.
    pub(crate) cell: fn(&Row) -> String,
}

/// A string column.
pub(crate) const fn col(name: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 0, ty: "string", format: "", enc: "string", cell }
}

/// A string column shown by `-o wide` only.
pub(crate) const fn wide(name: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 1, ty: "string", format: "", enc: "string", cell }
}

/// A column of another type than string (`boolean`, `integer`).
pub(crate) const fn typed(name: &'static str, ty: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 0, ty, format: "", enc: ty, cell }
}

/// A column that names the object (format `name`).
pub(crate) const fn name_col(name: &'static str, cell: fn(&Row) -> String) -> Column {
    Column { name, priority: 0, ty: "string", format: "name", enc: "string", cell }
}

impl Column {
    /// The cell of `o` in a Table made at `now`, typed as the column is.
    pub fn value(&self, o: &Value, now: Timestamp) -> Value {
        let text = (self.cell)(&Row { o, now });
        match self.enc {
            "boolean" => Value::Bool(text == "true"),
            "integer" => text.parse::<i64>().map_or(Value::String(text), Value::from),
            _ => Value::String(text),
        }
    }
}

/// A boolean field, with the value upstream's printer assumes when it is unset.
pub(crate) fn flag(r: &Row, path: &str, unset: bool) -> String {
    match r.f(path).as_str() {
        "" => unset.to_string(),
        v => v.to_string(),
    }
}

/// The strings of the array at a JSON pointer (None when there is no array).
pub(crate) fn strings_at<'a>(o: &'a Value, pointer: &str) -> Option<Vec<&'a str>> {
    o.pointer(pointer).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect())
}

/// The number of keys of the maps at `fields`.
pub(crate) fn keys(r: &Row, fields: &[&str]) -> String {
    fields.iter().map(|f| r.o.get(*f).and_then(Value::as_object).map_or(0, |m| m.len())).sum::<usize>().to_string()
}

/// The object's name.
pub(crate) const NAME: Column = name_col("Name", |r| r.f("metadata.name"));

/// The object's age.
pub(crate) const AGE: Column = col("Age", |r| r.age());

/// kube-apiserver's default printer, for kinds without their own.
pub const DEFAULT: &[Column] = &[NAME, AGE];

/// kube-apiserver's default table convertor: the name and the creation time (as a date). It
/// serves CSIStorageCapacities, whose registry does not use the printer kubectl's own code has.
pub const DEFAULT_CONVERTOR: &[Column] = &[
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::ResourceType;
    use serde_json::json;

    /// The cells of `o` in a Table of `kind`'s, made at the Unix epoch.
    fn cells(kind: &str, o: &Value) -> Vec<Value> {
        let rt = ResourceType::by_kind(kind).unwrap();
        crate::registry::columns(rt).iter().map(|c| c.value(o, Timestamp::UNIX_EPOCH)).collect()
    }

    fn names(kind: &str) -> Vec<&'static str> {
        crate::registry::columns(ResourceType::by_kind(kind).unwrap()).iter().map(|c| c.name).collect()
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
    fn kinds_without_a_printer_show_name_and_age() {
        assert_eq!(names("Service"), ["Name", "Age"]);
        assert_eq!(names("ServiceAccount"), ["Name", "Age"]);
        assert_eq!(names("CSIStorageCapacity"), ["Name", "Created At"]);
    }

    #[test]
    fn csi_rows_carry_booleans_and_counts_as_upstream_types_them() {
        let driver = json!({"metadata": {"name": "d"}, "spec": {"podInfoOnMount": true, "volumeLifecycleModes": ["Persistent", "Ephemeral"],
                                                                "tokenRequests": [{"audience": "a"}, {"audience": "b"}]}});
        assert_eq!(
            Value::from(cells("CSIDriver", &driver)),
            json!(["d", true, true, false, "a,b", false, "Persistent,Ephemeral", "<unknown>"])
        );
        let node = json!({"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(cells("CSINode", &node)[1], 2);
        let va = json!({"metadata": {"name": "v"}, "spec": {"attacher": "x", "source": {"persistentVolumeName": "pv"}, "nodeName": "n"},
                        "status": {"attached": true}});
        assert_eq!(Value::from(cells("VolumeAttachment", &va)), json!(["v", "x", "pv", "n", true, "<unknown>"]));
        let capacity =
            json!({"metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"}, "storageClassName": "fast"});
        assert_eq!(Value::from(cells("CSIStorageCapacity", &capacity)), json!(["c", "2020-01-01T00:00:00Z"]));
        let sc = json!({"metadata": {"name": "s"}, "provisioner": "p"});
        assert_eq!(cells("StorageClass", &sc)[4], false);
    }

    #[test]
    fn pv_rows_show_claim_modes_and_unset_attributes_class() {
        let pv = json!({"metadata": {"name": "v", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                     "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "ns", "name": "c"},
                     "storageClassName": "fast", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        let c = cells("PersistentVolume", &pv);
        assert_eq!(c[2], "RWO,ROX");
        assert_eq!(c[5], "ns/c");
        assert_eq!(c[7], "<unset>");
        assert_eq!(c.len(), 11);
    }

    #[test]
    fn objects_being_deleted_show_terminating_as_upstream_prints_them() {
        let deleting = json!({"name": "x", "creationTimestamp": "2020-01-01T00:00:00Z",
                              "deletionTimestamp": "2020-01-02T00:00:00Z", "finalizers": ["f"]});
        let pv = json!({"metadata": deleting, "spec": {}, "status": {"phase": "Bound"}});
        assert_eq!(cells("PersistentVolume", &pv)[4], "Terminating");
        let pvc = json!({"metadata": deleting, "spec": {}, "status": {"phase": "Bound"}});
        assert_eq!(cells("PersistentVolumeClaim", &pvc)[1], "Terminating");
        let pod = |phase: &str, reason: &str, meta: &Value| {
            let p = json!({"metadata": meta, "spec": {"containers": []}, "status": {"phase": phase, "reason": reason}});
            cells("Pod", &p)[2].clone()
        };
        assert_eq!(pod("Running", "", &deleting), "Terminating");
        assert_eq!(pod("Succeeded", "", &deleting), "Succeeded");
        assert_eq!(pod("Running", "NodeLost", &deleting), "Unknown");
        let live = json!({"name": "x", "creationTimestamp": "2020-01-01T00:00:00Z"});
        assert_eq!(pod("Running", "", &live), "Running");
        assert_eq!(pod("Failed", "Evicted", &live), "Evicted");
        let pv = json!({"metadata": live, "spec": {}, "status": {"phase": "Released"}});
        assert_eq!(cells("PersistentVolume", &pv)[4], "Released");
    }

    #[test]
    fn default_storage_class_is_marked() {
        let sc = json!({"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "p", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"});
        let c = cells("StorageClass", &sc);
        assert_eq!(c[0], "std (default)");
        assert_eq!(c[4], false);
    }
}
