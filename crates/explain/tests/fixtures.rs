//! Fixture tests for `explain`: every `tests/explain/*.yaml` at the workspace root holds a cluster
//! state with a claim `default/data`; next to it sit the expected JSON (`NAME.json`) and text
//! (`NAME.txt`). Run with `UPDATE_GOLDEN=1` to rewrite the golden files after a deliberate change,
//! then read the diff.
//!
//! Besides the goldens, every fixture checks the JSON shape and that `explain` agrees with the
//! controller actually running: for a pending claim, `bestMatch` is the volume `simulate` binds
//! the claim to, and no input volume is bound when `bestMatch` is null.

use pv_explain::{explain_snapshot, explain_snapshot_at, to_json, to_text, Next, PodVerdict, Snapshot};
use pv_model::helpers;
use pv_model::k8s::PersistentVolumeClaim;
use pv_model::VerdictKind;
use pv_sim::{load_documents, Simulation, SimulationOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every verdict name the README documents.
const VERDICTS: [&str; 11] = [
    "match",
    "accessModes",
    "capacity",
    "storageClass",
    "selector",
    "volumeMode",
    "volumeAttributesClass",
    "phase",
    "claimedByOther",
    "beingDeleted",
    "delayBinding",
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/explain")
}

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("tests/explain exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

/// A fixture's state, the objects read past the binder (CSIDriver, Lease, Event, ...) included.
fn snapshot(text: &str) -> Snapshot {
    let loaded = pv_sim::load(text).expect("fixture parses");
    let mut s = Snapshot::from_input(loaded.objects).expect("fixture loads");
    s.add_others(loaded.others).expect("fixture's other objects decode");
    s
}

/// The time fixtures are explained at (Lease and event ages are measured from it).
fn fixture_now() -> k8s_openapi::jiff::Timestamp {
    "2030-01-01T12:00:00Z".parse().unwrap()
}

/// Compares `actual` with the golden file, or rewrites it under `UPDATE_GOLDEN=1`.
fn golden(path: &Path, actual: &str) -> Result<(), String> {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, actual).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let expected =
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()))?;
    if expected != actual {
        return Err(format!("{} differs\n--- expected\n{expected}\n--- actual\n{actual}", path.display()));
    }
    Ok(())
}

#[test]
fn every_verdict_has_a_fixture() {
    let names: Vec<String> = fixtures().iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for v in VERDICTS {
        // `phase` is what the matching rules say of an unclaimed volume that is not Available;
        // the controller syncs such a volume to Available before it matches claims against it,
        // and explain shows it that way (unclaimed-volumes-become-available.yaml), so no
        // explanation of a whole state carries it.
        if v == "phase" {
            continue;
        }
        assert!(names.iter().any(|n| n == v), "no fixture {v}.yaml");
    }
}

