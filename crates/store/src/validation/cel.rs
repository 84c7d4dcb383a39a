//! A custom resource's `x-kubernetes-validations` rules, as apiextensions-apiserver checks them
//! (`pkg/apiserver/schema/cel`): the schema and the object are walked together (`properties`,
//! `additionalProperties`, `items`, `allOf`), and at every node that has rules and a value that
//! is present and not null each rule is evaluated with `self` bound to that value, and `oldSelf`
//! to the stored object's value at the same place on an update.
//!
//! CEL is evaluated by the [`cel`] crate (cel-rust), with its standard library and its `strings`,
//! `lists` and `math` extensions. JSON becomes CEL as upstream converts it: objects are maps whose
//! declared property names are escaped the Kubernetes way (`__namespace__`, `__dash__`,
//! `__dot__`, `__slash__`, `__underscores__`), arrays are lists, a number is an `int` (a `double`
//! where the schema says `number`, or the JSON has a fraction), strings, bools and `null` are
//! themselves. At the resource root (and at an embedded resource) `self.metadata` holds only
//! `name` and `generateName`, as upstream's typed view does.
//!
//! Semantics kept from upstream: a transition rule (one that refers to `oldSelf`) runs only when
//! the old value at the node exists (on create never; inside a list only for
//! `x-kubernetes-list-type: map`, whose items correlate by their keys); a failing rule's error is
//! at the node's path (`spec.source`, `spec.items[0]`, `spec.labels[key]`; `<nil>` for the root,
//! as upstream prints an empty path) plus its `fieldPath`; the text is `messageExpression`'s
//! (when it gives a non-empty string with no line break), else `message`, else
//! `failed rule: <rule>`; `reason` picks Invalid, Forbidden, Required or Duplicate; an object's
//! or a list's value is left out of the message (`Invalid value: <text>`), a scalar's is
//! printed as Go prints it (`Invalid value: "other": ...`, `Invalid value: 2: ...`); an
//! evaluation error is reported as `Invalid value: "<type>": <error> evaluating rule: <rule>`;
//! and on an update a failing rule that does not use `oldSelf` is dropped (ratcheted) when the
//! value it checks, or its nearest correlated ancestor, is unchanged.
//!
//! Not supported: CEL cost estimation and runtime cost limits (no rule is refused or stopped
//! for its cost); static type checking (a rule that upstream's compiler refuses for its types
//! is only an evaluation error here); `timestamp()` and `duration()`; `optionalOldSelf` (such rules are treated as other
//! transition rules, so they are skipped when there is no old value); order-insensitive
//! equality of `set` and `map` lists; typed values for string formats (`date-time`, `duration`,
//! `byte` stay strings); warnings for ratcheted errors. Of the Kubernetes CEL libraries these
//! are missing: `quantity`, `url`, `ip`/`cidr`, `format.*` (the named-format library; the
//! strings extension's `'%d'.format([x])` is there), `semver`, `authorizer`, `findAll` with a
//! limit, and cel-go's two-variable comprehensions. Available are the CEL standard functions
//! and macros (`size`, `has`, `all`, `exists`, `exists_one`, `map`, `filter`, `matches`,
//! `startsWith`, `endsWith`, `contains`, conversions, optionals; not `timestamp` and `duration`,
//! whose implementation would bring a second time library), the
//! crate's extensions (`charAt`, `indexOf`, `lastIndexOf`, `join`, `replace`, `split`,
//! `substring`, `lowerAscii`, `upperAscii`, `trim`, `format`, `reverse`, `slice`, `flatten`,
//! `distinct`, `sort`, `lists.range`, `math.*`), and, added here, Kubernetes' list functions
//! `isSorted`, `sum`, `min`, `max`, the regex functions `find` and `findAll`, and `sets.contains`,
//! `sets.equivalent`, `sets.intersects`.

use crate::error::{FieldError, FieldErrorKind};
use cel::extractors::This;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program, Value as Cel};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Every rule of `schema` (an openAPIV3Schema) and its sub-schemas checked on `new`, with `old`
/// (the stored object on an update, None on create) for transition rules.
pub fn validate(new: &Value, old: Option<&Value>, schema: &Value) -> Vec<FieldError> {
    let walker = Walker { env: Arc::new(environment()) };
    let mut errs = Vec::new();
    walker.node(new, old, schema, "", true, false, &mut errs);
    errs
}

