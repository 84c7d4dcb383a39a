//! The verbs: get, list, create, update, patch, delete, deletecollection (watch lives in
//! [`crate::watch`]).
//!
//! Each handler turns a request into one store call and the store's answer into the object,
//! List or Table kubectl expects. What kube-apiserver does around the storage call lives here
//! too: namespaces from the path, `generateName`, the check that a namespace exists before
//! anything is created in it, retrying a PATCH whose base changed underneath it, DeleteOptions
//! (from the body, or the query when there is none), `dryRun` (the whole write checked and
//! answered, nothing stored), `fieldValidation`, and the `events.k8s.io` conversion. Every body
//! and every patched object goes through [`crate::decode`] into its typed form first.

use crate::decode::{self, FieldValidation};
use crate::error::{ApiError, Result};
use crate::events;
use crate::listing::{self, Render};
use crate::listopts;
use crate::patch::{self, PatchKind};
use crate::routes::Target;
use crate::select::{self, FieldSelector, LabelSelector, Selectors};
use crate::tables;
use crate::AppState;
use axum::http::StatusCode;
use pv_store::{FieldError, FieldErrorKind, ListOptions, Object, Pending, StoreError};
use serde_json::{json, Value};

// Where these lived before; the verbs use them from here too.
pub use crate::format::Format;
pub use crate::query::{flag, parse_query, Query};

/// A JSON answer with its status code.
pub type Reply = (StatusCode, Value);

/// A write's answer and the `Warning` header texts that go with it.
pub type Written = (Reply, Vec<String>);