#[test]
fn fixtures_match_their_golden_json_and_text() {
    let mut failures = Vec::new();
    for path in fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        let e = explain_snapshot_at(&snapshot(&text), "default", "data", fixture_now())
            .unwrap_or_else(|| panic!("{}: claim default/data missing", path.display()));
        let json = serde_json::to_string_pretty(&to_json(&e)).unwrap() + "\n";
        for (ext, actual) in [("json", json), ("txt", to_text(&e, false))] {
            if let Err(msg) = golden(&path.with_extension(ext), &actual) {
                failures.push(msg);
            }
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        // A fixture named after a verdict shows that verdict, with a detail, for some volume.
        if VERDICTS.contains(&stem.as_str())
            && !e.candidates.iter().any(|c| c.verdict.as_str() == stem && !c.detail.is_empty())
        {
            failures.push(format!("{stem}: no candidate with verdict {stem}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Checks one explanation document against the documented format (README, "Explaining a claim").
fn check_shape(v: &Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = o.keys().map(String::as_str).filter(|k| *k != "provisioner").collect();
    let mut want = vec![
        "bestMatch",
        "candidates",
        "claim",
        "hint",
        "message",
        "next",
        "phase",
        "reason",
        "steps",
        "summary",
        "volumeName",
    ];
    want.sort();
    if o.contains_key("provisioner")
        && !["wait-external-provisioner", "wait-first-consumer"].contains(&o["next"].as_str().unwrap_or(""))
    {
        return Err("provisioner without next=wait-external-provisioner or wait-first-consumer".into());
    }
    if !pv_explain::cluster::REASONS.contains(&o["reason"].as_str().unwrap_or("")) {
        return Err(format!("reason {:?} is not a documented code", o["reason"]));
    }
    if !(o["hint"].is_null() || o["hint"].is_string()) {
        return Err("hint is neither null nor a string".into());
    }
    if !o["steps"].as_array().is_some_and(|s| s.iter().all(Value::is_string)) {
        return Err("steps is not a list of strings".into());
    }
    let counted: u64 = o["summary"].as_object().ok_or("summary")?.values().filter_map(Value::as_u64).sum();
    if counted as usize != o["candidates"].as_array().map_or(0, Vec::len) {
        return Err("summary does not count every candidate".into());
    }
    let mut got = keys.clone();
    got.sort();
    if got != want {
        return Err(format!("keys {got:?}, want {want:?}"));
    }
    let s = |k: &str| o[k].as_str().ok_or(format!("{k} is not a string"));
    s("claim")?;
    s("message")?;
    if !["Pending", "Bound", "Lost"].contains(&s("phase")?) {
        return Err("phase".into());
    }
    let next = s("next")?;
    if !["bind", "provision", "wait-external-provisioner", "wait-first-consumer", "none"].contains(&next) {
        return Err(format!("next {next:?}"));
    }
    for k in ["bestMatch", "volumeName"] {
        if !(o[k].is_null() || o[k].is_string()) {
            return Err(format!("{k} is neither null nor a string"));
        }
    }
    for c in o["candidates"].as_array().ok_or("candidates")? {
        let c = c.as_object().ok_or("candidate")?;
        if c.len() != 3 || !c["volume"].is_string() || !c["detail"].is_string() {
            return Err(format!("candidate {c:?}"));
        }
        if !VERDICTS.contains(&c["verdict"].as_str().unwrap_or("")) {
            return Err(format!("verdict {:?}", c["verdict"]));
        }
    }
    if let Some(best) = o["bestMatch"].as_str() {
        let first = &o["candidates"][0];
        if first["volume"] != best || first["verdict"] != "match" {
            return Err("bestMatch is not the first candidate, matching".into());
        }
    }
    Ok(())
}

#[test]
fn json_output_has_the_documented_shape() {
    for path in fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        let e = explain_snapshot(&snapshot(&text), "default", "data").unwrap();
        if let Err(msg) = check_shape(&serde_json::to_value(to_json(&e)).unwrap()) {
            panic!("{}: {msg}", path.display());
        }
    }
}

/// Runs the whole controller on `text` and returns `default/data`'s `spec.volumeName`.
pub fn simulated_volume(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let registry = pv_plugins::registry(Some(dir.path().to_path_buf()));
    let objects = load_documents(text).unwrap();
    let mut sim = Simulation::new(objects, registry, SimulationOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(sim.run()).unwrap();
    let v = sim.store().get("persistentvolumeclaims", "default", "data").unwrap().value();
    let claim: PersistentVolumeClaim = serde_json::from_value(v).unwrap();
    helpers::claim_volume_name(&claim).to_string()
}

/// The consistency rule between `explain` and the running controller, for a pending claim.
pub fn check_consistent(text: &str) -> Result<(), String> {
    let snap = snapshot(text);
    let e = explain_snapshot(&snap, "default", "data").ok_or("claim missing")?;
    if e.phase != "Pending" || e.volume_name.is_some() {
        return Ok(());
    }
    // An unclaimed volume that is not Available is a state the controller's volume sync fixes
    // (it makes the volume Available) before the claim sync looks; explain shows the state as it
    // is, so such inputs are not settled enough to compare.
    if e.candidates.iter().any(|c| c.verdict == VerdictKind::Phase)
        && snap.volumes.iter().any(|v| helpers::claim_ref(v).is_none() && helpers::volume_phase(v) != "Available")
    {
        return Ok(());
    }
    let bound = simulated_volume(text);
    // The steps of the next sync name the volume the claim's volumeName is written with.
    let written = e.steps.iter().find_map(|s| s.strip_prefix("claim: spec.volumeName ")?.split(',').next());
    if written.is_some_and(|w| w != bound) {
        return Err(format!("explain's steps write volumeName {written:?}, the controller bound {bound:?}"));
    }
    // (Unless this sync first gives the claim the default class: the next one binds.)
    let default_class_first = e.steps.first().is_some_and(|s| s.starts_with("claim: spec.storageClassName "));
    if e.next == Next::Bind && written.is_none() && !default_class_first {
        return Err(format!("next=bind without a volumeName step: {:?}", e.steps));
    }
    let input_volumes: Vec<&str> = snap.volumes.iter().map(|v| helpers::name(&v.metadata)).collect();
    match &e.best_match {
        Some(best) if *best != bound => Err(format!("explain says {best}, the controller bound {bound:?}")),
        Some(_) if e.next != Next::Bind => Err("bestMatch without next=bind".into()),
        None if input_volumes.contains(&bound.as_str()) => {
            Err(format!("explain found no match, the controller bound {bound}"))
        }
        _ => Ok(()),
    }
}

#[test]
fn explain_best_match_is_what_the_controller_binds() {
    for path in fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(msg) = check_consistent(&text) {
            panic!("{}: {msg}", path.display());
        }
    }
}

mod random {
    //! Random cluster states: the claim `default/data` plus a few volumes and classes, written
    //! as JSON the way `simulate` reads it; `explain`'s answer must agree with the controller.
    use super::check_consistent;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    const MODES: [&str; 3] = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"];

    fn modes(bits: u8) -> Vec<&'static str> {
        (0..3).filter(|i| bits & (1 << i) != 0).map(|i| MODES[i]).collect()
    }

    /// (size Gi, mode bits, class, label, block, kind: 0 free, 1 Released, 2 pre-bound to data)
    type Vol = (i64, u8, &'static str, &'static str, bool, u8);

    fn volume(i: usize, (gi, bits, class, label, block, kind): Vol) -> Value {
        let mut spec = json!({
            "capacity": {"storage": format!("{gi}Gi")},
            "accessModes": modes(bits),
            "storageClassName": class,
            "persistentVolumeReclaimPolicy": "Retain",
            "volumeMode": if block { "Block" } else { "Filesystem" },
            "hostPath": {"path": format!("/tmp/pv-{i}")},
        });
        let phase = match kind {
            1 => {
                spec["claimRef"] = json!({"namespace": "default", "name": "gone", "uid": "uid-gone"});
                "Released"
            }
            2 => {
                spec["claimRef"] = json!({"namespace": "default", "name": "data"});
                "Available"
            }
            _ => "Available",
        };
        json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("pv-{i}"), "labels": {"tier": label}},
            "spec": spec, "status": {"phase": phase},
        })
    }

    fn state(
        vols: Vec<Vol>,
        gi: i64,
        bits: u8,
        class: Option<&'static str>,
        selector: bool,
        gold_default: bool,
    ) -> String {
        let mut items: Vec<Value> = vols.into_iter().enumerate().map(|(i, v)| volume(i, v)).collect();
        let mut gold = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "gold"}, "provisioner": "example.com/gold"});
        if gold_default {
            gold["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
        }
        items.push(gold);
        items.push(json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"}));
        let mut spec = json!({
            "accessModes": modes(bits),
            "resources": {"requests": {"storage": format!("{gi}Gi")}},
        });
        if let Some(c) = class {
            spec["storageClassName"] = json!(c);
        }
        if selector {
            spec["selector"] = json!({"matchLabels": {"tier": "a"}});
        }
        items.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default", "uid": "uid-data"},
            "spec": spec}));
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
    }

    fn arb_vol() -> impl Strategy<Value = Vol> {
        (
            1i64..8,
            1u8..8,
            prop_oneof![Just(""), Just("gold"), Just("local")],
            prop_oneof![Just("a"), Just("b")],
            proptest::bool::weighted(0.1),
            prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn explain_agrees_with_the_controller_on_random_states(
            vols in proptest::collection::vec(arb_vol(), 0..7),
            gi in 1i64..8,
            bits in 1u8..8,
            class in prop_oneof![Just(None), Just(Some("")), Just(Some("gold")), Just(Some("local"))],
            selector in proptest::bool::weighted(0.2),
            gold_default in proptest::bool::ANY,
        ) {
            let text = state(vols, gi, bits, class, selector, gold_default);
            if let Err(msg) = check_consistent(&text) {
                prop_assert!(false, "{msg}\ninput: {text}");
            }
        }
    }
}