/// The CEL environment: the standard library and the crate's extensions.
fn environment() -> Env {
    let mut env = Env::stdlib();
    for ext in [cel::extensions::strings, cel::extensions::lists, cel::extensions::math] {
        // The extensions declare distinct functions; a conflict would only leave one out.
        let _ = env.add_extension(ext);
    }
    env
}

/// A context with what the crate lacks of Kubernetes' environment: the list functions
/// (`isSorted`, `sum`, `min`, `max`), the regex functions (`find`, `findAll` without a limit)
/// and cel-go's `sets` extension (`sets.contains`, `sets.equivalent`, `sets.intersects`).
fn context(env: &Arc<Env>) -> Context<'static, 'static> {
    let mut ctx = Context::with_env(Arc::clone(env));
    // The names are not the crate's: the registrations cannot conflict.
    let _ = ctx.add_function("isSorted", |This(l): This<Arc<Vec<Cel>>>| -> Result<bool, ExecutionError> {
        for w in l.windows(2) {
            match w[0].partial_cmp(&w[1]) {
                Some(std::cmp::Ordering::Greater) => return Ok(false),
                Some(_) => {}
                None => return Err(ExecutionError::ValuesNotComparable(w[0].clone(), w[1].clone())),
            }
        }
        Ok(true)
    });
    let _ = ctx.add_function("sum", |This(l): This<Arc<Vec<Cel>>>| -> Result<Cel, ExecutionError> {
        let mut acc = Cel::Int(0);
        for (i, v) in l.iter().enumerate() {
            acc = match (acc, v) {
                (Cel::Int(a), Cel::Int(b)) => Cel::Int(
                    a.checked_add(*b).ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
                ),
                (Cel::Int(_), Cel::Float(b)) if i == 0 => Cel::Float(*b),
                (Cel::Float(a), Cel::Float(b)) => Cel::Float(a + b),
                (Cel::Int(_), Cel::UInt(b)) if i == 0 => Cel::UInt(*b),
                (Cel::UInt(a), Cel::UInt(b)) => Cel::UInt(
                    a.checked_add(*b).ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
                ),
                (_, other) => return Err(ExecutionError::no_such_overload("sum", vec![other.type_of().to_string()])),
            };
        }
        Ok(acc)
    });
    fn extreme(l: &[Cel], name: &str, keep: std::cmp::Ordering) -> Result<Cel, ExecutionError> {
        let mut best = l.first().ok_or_else(|| ExecutionError::function_error(name, "list is empty"))?;
        for v in &l[1..] {
            match v.partial_cmp(best) {
                Some(o) if o == keep => best = v,
                Some(_) => {}
                None => return Err(ExecutionError::ValuesNotComparable(v.clone(), best.clone())),
            }
        }
        Ok(best.clone())
    }
    let _ = ctx.add_function("min", |This(l): This<Arc<Vec<Cel>>>| extreme(&l, "min", std::cmp::Ordering::Less));
    let _ = ctx.add_function("max", |This(l): This<Arc<Vec<Cel>>>| extreme(&l, "max", std::cmp::Ordering::Greater));
    let _ = ctx.add_function("sets.contains", |a: Arc<Vec<Cel>>, b: Arc<Vec<Cel>>| b.iter().all(|x| a.contains(x)));
    let _ = ctx.add_function("sets.equivalent", |a: Arc<Vec<Cel>>, b: Arc<Vec<Cel>>| {
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x))
    });
    let _ = ctx.add_function("sets.intersects", |a: Arc<Vec<Cel>>, b: Arc<Vec<Cel>>| b.iter().any(|x| a.contains(x)));
    let _ = ctx.add_function("find", |This(s): This<Arc<String>>, re: Arc<String>| -> Result<Cel, ExecutionError> {
        let re = regex::Regex::new(&re).map_err(|e| ExecutionError::function_error("find", e))?;
        Ok(Cel::String(Arc::new(re.find(&s).map_or_else(String::new, |m| m.as_str().to_string()))))
    });
    let _ = ctx.add_function("findAll", |This(s): This<Arc<String>>, re: Arc<String>| -> Result<Cel, ExecutionError> {
        let re = regex::Regex::new(&re).map_err(|e| ExecutionError::function_error("findAll", e))?;
        Ok(Cel::List(Arc::new(re.find_iter(&s).map(|m| Cel::String(Arc::new(m.as_str().to_string()))).collect())))
    });
    ctx
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// The path as upstream's `field.Path` prints it: `<nil>` for the root.
fn shown_path(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}

