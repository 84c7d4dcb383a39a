//! The verbs: get, list, create, update, patch, delete, deletecollection (watch lives in
//! [`crate::watch`]).
//!
//! Each handler turns a request into one store call and the store's answer into the object,
//! List or Table kubectl expects. What kube-apiserver does around the storage call lives here
//! too: namespaces from the path, `generateName`, the check that a namespace exists before
//! anything is created in it, retrying a PATCH whose base changed underneath it, DeleteOptions
//! preconditions, `dryRun`, and the `events.k8s.io` conversion.

use crate::error::{ApiError, Result};
use crate::events;
use crate::patch::{self, PatchKind};
use crate::routes::Target;
use crate::select::{self, FieldSelector, LabelSelector, Selectors};
use crate::tables::{self, IncludeObject};
use crate::AppState;
use axum::http::StatusCode;
use pv_store::{validation, ListOptions, StoreError};
use rand::Rng;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Query parameters.
pub type Query = HashMap<String, String>;

/// A JSON answer with its status code.
pub type Reply = (StatusCode, Value);

/// How the client wants objects back.
#[derive(Clone, Copy, Debug)]
pub struct Format {
    /// Some: as a Table, with this row object.
    pub table: Option<IncludeObject>,
    /// Objects in protobuf (Tables are JSON only).
    pub protobuf: bool,
}

impl Format {
    /// From the Accept header and query.
    pub fn new(accept: &str, q: &Query) -> Self {
        let table =
            tables::wants_table(accept).then(|| IncludeObject::parse(q.get("includeObject").map(String::as_str)));
        let protobuf = table.is_none() && crate::protobuf::accepts(accept);
        Format { table, protobuf }
    }
}

/// The object as this endpoint serves it (converted for `events.k8s.io`).
pub fn out(t: &Target, obj: &Value) -> Value {
    if t.served.events_v1 {
        events::to_v1(obj)
    } else {
        obj.clone()
    }
}

fn into_store(t: &Target, obj: Value) -> Value {
    if t.served.events_v1 {
        events::from_v1(&obj)
    } else {
        obj
    }
}

fn ns_of(t: &Target) -> &str {
    t.namespace.as_deref().unwrap_or("")
}

fn name_of(t: &Target) -> Result<&str> {
    t.name.as_deref().ok_or(ApiError::MethodNotAllowed)
}

/// Which write a request makes: main resource or `status`.
fn status_write(t: &Target) -> Result<bool> {
    match t.subresource.as_deref() {
        None => Ok(false),
        Some("status") if t.served.rt.status_subresource => Ok(true),
        Some("finalize") if t.served.kind() == "Namespace" => Ok(false),
        Some(_) => Err(ApiError::NoRoute),
    }
}

/// Parses a request body (JSON, YAML or protobuf, as the content type says).
pub fn parse_object(t: &Target, content_type: &str, body: &[u8]) -> Result<Value> {
    if content_type.contains("protobuf") {
        return crate::protobuf::decode(t.served.kind(), body);
    }
    if content_type.contains("cbor") {
        return Err(ApiError::UnsupportedMediaType(content_type.into()));
    }
    let v: Value = if content_type.contains("yaml") {
        serde_norway::from_slice(body).map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the body of the request was in an unknown format: {e}")))?
    };
    if !v.is_object() {
        return Err(ApiError::BadRequest("the body of the request must be a JSON object".into()));
    }
    Ok(v)
}

fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| !v.is_empty())
}

/// Puts path namespace and name into the body, rejecting contradictions as kube-apiserver does.
fn pin_identity(t: &Target, obj: &mut Value) -> Result<()> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != t.served.kind() {
        return Err(ApiError::BadRequest(format!(
            "the kind in the body ({kind}) does not match the kind of the resource ({})",
            t.served.kind()
        )));
    }
    let meta = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
        .filter(|m| m.is_object())
        .ok_or_else(|| ApiError::BadRequest("metadata must be an object".into()))?;
    if let Some(ns) = &t.namespace {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(b) if !b.is_empty() && b != ns => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ))
            }
            _ => meta["namespace"] = json!(ns),
        }
    }
    if let Some(name) = &t.name {
        match meta.get("name").and_then(Value::as_str) {
            Some(b) if !b.is_empty() && b != name => {
                return Err(ApiError::BadRequest("the name of the object does not match the name on the URL".into()))
            }
            _ => meta["name"] = json!(name),
        }
    }
    Ok(())
}

