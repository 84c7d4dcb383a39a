//! The command line as kubectl and kube-controller-manager users type it: klog's `--v=N`, KCM's
//! flag names, Go durations, KCM's feature-gate checks, and the generated completion script and
//! manual page. Every case runs the built binary.

use crate::util::{pv_controller, text};
use std::process::Output;

/// Exit 1 with `needle` in what it printed (clap's errors take several lines).
fn assert_user_error(o: &Output, needle: &str) {
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {e}");
    assert!(e.contains(needle), "{needle:?} not in {e:?}");
}

#[test]
fn klog_verbosity_and_kcm_flag_names_parse() {
    for args in [
        &["run", "--v=2", "--leader-elect-resource-namespace", "kube-system", "--help"][..],
        &["run", "-v=2", "--help"],
        &["run", "--v", "3", "--help"],
        &["run", "-vv", "--help"],
        &[
            "run",
            "--pvclaimbinder-sync-period=1m30s",
            "--leader-elect-lease-duration",
            "1m",
            "--logging-format=json",
            "--enable-dynamic-provisioning=false",
            "--enable-hostpath-provisioner",
            "--detailed-events",
            "--cluster",
            "c",
            "--user",
            "u",
            "--context",
            "x",
            "--help",
        ],
        &["up", "--v=2", "--help"],
        &["up", "--detailed-events=false", "--help"],
        &["simulate", "-f", "x", "--detailed-events=false", "--help"],
        &["explain", "--cluster", "c", "--user", "u", "--help"],
    ] {
        let o = pv_controller(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stdout).contains("Usage:"), "{args:?}");
    }
    let help = text(&pv_controller(&["run", "--help"]).stdout);
    for alias in ["pvclaimbinder-sync-period", "leader-elect-resource-namespace", "logging-format"] {
        assert!(help.contains(alias), "run --help names {alias}:\n{help}");
    }
    // The default shown is the server's own constant, written as a Go duration.
    let help = text(&pv_controller(&["up", "--help"]).stdout);
    assert!(help.contains("[default: 2ms]"), "up --help gives the commit delay's default:\n{help}");
}

#[test]
fn bad_verbosity_and_durations_are_refused_as_go_refuses_them() {
    assert_user_error(&pv_controller(&["run", "--v=loud"]), "invalid verbosity");
    // Go's time.ParseDuration wants a unit.
    assert_user_error(&pv_controller(&["run", "--pvclaimbinder-sync-period", "90"]), "invalid duration");
    assert_user_error(&pv_controller(&["run", "--resync-period", "0s"]), "must be positive");
    assert_user_error(&pv_controller(&["up", "--commit-delay", "2"]), "invalid duration");
}

