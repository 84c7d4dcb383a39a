//! Scenario fixtures: objects in, expected objects, events and directories out.
//!
//! A fixture is one YAML file (see `tests/scenarios/README.md`). Expected objects are matched by
//! kind, namespace and name, and must be a *subset* of the actual object (`null` means "absent").
//! Events are matched the same way; unless `otherEvents: true`, no other event may be emitted.
//! `${ROOT}` in the input, in expected objects and in expected events stands for the host-path
//! root of the run.

use crate::input::load_documents;
use crate::output::OutputList;
use crate::{Simulation, SimulationOptions};
use pv_store::FaultSpec;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// One fixture.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// What is simulated, as a sentence.
    pub name: String,
    /// Longer explanation (optional).
    #[serde(default)]
    pub description: String,
    /// Files and directories to create under the host-path root before the run.
    #[serde(default)]
    pub setup: Setup,
    /// Input objects.
    pub input: Vec<Value>,
    /// Expectations.
    pub expect: Expect,
    /// Resync rounds to run at least (default: until one changes nothing), e.g. to watch the
    /// events of a stuck claim repeat.
    #[serde(default)]
    pub resyncs: usize,
    /// Skip the fault-injection rerun (for scenarios whose outcome depends on a plugin failure
    /// count, say).
    #[serde(default)]
    pub no_faults: bool,
    /// The controller's detailed event texts (`simulate`'s default, true); false gives upstream's
    /// texts exactly, as `run` by default.
    #[serde(default = "yes")]
    pub detailed_events: bool,
    /// Sync queued claims before queued volumes ([`SimulationOptions::claims_first`]).
    #[serde(default)]
    pub claims_first: bool,
    /// Objects the controller's watches never deliver (`{kind, namespace?, name}`): in the API
    /// server, missing from its cache ([`SimulationOptions::hidden_from_cache`]).
    #[serde(default)]
    pub hidden_from_cache: Vec<Value>,
}

fn yes() -> bool {
    true
}

impl Scenario {
    /// Applies the fixture's settings (`resyncs`, `detailedEvents`, `claimsFirst`) to `opts`.
    pub fn apply_options(&self, opts: &mut SimulationOptions) {
        opts.min_rounds = opts.min_rounds.max(self.resyncs);
        opts.config.detailed_events = self.detailed_events;
        opts.claims_first = self.claims_first;
        opts.hidden_from_cache = self.hidden_from_cache.iter().map(hidden_key).collect();
    }

    /// The default options with the fixture's settings.
    pub fn options(&self) -> SimulationOptions {
        let mut opts = SimulationOptions::default();
        self.apply_options(&mut opts);
        opts
    }
}

/// `{kind, namespace?, name}` as the watched resource and key.
fn hidden_key(v: &Value) -> (String, pv_model::ObjectKey) {
    let field = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or("");
    (format!("{}s", field("kind").to_lowercase()), pv_model::ObjectKey::new(field("namespace"), field("name")))
}

/// Host-path setup.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Directories (relative to the root) to create.
    #[serde(default)]
    pub dirs: Vec<String>,
    /// Files (relative to the root) to create with some content.
    #[serde(default)]
    pub files: Vec<String>,
}

/// Expected outcome.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// Objects that must exist, as subsets.
    #[serde(default)]
    pub objects: Vec<Value>,
    /// Objects that must not exist: `{kind, name, namespace?}`.
    #[serde(default)]
    pub absent: Vec<Value>,
    /// Events that must have been emitted, as subsets.
    #[serde(default)]
    pub events: Vec<Value>,
    /// Allow events beyond those listed.
    #[serde(default)]
    pub other_events: bool,
    /// Number of objects per kind, e.g. `{PersistentVolume: 2}`.
    #[serde(default)]
    pub counts: std::collections::BTreeMap<String, usize>,
    /// Paths (relative to the root) that must exist.
    #[serde(default)]
    pub dirs_exist: Vec<String>,
    /// Paths that must not exist.
    #[serde(default)]
    pub dirs_absent: Vec<String>,
    /// Directories that must exist and be empty.
    #[serde(default)]
    pub dirs_empty: Vec<String>,
    /// The simulation must fail to load with an error containing this text.
    #[serde(default)]
    pub error: Option<String>,
}