struct Walker {
    env: Arc<Env>,
}

impl Walker {
    /// Checks the rules at this node, then its children. `resource` marks the root or an
    /// embedded resource; `parent_unchanged` is whether the nearest correlated ancestor equals
    /// its old value (for ratcheting).
    #[allow(clippy::too_many_arguments)]
    fn node(
        &self,
        v: &Value,
        old: Option<&Value>,
        schema: &Value,
        path: &str,
        resource: bool,
        parent_unchanged: bool,
        errs: &mut Vec<FieldError>,
    ) {
        if v.is_null() || !schema.is_object() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        let unchanged = match old {
            Some(o) => o == v,
            None => parent_unchanged,
        };
        self.rules(v, old, schema, path, resource, unchanged, errs);
        for sub in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            self.node(v, old, sub, path, resource, parent_unchanged, errs);
        }
        match v {
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else { return };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| correlated_item(schema, item, o));
                    let p = format!("{path}[{i}]");
                    self.node(
                        item,
                        old_item,
                        item_schema,
                        &p,
                        flag(item_schema, "x-kubernetes-embedded-resource"),
                        unchanged,
                        errs,
                    );
                }
            }
            Value::Object(o) => {
                let old_map = old.and_then(Value::as_object);
                if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    for (k, item) in o {
                        let p = format!("{path}[{k}]");
                        let embedded = flag(extra, "x-kubernetes-embedded-resource");
                        self.node(item, old_map.and_then(|m| m.get(k)), extra, &p, embedded, unchanged, errs);
                    }
                }
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (k, item) in o {
                        let Some(sub) = props.get(k) else { continue };
                        let embedded = flag(sub, "x-kubernetes-embedded-resource");
                        self.node(
                            item,
                            old_map.and_then(|m| m.get(k)),
                            sub,
                            &child(path, k),
                            embedded,
                            unchanged,
                            errs,
                        );
                    }
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rules(
        &self,
        v: &Value,
        old: Option<&Value>,
        schema: &Value,
        path: &str,
        resource: bool,
        unchanged: bool,
        errs: &mut Vec<FieldError>,
    ) {
        let Some(rules) = schema.get("x-kubernetes-validations").and_then(Value::as_array) else { return };
        if rules.is_empty() {
            return;
        }
        let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
        let type_invalid = |detail: String| FieldError::invalid(shown_path(path), ty, detail);
        let this = to_cel(v, Some(schema), resource);
        let before = old.map(|o| to_cel(o, Some(schema), resource));
        let mut ctx = context(&self.env);
        ctx.add_variable_from_value("self", this);
        if let Some(b) = before {
            ctx.add_variable_from_value("oldSelf", b);
        }
        for rule in rules {
            let src = rule.get("rule").and_then(Value::as_str).unwrap_or("");
            if src.trim().is_empty() {
                continue;
            }
            let program = match self.env.compile(src) {
                Ok(p) => p,
                Err(e) => {
                    errs.push(type_invalid(format!("rule compile error: {e}")));
                    continue;
                }
            };
            let uses_old = program.references().has_variable("oldSelf");
            if uses_old && old.is_none() {
                continue;
            }
            match program.execute(&ctx) {
                Ok(Cel::Bool(true)) => continue,
                Ok(_) => {}
                Err(e) => {
                    let text = error_text(&e);
                    let detail = if text.starts_with("no such overload") {
                        format!(
                            "'{text}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule_error_string(rule)
                        )
                    } else {
                        format!("{text} evaluating rule: {}", rule_error_string(rule))
                    };
                    errs.push(type_invalid(detail));
                    continue;
                }
            }
            if !uses_old && unchanged {
                // Ratcheted: upstream turns it into a warning.
                continue;
            }
            let detail = rule
                .get("messageExpression")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .and_then(|m| self.message(m, &ctx))
                .unwrap_or_else(|| rule_message_or_default(rule));
            let mut at = path.to_string();
            if let Some(fp) = rule.get("fieldPath").and_then(Value::as_str).filter(|f| !f.is_empty()) {
                if let Some(rel) = normalized_field_path(fp, schema) {
                    at = child(path, &rel);
                }
            }
            let object = matches!(ty, "object" | "array");
            let reason = rule.get("reason").and_then(Value::as_str).unwrap_or("FieldValueInvalid");
            let at = shown_path(&at);
            let err = match reason {
                "FieldValueForbidden" => FieldError::forbidden(at, detail),
                "FieldValueRequired" => FieldError::required(at, detail),
                "FieldValueDuplicate" => {
                    let kind = match v {
                        _ if object => FieldErrorKind::DuplicateNoValue,
                        Value::String(s) => FieldErrorKind::Duplicate(s.clone()),
                        other => FieldErrorKind::DuplicateValue(go_value(other)),
                    };
                    FieldError { path: at, kind, detail: String::new() }
                }
                _ => {
                    let kind = match v {
                        _ if object => FieldErrorKind::InvalidNoValue,
                        Value::String(s) => FieldErrorKind::Invalid(s.clone()),
                        other => FieldErrorKind::InvalidValue(go_value(other)),
                    };
                    FieldError { path: at, kind, detail }
                }
            };
            errs.push(err);
        }
    }

    /// A `messageExpression`'s text, or None when it fails or gives no usable string (upstream
    /// then falls back to the message).
    fn message(&self, src: &str, ctx: &Context) -> Option<String> {
        let program: Program = self.env.compile(src).ok()?;
        match program.execute(ctx) {
            Ok(Cel::String(s)) => {
                let t = s.trim();
                (!t.is_empty() && !t.contains('\n') && t.len() <= 5 * 1024).then(|| t.to_string())
            }
            _ => None,
        }
    }
}

