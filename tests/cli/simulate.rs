//! `pv-controller simulate` as a user runs it: exit codes, the one-line `error:` naming file,
//! document, object and field, and no panic on hostile input.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::util::{assert_user_error, text, BIN};

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

fn simulate(input: &[u8], extra: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(["simulate", "-f", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

const PV: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], nfs: {server: s, path: /x}}\n";

#[test]
fn the_example_converges_and_prints_a_list() {
    let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster.yaml")).unwrap();
    let o = simulate(&text, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "List");
    let claims: Vec<_> =
        v["items"].as_array().unwrap().iter().filter(|i| i["kind"] == "PersistentVolumeClaim").collect();
    assert_eq!(claims.len(), 3);
    assert!(claims.iter().all(|c| c["status"]["phase"] == "Bound"));
}

#[test]
fn faults_do_not_change_the_converged_objects() {
    let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster.yaml")).unwrap();
    let strip = |o: &Output| -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] != "Event")
            .map(|i| {
                let mut i = i.clone();
                for k in ["resourceVersion", "creationTimestamp", "generation"] {
                    i["metadata"].as_object_mut().unwrap().remove(k);
                }
                if let Some(s) = i["status"].as_object_mut() {
                    s.remove("lastPhaseTransitionTime");
                }
                if let Some(r) = i["spec"]["claimRef"].as_object_mut() {
                    r.remove("resourceVersion");
                }
                if let Some(p) = i["spec"]["hostPath"].as_object_mut() {
                    p.remove("path");
                }
                i
            })
            .collect()
    };
    let clean = simulate(&text, &[]);
    for seed in ["1", "2", "3"] {
        let faulty = simulate(
            &text,
            &["--inject-faults", "conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05", "--seed", seed],
        );
        assert_eq!(faulty.status.code(), Some(0), "{}", stderr(&faulty));
        assert_eq!(strip(&clean), strip(&faulty), "seed {seed}");
    }
}