mod pods {
    //! `explain pod` fixtures: every `tests/explain/pod/*.yaml` holds a cluster state with a pod
    //! `default/app`; the file's name up to `--` is the verdict the pod must get, and next to it
    //! sit the golden JSON and text (`UPDATE_GOLDEN=1` rewrites them).
    use super::{fixture_dir, fixture_now, golden, snapshot};
    use pv_explain::{explain_pod, PodVerdict};
    use std::path::PathBuf;

    fn pod_fixtures() -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(fixture_dir().join("pod"))
            .expect("tests/explain/pod exists")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        v.sort();
        v
    }

    fn verdict_of(path: &std::path::Path) -> String {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        stem.split("--").next().unwrap().to_string()
    }

    #[test]
    fn every_pod_verdict_has_a_fixture() {
        let fixtures = pod_fixtures();
        assert!(fixtures.len() >= PodVerdict::ALL.len(), "{} pod fixtures", fixtures.len());
        for v in PodVerdict::ALL {
            assert!(fixtures.iter().any(|p| verdict_of(p) == v.as_str()), "no fixture {}.yaml", v.as_str());
        }
    }

    #[test]
    fn pod_fixtures_get_their_verdict_and_match_their_goldens() {
        let mut failures = Vec::new();
        for path in pod_fixtures() {
            let text = std::fs::read_to_string(&path).unwrap();
            let x = explain_pod(&snapshot(&text), "default", "app", fixture_now())
                .unwrap_or_else(|| panic!("{}: pod default/app missing", path.display()));
            let want = verdict_of(&path);
            if x.verdict.as_str() != want {
                failures.push(format!(
                    "{}: verdict {}, want {want}: {}",
                    path.display(),
                    x.verdict.as_str(),
                    x.message
                ));
            }
            // A pod the scheduler cannot place has no fitting node, and one it can has some.
            if x.node.is_none() && x.verdict.blocks_scheduling() != x.fitting_nodes.is_empty() {
                failures.push(format!("{}: verdict {} with fitting nodes {:?}", path.display(), want, x.fitting_nodes));
            }
            let json = serde_json::to_string_pretty(&pv_explain::render::pod_to_json(&x)).unwrap() + "\n";
            for (ext, actual) in [("json", json), ("txt", pv_explain::render::pod_to_text(&x, false, 100))] {
                if let Err(msg) = golden(&path.with_extension(ext), &actual) {
                    failures.push(msg);
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
}

/// The README lists every reason code of a claim and every pod verdict, each in its table with a
/// meaning and a next step, and lists no code that does not exist.
#[test]
fn the_readme_documents_every_code() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let rows = |heading: &str| -> Vec<String> {
        let start = readme.find(heading).unwrap_or_else(|| panic!("README has no table {heading:?}"));
        readme[start..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                assert!(cells.len() >= 5 && !cells[2].is_empty() && !cells[3].is_empty(), "row {l:?}");
                cells[1].trim_matches('`').to_string()
            })
            .collect()
    };
    let claims = rows("| claim reason | meaning | next step |");
    let want: Vec<String> = pv_explain::cluster::REASONS.iter().map(|r| r.to_string()).collect();
    assert_eq!(claims, want, "README's claim reasons, worst first");
    let pods = rows("| pod verdict | meaning | next step |");
    let want: Vec<String> = PodVerdict::ALL.iter().map(|v| v.as_str().to_string()).collect();
    assert_eq!(pods, want, "README's pod verdicts");
}

/// Every reason the controller's plan can give a Pending claim (the metric's label) is a
/// documented code.
#[test]
fn every_pending_reason_is_a_documented_code() {
    for path in fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        let e = explain_snapshot(&snapshot(&text), "default", "data").unwrap();
        assert!(pv_explain::cluster::REASONS.contains(&e.reason), "{}: {}", path.display(), e.reason);
    }
}