/// cel-go's wording of the common evaluation errors (`no such key: x`), the crate's otherwise.
fn error_text(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(o) => format!("no such overload: {o}"),
        other => other.to_string(),
    }
}

fn rule_error_string(rule: &Value) -> String {
    match rule.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(m) => m.trim().to_string(),
        None => rule.get("rule").and_then(Value::as_str).unwrap_or("").trim().to_string(),
    }
}

fn rule_message_or_default(rule: &Value) -> String {
    match rule.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(m) => m.trim().to_string(),
        None => format!("failed rule: {}", rule_error_string(rule)),
    }
}

/// A scalar as Go's `%v` prints an int64, float64 or bool (floats as `%g`: `1e+06`).
fn go_value(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or(0.0)),
        other => other.to_string(),
    }
}

fn go_float(f: f64) -> String {
    if !f.is_finite() || f == 0.0 {
        return format!("{f}");
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// The old item an item of a `x-kubernetes-list-type: map` list correlates with: the one with
/// the same values for the list's map keys. Other lists do not correlate.
fn correlated_item<'a>(schema: &Value, item: &Value, old: &'a [Value]) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if keys.is_empty() {
        return None;
    }
    old.iter().find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
}

/// A rule's `fieldPath` (`.a.b`, `['x-y']`) as the path it appends (`a.b`, `x-y`; a key of a
/// map `[k]`), or None when it does not name a field of the schema.
fn normalized_field_path(fp: &str, schema: &Value) -> Option<String> {
    let mut out = String::new();
    let mut schema = schema;
    let mut rest = fp;
    while !rest.is_empty() {
        let name;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            name = r[..end].to_string();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let mut end = None;
            let bytes = r.as_bytes();
            for i in 0..bytes.len() {
                if bytes[i] == b'\'' && (i == 0 || bytes[i - 1] != b'\\') {
                    end = Some(i);
                    break;
                }
            }
            let end = end?;
            name = r[..end].replace("\\'", "'").replace("\\\\", "\\");
            rest = r[end + 1..].strip_prefix(']')?;
        } else {
            return None;
        }
        if name.is_empty() {
            return None;
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            schema = props.get(&name)?;
            out = child(&out, &name);
        } else if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            schema = extra;
            out = format!("{out}[{name}]");
        } else {
            return None;
        }
    }
    Some(out)
}

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property name as CEL sees it (apiserver's `cel.Escape`), None when it cannot be reached.
pub fn escape(name: &str) -> Option<String> {
    let first = name.bytes().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')) {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
    }
    Some(out)
}