#[test]
fn yaml_output_prints_plain_strings_plain_as_kubectl_does() {
    let o = simulate(PV.as_bytes(), &["-o", "yaml"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    for plain in ["kind: List", "apiVersion: v1", "name: pv1", "storage: 1Gi", "phase: Available", "path: /x"] {
        assert!(text.contains(plain), "{plain:?} in\n{text}");
    }
    let back: serde_json::Value = serde_saphyr::from_str(&text).expect("valid YAML");
    assert_eq!(back["items"][0]["spec"]["capacity"]["storage"], "1Gi");
}

#[test]
fn other_kinds_are_ignored_with_a_note_so_output_can_be_fed_back() {
    let o = simulate(PV.as_bytes(), &["-o", "yaml"]);
    assert_eq!(o.status.code(), Some(0));
    // simulate's own output (objects, then Events) is valid input again.
    let again = simulate(&o.stdout, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let dump = format!("{PV}---\napiVersion: v1\nkind: Event\nmetadata: {{name: e, namespace: default}}\ninvolvedObject: {{kind: PersistentVolume, name: pv1}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d, namespace: default}}\n");
    let o = simulate(dump.as_bytes(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        "note: -: ignored 2 objects of kinds that do not affect the controller (1 Deployment, 1 Event)"
    );
}

#[test]
fn an_empty_input_is_an_error() {
    for input in [&b""[..], b"\n# nothing here\n", b"---\n"] {
        assert_user_error(&simulate(input, &[]), &["-: ", "the input is empty"]);
    }
    let o = simulate(b"apiVersion: v1\nkind: List\nitems: []\n", &[]);
    assert_eq!(o.status.code(), Some(0), "an explicit empty List is an empty cluster: {}", stderr(&o));
}

#[test]
fn bad_objects_name_document_object_and_field() {
    let bad = format!("{PV}---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: pv2}}\nspec: {{capacity: {{storage: 1Zi}}, accessModes: [ReadWriteOnce], nfs: {{server: s, path: /x}}}}\n");
    assert_user_error(
        &simulate(bad.as_bytes(), &[]),
        &["-: document 2 (PersistentVolume pv2)", "spec.capacity[storage]", "1Zi"],
    );
    for q in ["-1Gi", "1e999", "0"] {
        let t = PV.replace("1Gi", q);
        assert_user_error(&simulate(t.as_bytes(), &[]), &["document 1", "spec.capacity[storage]"]);
    }
    assert_user_error(&simulate(PV.replace("pv1", "Bad_Name").as_bytes(), &[]), &["metadata.name"]);
    let traversal = PV.replace("nfs: {server: s, path: /x}", "hostPath: {path: /tmp/../../etc}");
    assert_user_error(&simulate(traversal.as_bytes(), &[]), &["spec.hostPath.path", "'..'"]);
    assert_user_error(
        &simulate(PV.replace("accessModes: [ReadWriteOnce]", "accessModes: ReadWriteOnce").as_bytes(), &[]),
        &["spec.accessModes"],
    );
    assert_user_error(
        &simulate(PV.replace("nfs: {server: s, path: /x}", "nfs: {server: s, path: /x}, bogus: 1").as_bytes(), &[]),
        &["unknown field", "spec.bogus"],
    );
    assert_user_error(
        &simulate(b"apiVersion: v1\nkind: PersistentVolumeClam\nmetadata: {name: d}\n", &[]),
        &["document 1", "kind", "PersistentVolumeClam", "did you mean \"PersistentVolumeClaim\""],
    );
    assert_user_error(
        &simulate(
            PV.replace("kind: PersistentVolume", "kind: PersistentVolume\nkind: PersistentVolume").as_bytes(),
            &[],
        ),
        &["document 1"],
    );
}

#[test]
fn hostile_input_is_an_error_not_a_panic() {
    let mut garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    garbage.extend_from_slice(b"\xff\xfe{{{{");
    assert_user_error(&simulate(&garbage, &[]), &["standard input"]);
    let deep_yaml = format!("{}1{}", "[".repeat(20_000), "]".repeat(20_000));
    assert_user_error(&simulate(deep_yaml.as_bytes(), &[]), &["document 1"]);
    let deep_json = format!("{}{}", "{\"a\":".repeat(20_000), "}".repeat(20_000));
    assert_user_error(&simulate(deep_json.as_bytes(), &[]), &["document 1"]);
    let huge = PV.replace(
        "metadata: {name: pv1}",
        &format!("metadata: {{name: pv1, annotations: {{big: {}}}}}", "x".repeat(400_000)),
    );
    assert_user_error(&simulate(huge.as_bytes(), &[]), &["metadata.annotations", "Too long"]);
    assert_user_error(&simulate(b"", &["--inject-faults", "explode=1"]), &["--inject-faults", "unknown fault"]);
}

#[test]
fn missing_file_and_unsettled_runs_are_user_errors() {
    let o = Command::new(BIN).args(["simulate", "-f", "/nonexistent.yaml"]).output().unwrap();
    assert_user_error(&o, &["/nonexistent.yaml"]);
    let o = simulate(PV.as_bytes(), &["--max-rounds", "0"]);
    assert_user_error(&o, &["did not settle", "--max-rounds"]);
}

/// The messages of the events about the claims, by reason, from `simulate`'s output.
fn claim_event_messages(o: &Output) -> Vec<(String, String)> {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut m: Vec<(String, String)> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "Event" && i["involvedObject"]["kind"] == "PersistentVolumeClaim")
        .map(|i| (i["reason"].as_str().unwrap().to_string(), i["message"].as_str().unwrap().to_string()))
        .collect();
    m.sort();
    m
}

#[test]
fn simulate_has_the_detailed_event_texts_and_detailed_events_false_gives_upstreams() {
    // A claim with no class too big for the one volume; a claim of a first-consumer class.
    let input = format!(
        "{PV}---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: big, namespace: default}}\n\
         spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 5Gi}}}}, storageClassName: ''}}\n\
         ---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: wait}}\n\
         provisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n\
         ---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: later, namespace: default}}\n\
         spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}, storageClassName: wait}}\n"
    );
    let no_class = "no persistent volumes available for this claim and no storage class is set";
    let waiting = "waiting for first consumer to be created before binding";
    let detailed = claim_event_messages(&simulate(input.as_bytes(), &[]));
    assert_eq!(
        detailed,
        [
            ("FailedBinding".to_string(), format!("{no_class} (1 volume: 1 too small)")),
            ("WaitForFirstConsumer".to_string(), format!("{waiting}; {}", pv_core::FIRST_CONSUMER_HINT)),
        ]
    );
    let upstream = claim_event_messages(&simulate(input.as_bytes(), &["--detailed-events=false"]));
    assert_eq!(
        upstream,
        [
            ("FailedBinding".to_string(), no_class.to_string()),
            ("WaitForFirstConsumer".to_string(), waiting.to_string())
        ]
    );
}

#[test]
fn changes_output_says_what_the_controller_would_do_one_line_each() {
    let input = std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.yaml")).unwrap();
    let out = simulate(&input, &["-o", "changes"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let t = text(&out.stdout);
    assert!(t.starts_with("3 bound, 1 provisioned, 1 events\n"), "{t}");
    for line in ["  data/small → pv-5g", "  data/reserved → pv-20g"] {
        assert!(t.lines().any(|l| l == line), "{line:?} missing:\n{t}");
    }
    assert!(t.lines().any(|l| l.starts_with("  pvc-") && l.ends_with("(1Gi, class local) for data/logs")), "{t}");
    assert!(t.contains("Normal ProvisioningSucceeded ×1, first on PersistentVolumeClaim data/logs: "), "{t}");
    // Then the syncs that acted, each with its steps: the volumes made Available first, then
    // data/small's bind, the volume promised and written before the claim.
    let (_, steps) = t.split_once("\nSteps:\n").unwrap_or_else(|| panic!("no Steps section:\n{t}"));
    let lines: Vec<&str> = steps.lines().map(|l| l.trim_start()).collect();
    assert!(lines.iter().all(|l| l.starts_with("+0s ")), "all at the start, before any resync:\n{t}");
    let small = "+0s claim data/small: reserve volume pv-5g; write volume pv-5g: spec.claimRef to data/small; \
                 write volume pv-5g: status.phase Bound; \
                 write claim data/small: spec.volumeName pv-5g, annotations bound-by-controller and bind-completed; \
                 write claim data/small: status.phase Bound";
    let at = |want: &str| lines.iter().position(|l| *l == want).unwrap_or_else(|| panic!("{want:?} missing:\n{t}"));
    assert!(at("+0s volume pv-5g: write volume pv-5g: status.phase Available") < at(small), "{t}");
    assert_eq!(
        lines.iter().find(|l| l.starts_with("+0s claim data/logs: ")),
        Some(&"+0s claim data/logs: provision a volume with kubernetes.io/host-path (an operation)"),
        "{t}"
    );
    // The same input, the same lines.
    assert_eq!(text(&simulate(&input, &["-o", "changes"]).stdout), t);
    // Fed its own output back, the controller would change nothing.
    let full = simulate(&input, &[]);
    let again = simulate(&full.stdout, &["-o", "changes"]);
    assert_eq!(text(&again.stdout), "No changes: the controller would leave this state as it is.\n");
}