fn check_namespace(st: &AppState, t: &Target) -> Result<()> {
    if let Some(ns) = t.namespace.as_deref().filter(|_| t.served.rt.namespaced) {
        if st.store.get("namespaces", "", ns).is_err() {
            return Err(ApiError::NamespaceNotFound(ns.into()));
        }
    }
    Ok(())
}

/// GET of one object.
pub fn get(st: &AppState, t: &Target, q: &Query, f: Format) -> Result<Reply> {
    status_write(t)?;
    let obj = st.store.get(t.served.plural(), ns_of(t), name_of(t)?)?;
    if let Some(inc) = f.table {
        let rv = select::field_value(&obj, "metadata.resourceVersion");
        let _ = q;
        return Ok((StatusCode::OK, tables::table(t.served.kind(), &[&obj], &rv, inc, None)));
    }
    Ok((StatusCode::OK, out(t, &obj)))
}

/// Selectors from the query.
pub fn selectors(q: &Query) -> Result<Selectors> {
    Ok(Selectors {
        labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?,
    })
}

/// The matching objects and the list's resourceVersion.
pub fn matching(st: &AppState, t: &Target, sel: &Selectors) -> Result<(Vec<Arc<Value>>, u64)> {
    let opts = ListOptions { namespace: t.namespace.clone() };
    let (items, rv) = st.store.list(t.served.plural(), &opts)?;
    Ok((items.into_iter().filter(|o| sel.matches(o)).collect(), rv))
}

/// LIST.
pub fn list(st: &AppState, t: &Target, q: &Query, f: Format) -> Result<Reply> {
    let sel = selectors(q)?;
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let page =
        st.pages.page(limit, q.get("continue").map(String::as_str), select::object_key, || matching(st, t, &sel))?;
    let (items, rv, cont, remaining) = (page.items, page.rv, page.next, page.remaining);
    let rv = rv.to_string();
    if let Some(inc) = f.table {
        let refs: Vec<&Value> = items.iter().map(|o| o.as_ref()).collect();
        let tbl = tables::table(t.served.kind(), &refs, &rv, inc, cont.as_deref());
        return Ok((StatusCode::OK, tbl));
    }
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
        meta["remainingItemCount"] = json!(remaining);
    }
    let items: Vec<Value> = items.iter().map(|o| out(t, o)).collect();
    Ok((
        StatusCode::OK,
        json!({"kind": format!("{}List", t.served.kind()), "apiVersion": t.served.api_version(),
               "metadata": meta, "items": items}),
    ))
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generated_name(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let suffix: String = (0..5).map(|_| NAME_CHARS[rng.gen_range(0..NAME_CHARS.len())] as char).collect();
    format!("{prefix}{suffix}")
}

