//! `pv-controller bench` as an operator runs it: the built binary, in-process (`--simulate`) and
//! against `up`, its table, its JSON, its exit codes and its `error:` line.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::util::{assert_user_error, text, Up, BIN};

fn bench(args: &[&str]) -> Output {
    Command::new(BIN).arg("bench").args(args).env_remove("KUBECONFIG").output().expect("binary runs")
}

#[test]
fn simulate_pairs_prints_the_table() {
    let out = bench(&["--simulate", "--pairs", "200"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for want in ["200 static PV/PVC pairs", "bound               200 / 200", "time to Bound p50", "time to Bound p99"] {
        assert!(stdout.contains(want), "{want:?} missing in\n{stdout}");
    }
    for want in ["binds/s", "peak RSS", "wall time"] {
        assert!(stdout.contains(want), "{want:?} missing in\n{stdout}");
    }
}

#[test]
fn simulate_provisioning_as_json() {
    let out = bench(&["--simulate", "--claims", "50", "--class", "gold", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["mode"], "simulate");
    assert_eq!(v["workload"], "claims");
    assert_eq!(v["n"], 50);
    assert_eq!(v["bound"], 50);
    assert!(v["bindsPerSecond"].as_f64().unwrap() > 0.0);
    assert!(v["peakRssBytes"].as_u64().unwrap() > 0);
}

/// `<circle` elements of an SVG, by fill colour.
fn circles_by_fill(svg: &str) -> std::collections::BTreeMap<String, usize> {
    let mut by = std::collections::BTreeMap::new();
    for c in svg.split("<circle").skip(1) {
        let c = &c[..c.find("/>").unwrap_or(c.len())];
        let fill = c.split("fill=\"").nth(1).and_then(|f| f.split('"').next()).unwrap_or("none");
        *by.entry(fill.to_string()).or_insert(0) += 1;
    }
    by
}

/// The text of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim().to_string()))
        .collect()
}

/// A file as `bench --plot-data` writes it: `points` as (created, to Bound) seconds.
fn points_file(dir: &std::path::Path, name: &str, label: &str, n: usize, points: &[(f64, f64)]) -> String {
    let points: Vec<serde_json::Value> =
        points.iter().map(|&(c, b)| serde_json::json!({"createdSeconds": c, "secondsToBound": b})).collect();
    let v = serde_json::json!({"label": label, "workload": "4 static PV/PVC pairs", "n": n, "points": points});
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn plot_merges_runs_on_one_chart() {
    let dir = tempfile::tempdir().unwrap();
    let up = points_file(dir.path(), "up.json", "upstream", 4, &[(0.0, 3.0), (0.1, 5.5), (0.2, 8.0), (0.3, 9.5)]);
    let ours = points_file(dir.path(), "ours.json", "ours", 4, &[(0.0, 0.2), (0.1, 0.3), (0.2, 0.25)]);
    let svg_path = dir.path().join("chart.svg");
    let out = bench(&["plot", "--out", svg_path.to_str().unwrap(), &up, &ours]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("2 runs, 7 points"), "{}", text(&out.stderr));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // Two colours: each with one marker per point, plus its legend entry.
    let mut counts: Vec<usize> = circles_by_fill(&svg).into_values().collect();
    counts.sort();
    assert_eq!(counts, [3 + 1, 4 + 1], "{svg}");
    let texts = svg_texts(&svg);
    for want in [
        "Time to Bound per claim: 4 static PV/PVC pairs",
        "upstream",
        "ours (1 of 4 not bound)",
        "claim created (s since the start of the run)",
        "time to Bound (s)",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want:?} not among {texts:?}");
    }

    // A title of one's own, and a logarithmic time axis.
    let out = bench(&["plot", "--out", svg_path.to_str().unwrap(), "--title", "A & B", "--log-y", &up, &ours]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let texts = svg_texts(&std::fs::read_to_string(&svg_path).unwrap());
    assert!(texts.iter().any(|t| t == "A &amp; B"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "time to Bound (s, logarithmic scale)"), "{texts:?}");
}

#[test]
fn plot_input_errors_name_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = points_file(dir.path(), "good.json", "ours", 1, &[(0.0, 0.5)]);
    let no_points = dir.path().join("no-points.json");
    std::fs::write(&no_points, r#"{"label": "upstream", "n": 4}"#).unwrap();
    let svg = dir.path().join("chart.svg");
    let out = bench(&["plot", "--out", svg.to_str().unwrap(), &good, no_points.to_str().unwrap()]);
    assert_user_error(&out, &[no_points.to_str().unwrap(), "missing field `points`"]);
    assert!(!svg.exists(), "no chart from bad input");

    let bad_point = dir.path().join("bad-point.json");
    std::fs::write(&bad_point, r#"{"label": "x", "n": 1, "points": [{"createdSeconds": 0}]}"#).unwrap();
    let out = bench(&["plot", "--out", svg.to_str().unwrap(), bad_point.to_str().unwrap()]);
    assert_user_error(&out, &[bad_point.to_str().unwrap(), "points[0]", "secondsToBound"]);

    let absent = dir.path().join("absent.json");
    let out = bench(&["plot", "--out", svg.to_str().unwrap(), absent.to_str().unwrap()]);
    assert_user_error(&out, &[absent.to_str().unwrap()]);

    let out = bench(&["plot", "--out", dir.path().join("no/dir/chart.svg").to_str().unwrap(), &good]);
    assert_user_error(&out, &["writing", "no/dir/chart.svg"]);
}

#[test]
fn simulate_writes_its_chart_and_points() {
    let dir = tempfile::tempdir().unwrap();
    let (svg, data) = (dir.path().join("run.svg"), dir.path().join("run.json"));
    let out = bench(&[
        "--simulate",
        "--pairs",
        "40",
        "--plot",
        svg.to_str().unwrap(),
        "--plot-data",
        data.to_str().unwrap(),
        "--label",
        "ours",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    assert_eq!(v["label"], "ours");
    assert_eq!(v["n"], 40);
    assert_eq!(v["workload"], "40 static PV/PVC pairs (simulated)");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 40);
    assert!(points.iter().all(|p| p["createdSeconds"] == 0.0 && p["secondsToBound"].as_f64().unwrap() > 0.0));
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(circles_by_fill(&chart).into_values().collect::<Vec<_>>(), [40 + 1]);
    assert!(svg_texts(&chart).iter().any(|t| t == "ours"));

    // Flags that need a chart, and a chart that cannot be written: refused before the run.
    let out = bench(&["--simulate", "--pairs", "1", "--label", "ours"]);
    assert_user_error(&out, &["--label"]);
    let out = bench(&["--simulate", "--pairs", "1", "--plot", "/nonexistent/dir/run.svg"]);
    assert_user_error(&out, &["--plot", "/nonexistent/dir"]);
    assert!(out.stdout.is_empty(), "nothing ran: {}", text(&out.stdout));
}

#[test]
fn help_shows_the_chart_flags_and_plot() {
    let out = bench(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for want in
        ["--plot <FILE>", "--plot-data <FILE>", "--label <NAME>", "--log-y", "plot ", "bench plot --out chart.svg"]
    {
        assert!(help.contains(want), "{want:?} missing in\n{help}");
    }
}

#[test]
fn bad_flags_are_user_errors() {
    for args in [&["--simulate"][..], &["--pairs", "1", "--claims", "1"], &["--claims", "3"]] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
    }
}

#[test]
fn missing_kubeconfig_is_a_user_error() {
    let out = bench(&["--pairs", "1", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/kubeconfig"), "{}", text(&out.stderr));
}

#[test]
fn against_up_binds_and_cleans_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(dir.path(), &["--listen", "127.0.0.1:0"]);
    let kubeconfig = up.kubeconfig.clone();
    let t = Instant::now();
    let out = bench(&[
        "--kubeconfig",
        &kubeconfig,
        "--pairs",
        "20",
        "--namespace",
        "bench-test",
        "--timeout",
        "60s",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(t.elapsed() < Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["mode"], "api");
    assert_eq!(v["bound"], 20);
    assert!(v["p99Ms"].as_f64().unwrap() >= v["p50Ms"].as_f64().unwrap());
    let run = v["run"].as_str().unwrap().to_string();
    let (claims, volumes) = count_labelled(&kubeconfig, &format!("bench.pv-controller.io/run={run}"));
    assert_eq!((claims, volumes), (0, 0), "the run's claims and PVs are deleted");

    // A class that does not exist, or binds on first consumer: refused before anything is made.
    create_class(&kubeconfig, "wait", "kubernetes.io/host-path", "WaitForFirstConsumer");
    for (class, why) in [("none", "does not exist"), ("wait", "volumeBindingMode WaitForFirstConsumer")] {
        let t = Instant::now();
        let out = bench(&["--kubeconfig", &kubeconfig, "--claims", "1", "--class", class, "--timeout", "10m"]);
        assert_eq!(out.status.code(), Some(1), "class {class}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: --class ") && stderr.contains(why), "{stderr}");
        assert!(t.elapsed() < Duration::from_secs(600), "failed early, not after the timeout");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }

    // A claim that cannot bind (an external provisioner nobody runs): the table is still
    // printed, with the time the run lasted, then the error.
    create_class(&kubeconfig, "elsewhere", "example.com/nobody", "Immediate");
    let out =
        bench(&["--kubeconfig", &kubeconfig, "--claims", "1", "--class", "elsewhere", "--timeout", "2s", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "a claim nobody provisions never binds");
    assert!(text(&out.stderr).contains("0 of 1 bound"), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["bound"], 0);
    assert!(v["wallSeconds"].as_f64().unwrap() >= 2.0, "wall time is the time until giving up: {v}");
    assert!(v["note"].as_str().unwrap().contains("the claim's create request"), "claim wording: {v}");

    // Provisioned claims: bound, then cleaned up with the Events the controller recorded.
    create_class(&kubeconfig, "local", "kubernetes.io/host-path", "Immediate");
    let out = bench(&[
        "--kubeconfig",
        &kubeconfig,
        "--claims",
        "5",
        "--class",
        "local",
        "--namespace",
        "bench-test",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["bound"], 5);
    let run = v["run"].as_str().unwrap().to_string();
    assert_eq!(events_about(&kubeconfig, &run), Vec::<String>::new(), "the run's Events are deleted");
    drop(up);
}

#[test]
fn the_ceilings_make_the_controllers_requests_themselves() {
    use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim};
    use kube::api::{Api, ListParams};
    let dir = tempfile::tempdir().expect("tempdir");
    // No controller: whatever binds here is the bench.
    let up = Up::start(dir.path(), &["--listen", "127.0.0.1:0", "--no-controller"]);
    let kubeconfig = up.kubeconfig.clone();
    let run = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", &kubeconfig, "--namespace", "ceiling", "--keep", "-o", "json"];
        all.extend_from_slice(args);
        let out = bench(&all);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON on stdout")
    };
    let pairs = run(&["--pairs", "6", "--bind-itself"]);
    assert_eq!(pairs["bound"], 6);
    assert!(pairs["description"].as_str().unwrap().contains("five writes"), "{pairs}");

    create_class(&kubeconfig, "local", "kubernetes.io/host-path", "Immediate");
    let claims = run(&["--claims", "4", "--class", "local", "--bind-itself"]);
    assert_eq!(claims["bound"], 4);
    assert!(claims["description"].as_str().unwrap().contains("per provisioned claim"), "{claims}");
    let label = format!("bench.pv-controller.io/run={}", claims["run"].as_str().unwrap());

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let bound: Vec<PersistentVolumeClaim> =
            Api::namespaced(client.clone(), "ceiling").list(&ListParams::default().labels(&label)).await.unwrap().items;
        assert_eq!(bound.len(), 4);
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        for claim in &bound {
            // As a provisioner and the binder leave them: the claim annotated and bound, its
            // volume named after its uid, bound back to it, provisioned by the class's plugin.
            let a = claim.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(
                a.get("volume.kubernetes.io/storage-provisioner").map(String::as_str),
                Some("kubernetes.io/host-path")
            );
            assert_eq!(a.get("pv.kubernetes.io/bind-completed").map(String::as_str), Some("yes"));
            let name = format!("pvc-{}", claim.metadata.uid.as_deref().unwrap());
            assert_eq!(claim.spec.as_ref().unwrap().volume_name.as_deref(), Some(name.as_str()));
            assert_eq!(claim.status.as_ref().unwrap().phase.as_deref(), Some("Bound"));
            let pv = pvs.get(&name).await.unwrap();
            assert_eq!(pv.status.as_ref().unwrap().phase.as_deref(), Some("Bound"));
            let r = pv.spec.as_ref().unwrap().claim_ref.clone().unwrap();
            assert_eq!(r.uid, claim.metadata.uid);
            let pa = pv.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(pa.get("pv.kubernetes.io/provisioned-by").map(String::as_str), Some("kubernetes.io/host-path"));
            assert_eq!(pv.spec.as_ref().unwrap().storage_class_name.as_deref(), Some("local"));
            // The class's reclaim policy, and the finalizer that guards a volume to be deleted.
            assert_eq!(pv.spec.as_ref().unwrap().persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
            let finalizers = pv.metadata.finalizers.clone().unwrap_or_default();
            assert!(finalizers.iter().any(|f| f == "kubernetes.io/pv-controller"), "{finalizers:?}");
        }
        let events: Vec<Event> = Api::namespaced(client, "ceiling").list(&Default::default()).await.unwrap().items;
        let provisioned = events.iter().filter(|e| e.reason.as_deref() == Some("ProvisioningSucceeded")).count();
        assert_eq!(provisioned, 4, "one ProvisioningSucceeded event per claim, as the controllers record");
    });
    drop(up);
}

/// Creates a StorageClass through the kubeconfig.
fn create_class(kubeconfig: &str, name: &str, provisioner: &str, mode: &str) {
    use k8s_openapi::api::storage::v1::StorageClass;
    use kube::api::{Api, PostParams};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let sc: StorageClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode,
            "reclaimPolicy": "Delete"}))
        .unwrap();
        Api::<StorageClass>::all(client).create(&PostParams::default(), &sc).await.unwrap();
    })
}

/// Events (any namespace) about objects or provisioned volumes of the run `run`, as `ns/name`.
fn events_about(kubeconfig: &str, run: &str) -> Vec<String> {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::Api;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let events = Api::<Event>::all(client).list(&Default::default()).await.unwrap();
        events
            .items
            .iter()
            .filter(|e| {
                let name = e.involved_object.name.as_deref().unwrap_or("");
                let msg = e.message.as_deref().unwrap_or("");
                name.starts_with(run) || msg.contains(run) || name.starts_with("pvc-")
            })
            .map(|e| {
                format!(
                    "{}/{}",
                    e.metadata.namespace.as_deref().unwrap_or(""),
                    e.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect()
    })
}

/// Claims and PVs carrying `selector`, listed through the kubeconfig.
fn count_labelled(kubeconfig: &str, selector: &str) -> (usize, usize) {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use kube::api::{Api, ListParams};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let lp = ListParams::default().labels(selector);
        let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
        let pvs: Api<PersistentVolume> = Api::all(client);
        (claims.list(&lp).await.unwrap().items.len(), pvs.list(&lp).await.unwrap().items.len())
    })
}