/// True when `expected` is a subset of `actual` (`null` = absent).
pub fn subset(expected: &Value, actual: Option<&Value>) -> bool {
    match (expected, actual) {
        (Value::Null, None) | (Value::Null, Some(Value::Null)) => true,
        (Value::Null, Some(_)) => false,
        (_, None) => false,
        (Value::Object(e), Some(Value::Object(a))) => e.iter().all(|(k, v)| subset(v, a.get(k))),
        (Value::Array(e), Some(Value::Array(a))) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| subset(x, Some(y)))
        }
        (e, Some(a)) => e == a,
    }
}

fn ident(v: &Value) -> (String, String, String) {
    let s = |p: &Value| p.as_str().unwrap_or("").to_string();
    let name = if v["metadata"].is_object() { s(&v["metadata"]["name"]) } else { s(&v["name"]) };
    let ns = if v["metadata"].is_object() { s(&v["metadata"]["namespace"]) } else { s(&v["namespace"]) };
    (s(&v["kind"]), ns, name)
}

/// What a run produced.
pub struct Outcome {
    /// The output List's items (objects, then events).
    pub items: Vec<Value>,
    /// Write faults injected during the run: conflict, error, timeout, lost-response.
    pub faults: [u64; 4],
    /// Where the controller's caches disagree with the API server's objects at the end.
    pub cache_errors: Vec<String>,
}

impl Outcome {
    /// Objects without events.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.items.iter().filter(|i| i["kind"] != "Event")
    }
    /// Events.
    pub fn events(&self) -> impl Iterator<Item = &Value> {
        self.items.iter().filter(|i| i["kind"] == "Event")
    }
}

fn substitute(v: &Value, root: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("${ROOT}", root)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, root)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), substitute(x, root))).collect()),
        other => other.clone(),
    }
}

/// Every fixture file under the repository's `tests/scenarios/` (`.yaml` only), sorted; an
/// error when the directory cannot be read or holds no fixture, so a suite never passes on
/// nothing.
pub fn fixture_files() -> Result<Vec<std::path::PathBuf>, String> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut v = Vec::new();
    for e in entries {
        let p = e.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if p.extension().is_some_and(|x| x == "yaml") {
            v.push(p);
        }
    }
    if v.is_empty() {
        return Err(format!("{}: no scenario fixture (*.yaml)", dir.display()));
    }
    v.sort();
    Ok(v)
}

/// The test name of a fixture: its file name without `.yaml`.
pub fn fixture_name(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Reads one fixture.
pub fn load_fixture(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: bad fixture: {e}", path.display()))
}

/// Prepares the host-path root and parses the input of a scenario.
pub fn prepare(s: &Scenario, root: &Path) -> Result<Vec<crate::InputObject>, String> {
    for d in &s.setup.dirs {
        std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
    }
    for f in &s.setup.files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&p, "data").map_err(|e| e.to_string())?;
    }
    let root_s = std::fs::canonicalize(root).map_err(|e| e.to_string())?.to_string_lossy().into_owned();
    let input: Vec<Value> = s.input.iter().map(|v| substitute(v, &root_s)).collect();
    let text = serde_json::to_string(&Value::Array(input)).unwrap();
    load_documents(&text).map_err(|e| e.to_string())
}

/// Top-level names created by the fixture's setup (allowed to exist without a PV).
pub fn setup_names(s: &Scenario) -> std::collections::BTreeSet<String> {
    s.setup.dirs.iter().chain(s.setup.files.iter()).filter_map(|p| p.split('/').next().map(str::to_string)).collect()
}

/// The outcome of a finished simulation.
pub fn outcome(sim: &Simulation) -> Outcome {
    Outcome {
        items: OutputList::from_store(sim.store()).items().collect(),
        faults: sim.store().faults_injected(),
        cache_errors: crate::invariants::caches(sim.store(), sim.controller(), &sim.options().hidden_from_cache),
    }
}

