//! Server-side printing: `meta.k8s.io/v1` Tables with the columns kubectl shows on a real
//! cluster (kubectl asks with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints
//! whatever columns come back; `-o wide` shows the priority-1 ones too). A built-in kind's
//! columns are its strategy's in the store (`pv_store::table`); what is here is the Table itself,
//! custom resources' columns and what each row carries besides its cells.

use crate::select::field_value as field;
use jiff::Timestamp;
use pv_store::table::{human_duration, Column};
use pv_store::ResourceType;
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

/// How the rows of a resource are printed: a built-in kind's columns, or a custom resource's
/// `additionalPrinterColumns`.
#[derive(Clone, Debug)]
pub enum Printer {
    /// The columns of a built-in kind (its strategy's, see [`Printer::kind`]).
    Kind(&'static [Column]),
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
    /// The printer of a built-in resource: the columns its kind's strategy declares.
    pub fn kind(rt: &ResourceType) -> Printer {
        Printer::Kind(pv_store::columns(rt))
    }

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
            Printer::Kind(columns) => columns
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
            Printer::Kind(columns) => columns.iter().map(|c| c.value(o, now)).collect(),
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

    /// The printer of a built-in resource, by its plural.
    fn built_in(plural: &str) -> Printer {
        Printer::kind(ResourceType::by_plural(plural).unwrap())
    }

    #[test]
    fn built_in_tables_declare_their_columns_and_type_their_cells() {
        let driver = json!({"metadata": {"name": "d"}, "spec": {"podInfoOnMount": true, "volumeLifecycleModes": ["Persistent", "Ephemeral"],
                                                                "tokenRequests": [{"audience": "a"}, {"audience": "b"}]}});
        let t = table(&built_in("csidrivers"), &[&driver], "1", IncludeObject::None, None);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["d", true, true, false, "a,b", false, "Persistent,Ephemeral", "<unknown>"])
        );
        assert_eq!(t["rows"][0]["object"], Value::Null);
        assert_eq!(t["columnDefinitions"][1]["type"], "boolean");
        assert_eq!(
            t["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0})
        );
        let sc = json!({"metadata": {"name": "s"}, "provisioner": "p"});
        let t = table(&built_in("storageclasses"), &[&sc], "1", IncludeObject::None, None);
        assert_eq!((&t["columnDefinitions"][4]["type"], &t["rows"][0]["cells"][4]), (&json!("string"), &json!(false)));
        let pv = json!({"metadata": {"name": "v", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}, "status": {"phase": "Bound"}});
        let t = table(&built_in("persistentvolumes"), &[&pv], "7", IncludeObject::Metadata, Some("c"));
        assert_eq!(t["rows"][0]["cells"][2], "RWO,ROX");
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 11);
        assert_eq!(t["columnDefinitions"][10]["priority"], 1);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"], json!({"resourceVersion": "7", "continue": "c"}));
        let capacity = json!({"metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"}});
        let t = table(&built_in("csistoragecapacities"), &[&capacity], "1", IncludeObject::Object, None);
        assert_eq!(t["rows"][0]["cells"], json!(["c", "2020-01-01T00:00:00Z"]));
        assert_eq!(t["columnDefinitions"][1]["type"], "date");
        assert_eq!(t["rows"][0]["object"], capacity);
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