/// A JSON value as CEL sees it under `schema`.
fn to_cel(v: &Value, schema: Option<&Value>, resource: bool) -> Cel {
    let ty = schema.and_then(|s| s.get("type")).and_then(Value::as_str).unwrap_or("");
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            if ty == "number" {
                Cel::Float(n.as_f64().unwrap_or(0.0))
            } else if let Some(i) = n.as_i64() {
                Cel::Int(i)
            } else {
                Cel::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let sub = schema.and_then(|s| s.get("items"));
            let embedded = sub.is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
            Cel::List(Arc::new(items.iter().map(|i| to_cel(i, sub, embedded)).collect()))
        }
        Value::Object(o) => {
            let props = schema.and_then(|s| s.get("properties")).and_then(Value::as_object);
            let extra = schema.and_then(|s| s.get("additionalProperties")).filter(|a| a.is_object());
            let mut map: HashMap<Key, Cel> = HashMap::with_capacity(o.len());
            for (k, item) in o {
                if resource && k == "metadata" {
                    let meta: HashMap<Key, Cel> = item
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(mk, mv)| matches!(mk.as_str(), "name" | "generateName") && mv.is_string())
                        .map(|(mk, mv)| (Key::from(mk.clone()), to_cel(mv, None, false)))
                        .collect();
                    map.insert(Key::from("metadata".to_string()), Cel::Map(Map { map: Arc::new(meta) }));
                    continue;
                }
                let (name, sub) = match (props, extra) {
                    (Some(p), _) => match escape(k) {
                        Some(name) => (name, p.get(k).or(extra)),
                        None => continue,
                    },
                    (None, Some(e)) => (k.clone(), Some(e)),
                    (None, None) => (k.clone(), None),
                };
                let embedded = sub.is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
                map.insert(Key::from(name), to_cel(item, sub, embedded));
            }
            Cel::Map(Map { map: Arc::new(map) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The errors' texts; sibling fields come in key order (upstream's order is Go's map order).
    fn texts(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    /// The rules of the external-snapshotter's VolumeSnapshot CRD (v8.6.0).
    fn snapshot_schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["source"], "properties": {
            "source": {
                "type": "object",
                "properties": {
                    "persistentVolumeClaimName": {"type": "string", "x-kubernetes-validations": [
                        {"message": "persistentVolumeClaimName is immutable", "rule": "self == oldSelf"}]},
                    "volumeSnapshotContentName": {"type": "string", "x-kubernetes-validations": [
                        {"message": "volumeSnapshotContentName is immutable", "rule": "self == oldSelf"}]}
                },
                "x-kubernetes-validations": [
                    {"message": "persistentVolumeClaimName is required once set",
                     "rule": "!has(oldSelf.persistentVolumeClaimName) || has(self.persistentVolumeClaimName)"},
                    {"message": "volumeSnapshotContentName is required once set",
                     "rule": "!has(oldSelf.volumeSnapshotContentName) || has(self.volumeSnapshotContentName)"},
                    {"message": "exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set",
                     "rule": "(has(self.volumeSnapshotContentName) && !has(self.persistentVolumeClaimName)) || (!has(self.volumeSnapshotContentName) && has(self.persistentVolumeClaimName))"}
                ]
            },
            "volumeSnapshotClassName": {"type": "string", "x-kubernetes-validations": [
                {"message": "volumeSnapshotClassName must not be the empty string when set", "rule": "size(self) > 0"}]}
        }}}})
    }

    fn snapshot(spec: Value) -> Value {
        json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": "s", "namespace": "d"}, "spec": spec})
    }

    #[test]
    fn exactly_one_snapshot_source() {
        let schema = snapshot_schema();
        let exactly_one = "spec.source: Invalid value: exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set";
        let both = snapshot(json!({"source": {"persistentVolumeClaimName": "data", "volumeSnapshotContentName": "c"}}));
        let errs = validate(&both, None, &schema);
        assert_eq!(texts(&errs), [exactly_one]);
        assert_eq!(errs[0].reason(), "FieldValueInvalid");
        assert_eq!(texts(&validate(&snapshot(json!({"source": {}})), None, &schema)), [exactly_one]);
        assert!(validate(&snapshot(json!({"source": {"persistentVolumeClaimName": "data"}})), None, &schema).is_empty());
        assert!(validate(&snapshot(json!({"source": {"volumeSnapshotContentName": "c"}})), None, &schema).is_empty());
    }

    #[test]
    fn an_empty_class_name_is_refused_with_its_value() {
        let s = snapshot(json!({"source": {"persistentVolumeClaimName": "data"}, "volumeSnapshotClassName": ""}));
        assert_eq!(
            texts(&validate(&s, None, &snapshot_schema())),
            ["spec.volumeSnapshotClassName: Invalid value: \"\": volumeSnapshotClassName must not be the empty string when set"]
        );
        let named = snapshot(json!({"source": {"persistentVolumeClaimName": "data"}, "volumeSnapshotClassName": "c"}));
        assert!(validate(&named, None, &snapshot_schema()).is_empty());
    }

    #[test]
    fn transition_rules_run_on_update_only() {
        let schema = snapshot_schema();
        let old = snapshot(json!({"source": {"persistentVolumeClaimName": "data"}}));
        let changed = snapshot(json!({"source": {"persistentVolumeClaimName": "other"}}));
        assert_eq!(
            texts(&validate(&changed, Some(&old), &schema)),
            ["spec.source.persistentVolumeClaimName: Invalid value: \"other\": persistentVolumeClaimName is immutable"]
        );
        assert!(validate(&old, Some(&old), &schema).is_empty());
        // On create there is no oldSelf: the immutability rules are not evaluated.
        assert!(validate(&changed, None, &schema).is_empty());
        // Removing the source: the transition rule and the one-source rule, in their order.
        let removed = snapshot(json!({"source": {}}));
        assert_eq!(
            texts(&validate(&removed, Some(&old), &schema)),
            [
                "spec.source: Invalid value: persistentVolumeClaimName is required once set",
                "spec.source: Invalid value: exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set"
            ]
        );
    }

    #[test]
    fn an_unchanged_value_is_ratcheted() {
        // Stored before the rule existed: an update that leaves it alone passes.
        let schema = snapshot_schema();
        let both = snapshot(json!({"source": {"persistentVolumeClaimName": "data", "volumeSnapshotContentName": "c"}}));
        assert!(validate(&both, Some(&both), &schema).is_empty());
        let mut relabelled = both.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(validate(&relabelled, Some(&both), &schema).is_empty());
    }

    #[test]
    fn reserved_words_are_escaped() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ref": {"type": "object", "properties": {"namespace": {"type": "string"}, "name": {"type": "string"}, "api-group": {"type": "string"}},
                    "x-kubernetes-validations": [
                        {"rule": "has(self.__namespace__)", "message": "namespace is required"},
                        {"rule": "!has(self.__namespace__) || self.__namespace__ != 'kube-system'", "message": "not kube-system"},
                        {"rule": "!has(self.api__dash__group) || self.api__dash__group.endsWith('.io')", "message": "group"}]}
        }}}});
        let with = json!({"spec": {"ref": {"namespace": "d", "name": "n", "api-group": "x.io"}}});
        assert!(validate(&with, None, &schema).is_empty(), "{:?}", validate(&with, None, &schema));
        let without = json!({"spec": {"ref": {"name": "n", "api-group": "x"}}});
        assert_eq!(
            texts(&validate(&without, None, &schema)),
            ["spec.ref: Invalid value: namespace is required", "spec.ref: Invalid value: group"]
        );
        let system = json!({"spec": {"ref": {"namespace": "kube-system"}}});
        assert_eq!(texts(&validate(&system, None, &schema)), ["spec.ref: Invalid value: not kube-system"]);
        assert_eq!(escape("a__b.c/d"), Some("a__underscores__b__dot__c__slash__d".to_string()));
        assert_eq!(escape("1x"), None);
        assert_eq!(escape("a b"), None);
    }

    /// The rules of the conformance case `crd-cel-rules`.
    fn widget_schema() -> Value {
        json!({"type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')", "message": "name must start with w"}],
        "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max",
                 "messageExpression": "'min must not exceed max in mode ' + (has(self.mode) ? self.mode : 'unset')"},
                {"rule": "!has(self.mode) || self.mode != 'legacy' || has(self.legacyName)",
                 "message": "legacyName is required in legacy mode", "reason": "FieldValueRequired", "fieldPath": ".legacyName"}
            ],
            "properties": {
                "min": {"type": "integer"}, "max": {"type": "integer"}, "mode": {"type": "string"}, "legacyName": {"type": "string"},
                "replicas": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "replicas may not decrease"}]},
                "tags": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 10},
                         "x-kubernetes-validations": [{"rule": "self.all(t, t.startsWith('x-'))", "message": "every tag must start with x-", "reason": "FieldValueForbidden"}]}
            }}}})
    }

    fn widget(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "crd-cel-rules.example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "d"}, "spec": spec})
    }

    #[test]
    fn widget_rules_answer_as_kube_apiserver() {
        let schema = widget_schema();
        let ok = widget(
            "w1",
            json!({"min": 1, "max": 2, "mode": "legacy", "legacyName": "old", "replicas": 3, "tags": ["x-a"]}),
        );
        assert!(validate(&ok, None, &schema).is_empty(), "{:?}", validate(&ok, None, &schema));
        let root = validate(&widget("bad-name", json!({"min": 1, "max": 2})), None, &schema);
        assert_eq!(texts(&root), ["<nil>: Invalid value: name must start with w"]);
        assert_eq!(root[0].path, "<nil>");
        assert_eq!(
            texts(&validate(&widget("w2", json!({"min": 5, "max": 2})), None, &schema)),
            ["spec: Invalid value: min must not exceed max in mode unset"]
        );
        let legacy = validate(&widget("w2", json!({"min": 1, "max": 2, "mode": "legacy"})), None, &schema);
        assert_eq!(texts(&legacy), ["spec.legacyName: Required value: legacyName is required in legacy mode"]);
        assert_eq!(legacy[0].reason(), "FieldValueRequired");
        let tags = validate(&widget("w2", json!({"min": 1, "max": 2, "tags": ["x-a", "b"]})), None, &schema);
        assert_eq!(texts(&tags), ["spec.tags: Forbidden: every tag must start with x-"]);
        assert_eq!(tags[0].reason(), "FieldValueForbidden");
        // A transition rule on an integer: the value printed bare.
        let mut fewer = ok.clone();
        fewer["spec"]["replicas"] = json!(2);
        assert_eq!(
            texts(&validate(&fewer, Some(&ok), &schema)),
            ["spec.replicas: Invalid value: 2: replicas may not decrease"]
        );
        let mut more = ok.clone();
        more["spec"]["replicas"] = json!(4);
        assert!(validate(&more, Some(&ok), &schema).is_empty());
    }

    #[test]
    fn a_rule_without_message_names_itself() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": "size(self) > 0"}]},
            "count": {"type": "integer", "x-kubernetes-validations": [{"rule": "self % 2 == 0"}]}
        }}}});
        assert_eq!(
            texts(&validate(&json!({"spec": {"items": [], "count": 3}}), None, &schema)),
            [
                "spec.count: Invalid value: 3: failed rule: self % 2 == 0",
                "spec.items: Invalid value: failed rule: size(self) > 0"
            ]
        );
        assert!(validate(&json!({"spec": {"items": ["a"], "count": 4}}), None, &schema).is_empty());
    }

    #[test]
    fn message_expression_falls_back_to_message() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.n < 10", "message": "too big", "messageExpression": "'n is ' + string(self.n) + ', at most 9'"},
            {"rule": "self.n < 5", "message": "over four", "messageExpression": "''"},
            {"rule": "self.n < 3", "message": "over two", "messageExpression": "self.missing"}
        ]}}});
        assert_eq!(
            texts(&validate(&json!({"spec": {"n": 12}}), None, &schema)),
            [
                "spec: Invalid value: n is 12, at most 9",
                "spec: Invalid value: over four",
                "spec: Invalid value: over two"
            ]
        );
    }

    #[test]
    fn items_and_map_values_have_their_paths() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                                "x-kubernetes-validations": [{"rule": "self.port > 0", "message": "positive"},
                                                             {"rule": "self.port == oldSelf.port", "message": "fixed"}]}},
            "labels": {"type": "object", "additionalProperties": {"type": "string",
                       "x-kubernetes-validations": [{"rule": "self.size() <= 3", "message": "short"}]}}
        }}}});
        let old = json!({"spec": {"ports": [{"name": "a", "port": 1}]}});
        let new =
            json!({"spec": {"ports": [{"name": "b", "port": 0}, {"name": "a", "port": 2}], "labels": {"k": "long"}}});
        assert_eq!(
            texts(&validate(&new, Some(&old), &schema)),
            [
                "spec.labels[k]: Invalid value: \"long\": short",
                "spec.ports[0]: Invalid value: positive",
                "spec.ports[1]: Invalid value: fixed"
            ]
        );
    }

    #[test]
    fn library_functions_are_available() {
        let env = Arc::new(environment());
        for src in [
            "'abc'.charAt(1) == 'b' && 'AB'.lowerAscii() == 'ab' && ' a '.trim() == 'a' && 'a,b'.split(',') == ['a', 'b']",
            "'abc'.matches('^a') && 'abc'.startsWith('a') && 'abc'.endsWith('c') && 'abc'.contains('b')",
            "'%d items'.format([2]) == '2 items' && ['a', 'b'].join('-') == 'a-b' && 'abc'.indexOf('c') == 2",
            "[2, 1].sort() == [1, 2] && [1, 1].distinct() == [1] && math.greatest(1, 2) == 2 && 1 < 1.5",
            "[1, 2].isSorted() && ![2, 1].isSorted() && [1, 2, 3].sum() == 6 && [1.5].sum() == 1.5 && [].sum() == 0",
            "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
            "sets.contains([1, 2], [1]) && !sets.equivalent([1], [1, 2]) && sets.intersects([1], [1, 2])",
            "'abc 123 45'.find('[0-9]+') == '123' && 'abc 123 45'.findAll('[0-9]+') == ['123', '45'] && 'x'.find('y') == ''",
            "optional.of(1).hasValue() && {'a': 1}[?'a'].orValue(0) == 1",
        ] {
            let got = env.compile(src).map(|p| p.execute(&context(&env)));
            assert!(matches!(got, Ok(Ok(Cel::Bool(true)))), "{src}: {got:?}");
        }
        for src in [
            "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
            "url('https://x').getHost() == 'x'",
            "[].min() == 0",
            "duration('1s') < duration('2s')",
        ] {
            let got = env.compile(src).map(|p| p.execute(&context(&env)));
            assert!(matches!(got, Ok(Err(_))), "{src}: {got:?}");
        }
    }

    #[test]
    fn a_float_is_printed_as_go_does() {
        assert_eq!(go_float(1234567.5), "1.2345675e+06");
        assert_eq!(go_float(2.5), "2.5");
        assert_eq!(go_float(0.00001), "1e-05");
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "x": {"type": "number", "x-kubernetes-validations": [{"rule": "self < 1.0"}]}}}}});
        assert_eq!(
            texts(&validate(&json!({"spec": {"x": 2.5}}), None, &schema)),
            ["spec.x: Invalid value: 2.5: failed rule: self < 1.0"]
        );
    }

    #[test]
    fn an_absent_field_is_an_evaluation_error() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.a == 'x'"}]}}});
        assert_eq!(
            texts(&validate(&json!({"spec": {}}), None, &schema)),
            ["spec: Invalid value: \"object\": no such key: a evaluating rule: self.a == 'x'"]
        );
    }
}