#[test]
fn unknown_or_locked_feature_gates_stop_the_start_as_in_kcm() {
    // Checked before any connection is tried: the kubeconfig does not exist.
    let run =
        |gates: &str| pv_controller(&["run", "--kubeconfig", "/nonexistent/kubeconfig", "--feature-gates", gates]);
    assert_user_error(&run("NoSuchGate=true"), "unrecognized feature gate: NoSuchGate");
    assert_user_error(
        &run("VolumeAttributesClass=false"),
        "cannot set feature gate VolumeAttributesClass to false, feature is locked to true",
    );
    // A known gate passes the check; the start then fails on the kubeconfig instead.
    let o = run("VolumeAttributesClass=true,AllowServiceExternalIPs=false");
    assert_eq!(o.status.code(), Some(1));
    assert!(!text(&o.stderr).contains("feature gate"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("/nonexistent/kubeconfig"), "{}", text(&o.stderr));
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    let o = pv_controller(&["completion", "bash"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let script = text(&o.stdout);
    // clap_complete names the function after the program with `-` spelled `__`.
    assert!(script.contains("complete -F _pv__controller"), "{script}");
    assert!(script.contains("--leader-elect-resource-namespace"), "flags of run are completed");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = pv_controller(&["completion", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", text(&o.stderr));
        assert!(!o.stdout.is_empty(), "{shell}");
    }
    assert_user_error(&pv_controller(&["completion", "tcsh"]), "invalid value");
}

#[test]
fn man_prints_the_manual_page_of_the_program_or_a_subcommand() {
    let o = pv_controller(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = text(&o.stdout);
    assert!(page.starts_with(".ie") || page.contains(".TH pv-controller 1"), "{page}");
    assert!(page.contains(".TH pv-controller 1"), "{page}");
    let run = text(&pv_controller(&["man", "run"]).stdout);
    assert!(run.contains(".TH pv-controller-run 1"), "{run}");
    assert!(run.contains("leader\\-elect\\-namespace") && run.contains("leader\\-elect\\-resource\\-name"), "{run}");
    assert_user_error(&pv_controller(&["man", "nosuch"]), "no subcommand \"nosuch\"");
    // A subcommand's own subcommand, which its page names.
    let bench = text(&pv_controller(&["man", "bench"]).stdout);
    assert!(bench.contains("pv\\-controller\\-bench\\-plot(1)"), "{bench}");
    let plot = text(&pv_controller(&["man", "bench", "plot"]).stdout);
    assert!(plot.contains(".TH pv-controller-bench-plot 1") && plot.contains("\\-\\-out"), "{plot}");
    assert_user_error(&pv_controller(&["man", "bench", "nosuch"]), "no subcommand \"nosuch\" (one of: plot)");
}

#[test]
fn kubeconfig_names_what_is_wrong_with_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let o = pv_controller(&["kubeconfig", "--service-account", "pv-controller"]);
    assert_user_error(&o, "--service-account \"pv-controller\": give it as NAMESPACE/NAME");
    let missing = dir.path().join("nope.yaml");
    let o = pv_controller(&[
        "kubeconfig",
        "--service-account",
        "kube-system/pv-controller",
        "--kubeconfig",
        missing.to_str().unwrap(),
    ]);
    assert_user_error(&o, &format!("{}:", missing.display()));
    let kc = dir.path().join("kc.yaml");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', certificate-authority: ca.crt}\n\
         contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    let o = pv_controller(&[
        "kubeconfig",
        "--service-account",
        "kube-system/pv-controller",
        "--kubeconfig",
        kc.to_str().unwrap(),
    ]);
    assert_user_error(&o, "cluster \"c\": certificate-authority");
    let o = pv_controller(&[
        "kubeconfig",
        "--service-account",
        "a/b",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--context",
        "y",
    ]);
    assert_user_error(&o, "context \"y\" not found");
}

#[test]
fn shadow_mode_refuses_what_would_write_and_its_report_names_the_address() {
    for (flag, says) in [
        (&["--leader-elect"][..], "--leader-elect (a Lease is a write"),
        (&["--hostpath-root", "/tmp/x"][..], "--hostpath-root / --enable-hostpath-provisioner"),
        (&["--metrics-secure"][..], "--metrics-secure (its TokenReviews are writes)"),
    ] {
        let mut args = vec!["run", "--shadow"];
        args.extend_from_slice(flag);
        let o = pv_controller(&args);
        assert_user_error(&o, "--shadow writes nothing, so it does not take");
        assert_user_error(&o, says);
    }
    // --shadow-settle belongs to --shadow.
    let o = pv_controller(&["run", "--shadow-settle", "5s"]);
    assert!(!o.status.success() && text(&o.stderr).contains("--shadow"), "{}", text(&o.stderr));
    assert_user_error(
        &pv_controller(&["shadow", "report", "https://127.0.0.1:1"]),
        "give the shadow's metrics address as http://HOST:PORT",
    );
    assert_user_error(
        &pv_controller(&["shadow", "report", "http://127.0.0.1:1"]),
        "http://127.0.0.1:1: cannot connect",
    );
}