/// Runs a scenario's input under `root`, with optional faults.
pub fn run(s: &Scenario, root: &Path, faults: Option<(FaultSpec, u64)>) -> Result<Outcome, String> {
    run_with(s, root, SimulationOptions { faults, ..Default::default() })
}

/// Runs a scenario's input under `root` with these options.
pub fn run_with(s: &Scenario, root: &Path, mut opts: SimulationOptions) -> Result<Outcome, String> {
    s.apply_options(&mut opts);
    let objects = prepare(s, root)?;
    let mut sim =
        Simulation::new(objects, pv_plugins::registry(Some(root.to_path_buf())), opts).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(sim.run()).map_err(|e| e.to_string())?;
    Ok(outcome(&sim))
}

/// Checks an outcome against the expectations; returns every mismatch.
pub fn check(s: &Scenario, out: &Outcome, root: &Path) -> Vec<String> {
    let root_s = std::fs::canonicalize(root).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let mut errs = out.cache_errors.clone();
    for e in &s.expect.objects {
        let e = substitute(e, &root_s);
        let id = ident(&e);
        match out.objects().find(|o| ident(o) == id) {
            None => errs.push(format!("missing object {id:?}")),
            Some(a) if !subset(&e, Some(a)) => errs.push(format!(
                "object {id:?} differs\n  expected (subset): {}\n  actual: {}",
                serde_json::to_string(&e).unwrap(),
                serde_json::to_string(a).unwrap()
            )),
            Some(_) => {}
        }
    }
    for a in &s.expect.absent {
        let id = ident(a);
        if out.objects().any(|o| ident(o) == id) {
            errs.push(format!("object {id:?} should not exist"));
        }
    }
    for (kind, n) in &s.expect.counts {
        let got = out.objects().filter(|o| o["kind"] == kind.as_str()).count();
        if got != *n {
            errs.push(format!("expected {n} {kind} objects, found {got}"));
        }
    }
    let events: Vec<&Value> = out.events().collect();
    let mut used = vec![false; events.len()];
    for e in &s.expect.events {
        let e = &substitute(e, &root_s);
        match events.iter().enumerate().find(|(i, a)| !used[*i] && subset(e, Some(a))) {
            Some((i, _)) => used[i] = true,
            None => errs.push(format!("missing event {}", serde_json::to_string(e).unwrap())),
        }
    }
    if !s.expect.other_events {
        for (i, a) in events.iter().enumerate() {
            if !used[i] {
                errs.push(format!(
                    "unexpected event {} {} on {} {}: {}",
                    a["type"].as_str().unwrap_or(""),
                    a["reason"].as_str().unwrap_or(""),
                    a["involvedObject"]["kind"].as_str().unwrap_or(""),
                    a["involvedObject"]["name"].as_str().unwrap_or(""),
                    a["message"].as_str().unwrap_or("")
                ));
            }
        }
    }
    for d in &s.expect.dirs_exist {
        if !root.join(d).exists() {
            errs.push(format!("{d} should exist under the host-path root"));
        }
    }
    for d in &s.expect.dirs_absent {
        if root.join(d).exists() {
            errs.push(format!("{d} should not exist under the host-path root"));
        }
    }
    for d in &s.expect.dirs_empty {
        match std::fs::read_dir(root.join(d)).map(|it| it.count()) {
            Ok(0) => {}
            Ok(_) => errs.push(format!("{d} should be empty")),
            Err(_) => errs.push(format!("{d} should exist (empty)")),
        }
    }
    errs
}

/// The converged objects with volatile fields removed, for comparing runs with and without faults.
pub fn normalized_objects(out: &Outcome) -> Vec<Value> {
    fn strip(v: &mut Value) {
        if let Some(m) = v.as_object_mut() {
            for k in
                ["resourceVersion", "creationTimestamp", "lastPhaseTransitionTime", "generation", "deletionTimestamp"]
            {
                m.remove(k);
            }
            for (_, x) in m.iter_mut() {
                strip(x);
            }
        } else if let Some(a) = v.as_array_mut() {
            a.iter_mut().for_each(strip);
        }
    }
    out.objects()
        .map(|o| {
            let mut o = o.clone();
            strip(&mut o);
            o
        })
        .collect()
}