/// In a list, each claim keeps the candidates its table shows (at most ten) and counts the rest:
/// `summary` still counts every volume, and `candidatesNotListed` what was left out.
#[test]
fn a_list_keeps_nearest_misses_and_counts_every_volume() {
    let mut checked = 0;
    for path in fixtures() {
        let snap = snapshot(&std::fs::read_to_string(&path).unwrap());
        let list = pv_explain::explain_claims(&snap, None, fixture_now());
        let docs = serde_json::to_value(pv_explain::render::list_to_json(&list)).unwrap();
        for d in docs.as_array().unwrap() {
            let listed = d["candidates"].as_array().unwrap().len() as u64;
            let counted: u64 = d["summary"].as_object().unwrap().values().filter_map(Value::as_u64).sum();
            let left_out = d["candidatesNotListed"].as_u64().expect("candidatesNotListed in a list");
            assert!(listed <= 10, "{}: {listed} candidates listed", path.display());
            assert_eq!(listed + left_out, counted, "{}: {d:#}", path.display());
            if d["volumeName"].is_null() && d["phase"] == "Pending" {
                assert_eq!(counted as usize, snap.volumes.len(), "{}: every volume counted", path.display());
            }
            checked += u64::from(left_out > 0);
        }
    }
    assert!(checked > 0, "no fixture has more volumes than a list shows");
}