/// An object as `PartialObjectMetadata` of `meta.k8s.io/<version>`.
pub fn partial_metadata(obj: &Value, version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"),
           "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

/// The definition of a custom resource's endpoint (None for a built-in one).
fn definition(st: &AppState, t: &Target) -> Option<std::sync::Arc<Value>> {
    t.served.custom().then(|| st.store.custom_definition(t.served.key())).flatten()
}

/// How this endpoint prints Table rows.
pub fn printer(st: &AppState, t: &Target) -> tables::Printer {
    match definition(st, t) {
        Some(def) => tables::Printer::custom(pv_store::custom::version_of(&def, t.served.version)),
        None => tables::Printer::kind(t.served.rt),
    }
}

/// The object as this endpoint serves it (converted for `events.k8s.io`).
pub fn out(t: &Target, obj: &Value) -> Value {
    if t.served.events_v1 {
        events::to_v1(obj)
    } else if t.served.custom() {
        // Stored at the definition's storage version, served at each of its versions with that
        // version's apiVersion, as kube-apiserver's `None` conversion gives it.
        let mut o = obj.clone();
        let served = t.served.api_version();
        if let Some(m) = o.as_object_mut().filter(|m| m.get("apiVersion").and_then(Value::as_str) != Some(&served)) {
            m.insert("apiVersion".into(), Value::String(served));
        }
        o
    } else {
        obj.clone()
    }
}

/// An error of an `events.k8s.io` endpoint, naming the resource as that group does
/// (`events.events.k8s.io "x" not found`) instead of the core events it is stored as.
pub fn events_v1_error(e: ApiError) -> ApiError {
    let rename = |r: String| if r == "events" { "events.events.k8s.io".to_string() } else { r };
    match e {
        ApiError::Store(StoreError::NotFound { resource, name }) => {
            ApiError::Store(StoreError::NotFound { resource: rename(resource), name })
        }
        ApiError::Store(StoreError::AlreadyExists { resource, name }) => {
            ApiError::Store(StoreError::AlreadyExists { resource: rename(resource), name })
        }
        ApiError::Store(StoreError::Conflict { resource, name, message }) => {
            ApiError::Store(StoreError::Conflict { resource: rename(resource), name, message })
        }
        e => e,
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

/// What a write takes from its query: `dryRun` and `fieldValidation`, checked as upstream
/// checks its Create/Update/PatchOptions (422 naming the options kind).
#[derive(Clone, Copy, Debug)]
struct WriteOptions {
    dry_run: bool,
    fields: FieldValidation,
}

fn options_invalid(options_kind: &str, error: FieldError) -> ApiError {
    ApiError::Store(StoreError::Invalid {
        kind: format!("{options_kind}.meta.k8s.io"),
        name: String::new(),
        errors: vec![error],
    })
}

/// `dryRun` values: only `All` is known.
fn dry_run_values(values: &[String], options_kind: &str) -> Result<bool> {
    if values.iter().any(|v| v != "All") {
        return Err(options_invalid(
            options_kind,
            FieldError {
                path: "dryRun".into(),
                kind: FieldErrorKind::NotSupportedValue(
                    serde_json::to_string(values).unwrap_or_default(),
                    vec!["All".into()],
                ),
                detail: String::new(),
            },
        ));
    }
    Ok(!values.is_empty())
}

fn write_options(q: &Query, options_kind: &str) -> Result<WriteOptions> {
    let dry: Vec<String> = q.get("dryRun").into_iter().cloned().collect();
    let dry_run = dry_run_values(&dry, options_kind)?;
    let given = q.get("fieldValidation").map_or("", String::as_str);
    let fields = FieldValidation::parse(given).ok_or_else(|| {
        options_invalid(
            options_kind,
            FieldError::not_supported("fieldValidation", given, &["", "Ignore", "Strict", "Warn"]),
        )
    })?;
    Ok(WriteOptions { dry_run, fields })
}

/// The schema name patches of this endpoint follow.
fn patch_schema(t: &Target) -> &'static str {
    if t.served.events_v1 {
        "events.k8s.io/Event"
    } else {
        t.served.kind()
    }
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
pub fn get(st: &AppState, t: &Target, q: &Query, f: Format) -> Result<Answer> {
    status_write(t)?;
    let rv = listopts::requested_version(q.get("resourceVersion").map_or("", String::as_str))?;
    listopts::check_not_too_large(&st.store, rv)?;
    let stored = st.store.get(t.served.key(), ns_of(t), name_of(t)?)?;
    if plain_json(t, f) {
        return Ok(Answer::Json(stored.text().as_bytes().to_vec()));
    }
    let obj = stored.value();
    if let Some(inc) = f.table {
        let rv = select::field_value(&obj, "metadata.resourceVersion");
        return Ok(Answer::Reply((StatusCode::OK, tables::table(&printer(st, t), &[&obj], &rv, inc, None))));
    }
    if let Some(v) = f.partial {
        return Ok(Answer::Reply((StatusCode::OK, partial_metadata(&obj, v))));
    }
    Ok(Answer::Reply((StatusCode::OK, out(t, &obj))))
}

/// True when the answer is the stored JSON as it is: no YAML, protobuf, Table or metadata-only
/// form asked for, and not the `events.k8s.io` form of an Event.
fn plain_json(t: &Target, f: Format) -> bool {
    !f.yaml && objects_as_stored(t, f)
}

/// True when objects go out as stored: no protobuf, Table or metadata-only form asked for, not
/// the `events.k8s.io` form of an Event (a watch streams JSON lines even to a YAML client), and
/// not a custom resource (served at each of its definition's versions, see [`out`]).
pub fn objects_as_stored(t: &Target, f: Format) -> bool {
    !f.protobuf && f.table.is_none() && f.partial.is_none() && !t.served.events_v1 && !t.served.custom()
}

/// Selectors from the query.
pub fn selectors(q: &Query) -> Result<Selectors> {
    Ok(Selectors {
        labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?,
    })
}

/// Selectors from the query, field labels checked against what the endpoint supports.
pub fn selectors_for(t: &Target, q: &Query) -> Result<Selectors> {
    let sel = selectors(q)?;
    Ok(Selectors { labels: sel.labels, fields: sel.fields.for_endpoint(&t.served)? })
}

/// The matching objects and the list's resourceVersion.
pub fn matching(st: &AppState, t: &Target, sel: &Selectors) -> Result<(Vec<Object>, u64)> {
    let opts = ListOptions { namespace: t.namespace.clone() };
    let (items, rv) = st.store.list(t.served.key(), &opts)?;
    if sel.is_empty() {
        return Ok((items, rv));
    }
    Ok((items.into_iter().filter(|o| sel.matches(&o.value())).collect(), rv))
}

/// LIST.
pub fn list(st: &AppState, t: &Target, q: &Query, f: Format) -> Result<Answer> {
    let opts = listopts::parse(q, false)?;
    let sel = selectors_for(t, q)?;
    let asked = listopts::requested_version(&opts.resource_version)?;
    listopts::check_not_too_large(&st.store, asked)?;
    let exact = asked.filter(|_| opts.rv_match == "Exact");
    if let Some(r) = exact {
        listopts::check_exact(&st.store, t.served.key(), t.namespace.as_deref(), r)?;
    }
    let page =
        st.pages.page(opts.limit, q.get("continue").map(String::as_str), Object::key, || matching(st, t, &sel))?;
    let (items, rv, cont, remaining) = (page.items, page.rv, page.next, page.remaining);
    let rv = exact.unwrap_or(rv).to_string();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = &cont {
        meta["continue"] = json!(c);
        meta["remainingItemCount"] = json!(remaining);
    }
    if let Some(inc) = f.table {
        let (printer, now) = (printer(st, t), jiff::Timestamp::now());
        let head = tables::table_head(&printer, &rv, cont.as_deref());
        let render: Render = Box::new(move |o| tables::row(&printer, &o.value(), inc, now));
        return listing::answer(head, "rows", items, Some(render), f).map(Answer::Body);
    }
    if let Some(v) = f.partial {
        let head = json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{v}"),
                          "metadata": meta});
        let render: Render = Box::new(move |o| partial_metadata(&o.value(), v));
        return listing::answer(head, "items", items, Some(render), f).map(Answer::Body);
    }
    if t.served.custom() {
        // A custom resource's list is unstructured: its items keep their type fields, its
        // metadata an empty `continue`, its kind the definition's `listKind`.
        let list_kind = definition(st, t)
            .and_then(|d| d.pointer("/spec/names/listKind").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| format!("{}List", t.served.kind()));
        if meta.get("continue").is_none() {
            meta["continue"] = json!("");
        }
        let head = json!({"apiVersion": t.served.api_version(), "kind": list_kind, "metadata": meta});
        let t = t.clone();
        let render: Render = Box::new(move |o| out(&t, &o.value()));
        return listing::answer(head, "items", items, Some(render), f).map(Answer::Body);
    }
    let head = json!({"kind": format!("{}List", t.served.kind()), "apiVersion": t.served.api_version(),
                      "metadata": meta});
    // Items carry no kind or apiVersion in a JSON list, as kube-apiserver lists them.
    let render: Option<Render> = if plain_json(t, f) {
        None
    } else {
        let t = t.clone();
        Some(Box::new(move |o| without_type_meta(out(&t, &o.value()))))
    };
    listing::answer(head, "items", items, render, f).map(Answer::Body)
}

/// A read's answer: a reply to encode as the client asked, or a JSON body already written.
pub enum Answer {
    /// Encoded like any other reply (YAML, protobuf, a Table, metadata only, `events.k8s.io`).
    Reply(Reply),
    /// Plain JSON, written from the stored text.
    Json(Vec<u8>),
    /// A whole answer, its body written as the client reads it (lists).
    Body(axum::response::Response),
}

fn without_type_meta(mut obj: Value) -> Value {
    if let Some(o) = obj.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    obj
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generated_name(prefix: &str) -> String {
    let suffix: String = (0..5).map(|_| NAME_CHARS[rand::random_range(0..NAME_CHARS.len())] as char).collect();
    format!("{prefix}{suffix}")
}

/// POST. The answer waits for what [`Pending`] says (the write's durability), which the caller
/// awaits.
pub fn create(st: &AppState, t: &Target, q: &Query, ct: &str, body: &[u8]) -> Result<(Written, Pending)> {
    if t.name.is_some() {
        return Err(ApiError::MethodNotAllowed);
    }
    if t.served.rt.namespaced && t.namespace.is_none() {
        // The all-namespaces collection lists and watches, but takes no creates.
        return Err(ApiError::MethodNotAllowed);
    }
    let opts = write_options(q, "CreateOptions")?;
    let def = definition(st, t);
    if def.as_ref().is_some_and(|d| d.pointer("/metadata/deletionTimestamp").is_some()) {
        let body: Value = serde_json::from_slice(body).unwrap_or_default();
        let name = select::field_value(&body, "metadata.name");
        return Err(ApiError::Store(StoreError::Forbidden {
            resource: t.served.rt.qualified(),
            name,
            message: "create not allowed while custom resource definition is terminating".into(),
        }));
    }
    let decoded = decode::decode(&t.served, def.as_deref(), ct, body, opts.fields)?;
    let mut obj = into_store(t, decoded.object);
    pin_identity(t, &mut obj)?;
    check_namespace(st, t)?;
    if let Some(d) = &def {
        crate::custom::check_rules(&t.served, d, &obj, None)?;
    }
    let prefix = select::field_value(&obj, "metadata.generateName");
    let named = !select::field_value(&obj, "metadata.name").is_empty();
    for _ in 0..8 {
        let mut attempt = obj.clone();
        if !named && !prefix.is_empty() {
            attempt["metadata"]["name"] = json!(generated_name(&prefix));
        }
        let result = if opts.dry_run {
            st.store.create_dry_run(t.served.key(), attempt).map(|o| (o, Pending::default()))
        } else {
            st.store.create_written(t.served.key(), attempt).map(pv_store::Written::split)
        };
        match result {
            Ok((o, pending)) => {
                let mut warnings = decoded.warnings;
                warnings.extend(pv_store::warnings(t.served.rt, None, &o));
                return Ok((((StatusCode::CREATED, out(t, &o)), warnings), pending));
            }
            Err(StoreError::AlreadyExists { .. }) if !named && !prefix.is_empty() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Store(StoreError::Internal("could not generate a unique name".into())))
}

/// PUT; the answer waits for what [`Pending`] says.
pub fn update(st: &AppState, t: &Target, q: &Query, ct: &str, body: &[u8]) -> Result<(Written, Pending)> {
    name_of(t)?;
    let status = status_write(t)?;
    let opts = write_options(q, "UpdateOptions")?;
    let def = definition(st, t);
    let decoded = decode::decode(&t.served, def.as_deref(), ct, body, opts.fields)?;
    let mut obj = into_store(t, decoded.object);
    pin_identity(t, &mut obj)?;
    // The stored object, for the warnings that depend on what an update changes.
    let old = st.store.get_latest(t.served.key(), ns_of(t), name_of(t)?).ok().map(|c| c.value());
    if let Some(d) = &def {
        crate::custom::check_rules(&t.served, d, &obj, old.as_ref())?;
    }
    let (o, pending) = if t.subresource.as_deref() == Some("finalize") {
        (st.store.finalize_namespace(obj, opts.dry_run)?, Pending::default())
    } else if opts.dry_run {
        (st.store.update_dry_run(t.served.key(), obj, status)?, Pending::default())
    } else {
        st.store.update_written(t.served.key(), obj, status)?.split()
    };
    let mut warnings = decoded.warnings;
    if !status {
        warnings.extend(pv_store::warnings(t.served.rt, old.as_ref(), &o));
    }
    Ok((((StatusCode::OK, out(t, &o)), warnings), pending))
}

/// PATCH (merge, JSON, strategic, apply); the answer waits for what [`Pending`] says.
pub fn patch(st: &AppState, t: &Target, q: &Query, ct: &str, body: &[u8]) -> Result<(Written, Pending)> {
    let name = name_of(t)?;
    let status = status_write(t)?;
    let kind = PatchKind::from_content_type(ct)?;
    let opts = write_options(q, "PatchOptions")?;
    if kind == PatchKind::Apply && q.get("fieldManager").is_none_or(|m| m.is_empty()) {
        return Err(options_invalid(
            "PatchOptions",
            FieldError::required("fieldManager", "is required for apply patch"),
        ));
    }
    if kind != PatchKind::Apply && q.contains_key("force") {
        return Err(options_invalid(
            "PatchOptions",
            FieldError {
                path: "force".into(),
                kind: FieldErrorKind::Forbidden,
                detail: "may not be specified for non-apply patch".into(),
            },
        ));
    }
    if t.served.custom() && kind == PatchKind::Strategic {
        // Custom resources have no patch strategies to merge by.
        return Err(ApiError::UnsupportedMediaType(
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
        ));
    }
    let def = definition(st, t);
    let p = patch::parse_body(kind, body)?;
    // As kube-apiserver's guaranteed update: a patch that does not pin a resourceVersion is
    // applied again to the latest object until it goes through. Each retry follows a write that
    // did go through, so the loop ends; the bound is only against a store that never settles.
    for _ in 0..PATCH_ATTEMPTS {
        let current = match st.store.get_latest(t.served.key(), ns_of(t), name) {
            Ok(c) => c.value(),
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
        let patched = patch::apply(kind, patch_schema(t), &out(t, &current), &p)?;
        if !patched.is_object() {
            return Err(ApiError::BadRequest("the patched object is not a JSON object".into()));
        }
        let decoded = decode::typed(&t.served, def.as_deref(), patched, opts.fields)?;
        let mut obj = into_store(t, decoded.object);
        pin_identity(t, &mut obj)?;
        if let Some(d) = &def {
            crate::custom::check_rules(&t.served, d, &obj, Some(&current))?;
        }
        let given_rv = select::field_value(&obj, "metadata.resourceVersion");
        let pinned = !given_rv.is_empty() && given_rv != current_rv;
        if given_rv.is_empty() {
            obj["metadata"]["resourceVersion"] = json!(current_rv);
        }
        let result = if opts.dry_run {
            st.store.update_dry_run(t.served.key(), obj, status).map(|o| (o, Pending::default()))
        } else {
            st.store.update_written(t.served.key(), obj, status).map(pv_store::Written::split)
        };
        match result {
            Ok((o, pending)) => {
                let mut warnings = decoded.warnings;
                if !status {
                    warnings.extend(pv_store::warnings(t.served.rt, Some(&current), &o));
                }
                return Ok((((StatusCode::OK, out(t, &o)), warnings), pending));
            }
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

/// How many times a patch is applied to a newer object before the server gives up with 409.
const PATCH_ATTEMPTS: usize = 1024;

/// The DeleteOptions a delete honours.
#[derive(Debug, Default)]
struct DeleteOptions {
    dry_run: bool,
    uid: Option<String>,
    resource_version: Option<String>,
}

/// DeleteOptions from the body, or from the query when there is no body, as kube-apiserver
/// reads them (kubectl sends `{"propagationPolicy": ..., "dryRun": ["All"]}` in the body).
fn delete_options(body: &[u8], q: &Query) -> Result<DeleteOptions> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    // Any body, even blank, is decoded as kube-apiserver does (`len(body) > 0`); only none
    // leaves the options to the query.
    let (dry, policy, pre, orphan) = if body.is_empty() {
        let dry: Vec<String> = q.get("dryRun").into_iter().cloned().collect();
        // A bare `resourceVersion` query is taken as a precondition, as before.
        let pre = meta::Preconditions { resource_version: q.get("resourceVersion").cloned(), uid: None };
        (dry, q.get("propagationPolicy").cloned(), pre, q.contains_key("orphanDependents"))
    } else {
        let mut v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the body of the request was in an unknown format: {e}")))?;
        if let Some(o) = v.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        let opts: meta::DeleteOptions = serde_path_to_error::deserialize(&v)
            .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {}: {}", e.path(), e.inner())))?;
        #[allow(deprecated)]
        let orphan = opts.orphan_dependents.is_some();
        (opts.dry_run.unwrap_or_default(), opts.propagation_policy, opts.preconditions.unwrap_or_default(), orphan)
    };
    if let Some(p) = policy.as_deref().filter(|_| orphan) {
        return Err(options_invalid(
            "DeleteOptions",
            FieldError {
                path: "propagationPolicy".into(),
                kind: FieldErrorKind::Invalid(p.into()),
                detail: "orphanDependents and deletionPropagation cannot be both set".into(),
            },
        ));
    }
    if let Some(p) = policy.filter(|p| !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")) {
        return Err(options_invalid(
            "DeleteOptions",
            FieldError::not_supported("propagationPolicy", p, &["Foreground", "Background", "Orphan", "nil"]),
        ));
    }
    Ok(DeleteOptions {
        dry_run: dry_run_values(&dry, "DeleteOptions")?,
        uid: pre.uid,
        resource_version: pre.resource_version,
    })
}

/// DELETE of one object; the answer waits for what [`Pending`] says.
pub fn delete(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> Result<(Reply, Pending)> {
    let name = name_of(t)?;
    if t.subresource.is_some() {
        return Err(ApiError::MethodNotAllowed);
    }
    let opts = delete_options(body, q)?;
    let (uid, rv) = (opts.uid.as_deref(), opts.resource_version.as_deref());
    let (o, pending) = if opts.dry_run {
        (st.store.delete_dry_run(t.served.key(), ns_of(t), name, uid, rv)?, Pending::default())
    } else {
        st.store.delete_written(t.served.key(), ns_of(t), name, uid, rv)?.split()
    };
    let gone = o.pointer("/metadata/deletionTimestamp").is_none() || o.pointer("/metadata/finalizers/0").is_none();
    if gone && (t.served.custom() || !pv_store::returns_deleted_object(t.served.rt)) {
        // Gone at once: for custom resources and the kinds that say so kube-apiserver answers
        // with a success Status naming what went (for the others, with the deleted object).
        return Ok(((StatusCode::OK, deleted_status(t, &o)), pending));
    }
    Ok(((StatusCode::OK, out(t, &o)), pending))
}

/// The `Status` of a delete that removed the object at once.
fn deleted_status(t: &Target, obj: &Value) -> Value {
    let mut details = json!({"name": select::field_value(obj, "metadata.name"), "kind": t.served.plural(),
                             "uid": select::field_value(obj, "metadata.uid")});
    if !t.served.group.is_empty() {
        details["group"] = json!(t.served.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// DELETE of a collection (with selectors). Namespaces have none, and a namespaced kind's
/// collection is deleted one namespace at a time: its all-namespaces path takes no DELETE, as in
/// kube-apiserver (405), so no single request empties every namespace.
pub fn delete_collection(st: &AppState, t: &Target, q: &Query, body: &[u8]) -> Result<Reply> {
    if t.served.kind() == "Namespace" || (t.served.rt.namespaced && t.namespace.is_none()) {
        return Err(ApiError::MethodNotAllowed);
    }
    let opts = delete_options(body, q)?;
    let sel = selectors_for(t, q)?;
    let (items, _) = matching(st, t, &sel)?;
    let mut deleted = Vec::new();
    for o in items {
        let (ns, name) = o.key();
        let result = if opts.dry_run {
            st.store.delete_dry_run(t.served.key(), &ns, &name, None, None)
        } else {
            st.store.delete(t.served.key(), &ns, &name, None, None)
        };
        match result {
            Ok(d) => deleted.push(out(t, &d)),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let rv = st.store.delivered_version().to_string();
    Ok((
        StatusCode::OK,
        json!({"kind": format!("{}List", t.served.kind()), "apiVersion": t.served.api_version(),
               "metadata": {"resourceVersion": rv}, "items": deleted}),
    ))
}