/// POST.
pub fn create(st: &AppState, t: &Target, q: &Query, ct: &str, body: &[u8]) -> Result<Reply> {
    if t.name.is_some() {
        return Err(ApiError::MethodNotAllowed);
    }
    if t.served.rt.namespaced && t.namespace.is_none() {
        return Err(ApiError::NoRoute);
    }
    let mut obj = into_store(t, parse_object(t, ct, body)?);
    pin_identity(t, &mut obj)?;
    check_namespace(st, t)?;
    let prefix = select::field_value(&obj, "metadata.generateName");
    let named = !select::field_value(&obj, "metadata.name").is_empty();
    for _ in 0..8 {
        let mut attempt = obj.clone();
        if !named && !prefix.is_empty() {
            attempt["metadata"]["name"] = json!(generated_name(&prefix));
        }
        if dry_run(q) {
            validation::default(t.served.rt, &mut attempt);
            let errs = validation::validate(t.served.rt, &attempt);
            if !errs.is_empty() {
                return Err(StoreError::Invalid {
                    kind: t.served.kind().into(),
                    name: select::field_value(&attempt, "metadata.name"),
                    errors: errs,
                }
                .into());
            }
            return Ok((StatusCode::CREATED, out(t, &attempt)));
        }
        match st.store.create(t.served.plural(), attempt) {
            Ok(o) => return Ok((StatusCode::CREATED, out(t, &o))),
            Err(StoreError::AlreadyExists { .. }) if !named && !prefix.is_empty() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Store(StoreError::Internal("could not generate a unique name".into())))
}

/// PUT.
pub fn update(st: &AppState, t: &Target, q: &Query, ct: &str, body: &[u8]) -> Result<Reply> {
    name_of(t)?;
    let status = status_write(t)?;
    let mut obj = into_store(t, parse_object(t, ct, body)?);
    pin_identity(t, &mut obj)?;
    if dry_run(q) {
        st.store.get(t.served.plural(), ns_of(t), name_of(t)?)?;
        return Ok((StatusCode::OK, out(t, &obj)));
    }
    let o = st.store.update(t.served.plural(), obj, status)?;
    Ok((StatusCode::OK, out(t, &o)))
}

/// PATCH (merge, JSON, strategic, apply).
pub fn patch(st: &AppState, t: &Target, q: &Query, ct: &str, body: &[u8]) -> Result<Reply> {
    let name = name_of(t)?;
    let status = status_write(t)?;
    let kind = PatchKind::from_content_type(ct)?;
    let p = patch::parse_body(kind, body)?;
    for _ in 0..5 {
        let current = match st.store.get(t.served.plural(), ns_of(t), name) {
            Ok(c) => c,
            Err(StoreError::NotFound { .. }) if kind == PatchKind::Apply && !status => {
                // Server-side apply of an object that does not exist creates it.
                let mut obj = p.clone();
                pin_identity(t, &mut obj)?;
                let coll = Target { name: None, ..t.clone() };
                let bytes = serde_json::to_vec(&obj).unwrap_or_default();
                return create(st, &coll, q, "application/json", &bytes);
            }
            Err(e) => return Err(e.into()),
        };
        let current_rv = select::field_value(&current, "metadata.resourceVersion");
        let patched = patch::apply(kind, &out(t, &current), &p)?;
        if !patched.is_object() {
            return Err(ApiError::BadRequest("the patched object is not a JSON object".into()));
        }
        let mut obj = into_store(t, patched);
        pin_identity(t, &mut obj)?;
        let given_rv = select::field_value(&obj, "metadata.resourceVersion");
        let pinned = !given_rv.is_empty() && given_rv != current_rv;
        if given_rv.is_empty() {
            obj["metadata"]["resourceVersion"] = json!(current_rv);
        }
        if dry_run(q) {
            return Ok((StatusCode::OK, out(t, &obj)));
        }
        match st.store.update(t.served.plural(), obj, status) {
            Ok(o) => return Ok((StatusCode::OK, out(t, &o))),
            Err(StoreError::Conflict { .. }) if !pinned => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Store(StoreError::Conflict {
        resource: t.served.rt.qualified(),
        name: name.into(),
        message: "the object kept changing while the patch was applied; try again".into(),
    }))
}

/// Preconditions from the DeleteOptions body and the query.
fn preconditions(body: &[u8], q: &Query) -> Result<(Option<String>, Option<String>)> {
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))?
    };
    let pre = |f: &str| opts.pointer(&format!("/preconditions/{f}")).and_then(Value::as_str).map(str::to_string);
    Ok((pre("uid"), pre("resourceVersion").or_else(|| q.get("resourceVersion").cloned())))
}

/// DELETE of one object.
pub fn delete(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> Result<Reply> {
    let name = name_of(t)?;
    if t.subresource.is_some() {
        return Err(ApiError::MethodNotAllowed);
    }
    let (uid, rv) = preconditions(body, q)?;
    if dry_run(q) {
        let o = st.store.get(t.served.plural(), ns_of(t), name)?;
        return Ok((StatusCode::OK, out(t, &o)));
    }
    let o = st.store.delete(t.served.plural(), ns_of(t), name, uid.as_deref(), rv.as_deref())?;
    Ok((StatusCode::OK, out(t, &o)))
}

/// DELETE of a collection (with selectors).
pub fn delete_collection(st: &AppState, t: &Target, q: &Query) -> Result<Reply> {
    let sel = selectors(q)?;
    let (items, _) = matching(st, t, &sel)?;
    let mut deleted = Vec::new();
    for o in items {
        let ns = select::field_value(&o, "metadata.namespace");
        let name = select::field_value(&o, "metadata.name");
        match st.store.delete(t.served.plural(), &ns, &name, None, None) {
            Ok(d) => deleted.push(out(t, &d)),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let rv = st.store.resource_version().to_string();
    Ok((
        StatusCode::OK,
        json!({"kind": format!("{}List", t.served.kind()), "apiVersion": t.served.api_version(),
               "metadata": {"resourceVersion": rv}, "items": deleted}),
    ))
}
