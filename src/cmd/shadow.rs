//! `pv-controller shadow report URL`: what a running shadow (`run --shadow`) found, from its
//! `/shadow` endpoint (reach it in a cluster with `kubectl port-forward`).

use super::user;
use clap::{Args, Subcommand};
use http_body_util::BodyExt;
use serde_json::Value;
use std::process::ExitCode;

/// `pv-controller shadow`.
#[derive(Args, Debug)]
pub struct ShadowArgs {
    #[command(subcommand)]
    pub command: ShadowCommand,
}

/// What `shadow` does.
#[derive(Subcommand, Debug)]
pub enum ShadowCommand {
    /// Summarises a running shadow's decisions: how many were compared with the binder in
    /// charge, how many agree, and each difference with the deliberate difference it is, if one.
    /// Exits 1 when a difference is not a listed one.
    Report(ReportArgs),
}

/// Flags of `shadow report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The shadow's metrics address, `http://HOST:PORT` (its `/shadow` is read).
    pub url: String,
    /// Print the shadow's JSON as it is.
    #[arg(long)]
    pub json: bool,
}

/// Deliberate differences a shadow can meet: (field, our value, their value, the entry that
/// lists it). A value `*` matches any. A difference matching one marks every other difference on
/// the same objects (and on the object its value names) as part of it: a rebind, say, changes
/// the claim's and the volume's phases and annotations too.
const DELIBERATE: &[(&str, &str, &str, &str)] = &[
    (
        "event Normal/Rebound",
        "recorded",
        "",
        "README, deliberate differences: \"Retained volumes go back to their claims, on request\" (pv-controller.io/rebind, opt-in)",
    ),
    (
        "event Warning/VolumeFailedRecycle",
        "recorded",
        "",
        "deploy/REPLACING.md, shadow mode: no recycler pods (they are writes), so a volume to recycle fails in the shadow",
    ),
    (
        "event Warning/VolumeFailedDelete",
        "recorded",
        "",
        "deploy/REPLACING.md, shadow mode: no host-path plugin (it deletes directories), so a host-path volume to delete fails in the shadow",
    ),
];

/// Runs `shadow`.
pub fn run(a: ShadowArgs) -> anyhow::Result<ExitCode> {
    let ShadowCommand::Report(r) = a.command;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let body = rt.block_on(fetch(&r.url))?;
    let report: Value =
        serde_json::from_str(&body).map_err(|e| user(format!("{}: not a shadow report: {e}", r.url)))?;
    if r.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let (text, unlisted) = summary(&report);
    print!("{text}");
    Ok(if unlisted == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The report as text, and how many differences are not deliberate ones.
pub fn summary(report: &Value) -> (String, usize) {
    let count = |result: &str| -> u64 {
        report["counts"][result].as_object().map_or(0, |m| m.values().filter_map(Value::as_u64).sum())
    };
    let mut out = format!(
        "{} decisions compared, {} agree, {} equivalent, {} differ ({} pending, settle window {}s)\n",
        report["decisions"].as_u64().unwrap_or(0),
        count("agree"),
        count("equivalent"),
        count("differ"),
        report["pending"].as_u64().unwrap_or(0),
        report["settleSeconds"].as_f64().unwrap_or(0.0),
    );
    let differences: Vec<&Value> = report["differences"].as_array().into_iter().flatten().collect();
    let s = |d: &Value, k: &str| d[k].as_str().unwrap_or_default().to_string();
    let matches = |want: &str, got: &str| want == "*" || want == got;
    let entry_of = |d: &Value| {
        DELIBERATE
            .iter()
            .find(|(f, o, t, _)| *f == s(d, "field") && matches(o, &s(d, "ours")) && matches(t, &s(d, "theirs")))
            .map(|(_, _, _, e)| *e)
    };
    // Objects a deliberate difference is about (the claim `namespace/name`, the volume), and
    // those its values name.
    let mut explained: Vec<(String, &str)> = Vec::new();
    for d in &differences {
        if let Some(e) = entry_of(d) {
            explained.push((s(d, "object"), e));
        }
    }
    // One step further: the volume or claim a binding difference on such an object names.
    for d in &differences {
        let object = s(d, "object");
        if !matches!(s(d, "field").as_str(), "spec.volumeName" | "spec.claimRef") {
            continue;
        }
        if let Some(e) = explained.iter().find(|(o, _)| *o == object).map(|(_, e)| *e) {
            for v in [s(d, "ours"), s(d, "theirs")] {
                if !v.is_empty() && v != "recorded" {
                    explained.push((v, e));
                }
            }
        }
    }
    let mut unlisted = 0;
    for d in &differences {
        out.push_str(&format!(
            "{} {} {} {}: ours {:?}, theirs {:?} (before {:?})\n",
            s(d, "result"),
            s(d, "kind"),
            s(d, "object"),
            s(d, "field"),
            s(d, "ours"),
            s(d, "theirs"),
            s(d, "before")
        ));
        if let Some(rule) = d["rule"].as_str() {
            out.push_str(&format!("  equivalent: {rule}\n"));
            continue;
        }
        let object = s(d, "object");
        match entry_of(d).or_else(|| explained.iter().find(|(o, _)| *o == object).map(|(_, e)| *e)) {
            Some(entry) => out.push_str(&format!("  deliberate: {entry}\n")),
            None => {
                unlisted += 1;
                out.push_str("  not a listed difference\n");
            }
        }
    }
    (out, unlisted)
}

async fn fetch(url: &str) -> anyhow::Result<String> {
    let base = url.trim_end_matches('/');
    let full = if base.ends_with("/shadow") { base.to_string() } else { format!("{base}/shadow") };
    let uri: hyper::Uri = full.parse().map_err(|e| user(format!("{url}: not a URL: {e}")))?;
    if uri.scheme_str() != Some("http") {
        return Err(user(format!("{url}: give the shadow's metrics address as http://HOST:PORT")));
    }
    let host = uri.host().unwrap_or("127.0.0.1").to_string();
    let port = uri.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| user(format!("{url}: cannot connect: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| user(format!("{url}: {e}")))?;
    tokio::spawn(conn);
    let req =
        hyper::Request::get(uri.path()).header(hyper::header::HOST, format!("{host}:{port}")).body(String::new())?;
    let resp = sender.send_request(req).await.map_err(|e| user(format!("{url}: {e}")))?;
    let status = resp.status();
    let body = resp.into_body().collect().await.map_err(|e| user(format!("{url}: {e}")))?.to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        return Err(user(format!("{full}: {status}: {body}")));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_and_names_each_difference() {
        let report = serde_json::json!({
            "settleSeconds": 10.0, "decisions": 5, "pending": 1,
            "counts": {"agree": {"PersistentVolume": 2, "PersistentVolumeClaim": 1}, "differ": {"PersistentVolumeClaim": 1},
                       "equivalent": {"PersistentVolumeClaim": 1}},
            "differences": [
                {"result": "differ", "kind": "PersistentVolumeClaim", "object": "ns/c", "field": "status.phase",
                 "before": "Pending", "ours": "Bound", "theirs": "Pending", "rule": null},
                {"result": "equivalent", "kind": "PersistentVolumeClaim", "object": "ns/d", "field": "spec.volumeName",
                 "before": "", "ours": "a", "theirs": "b", "rule": "same size"},
            ],
        });
        let (text, unlisted) = summary(&report);
        assert!(
            text.starts_with("5 decisions compared, 3 agree, 1 equivalent, 1 differ (1 pending, settle window 10s)\n"),
            "{text}"
        );
        assert!(
            text.contains("differ PersistentVolumeClaim ns/c status.phase: ours \"Bound\", theirs \"Pending\""),
            "{text}"
        );
        assert!(text.contains("  equivalent: same size"), "{text}");
        assert!(
            text.contains(
                "status.phase: ours \"Bound\", theirs \"Pending\" (before \"Pending\")\n  not a listed difference"
            ),
            "{text}"
        );
        assert_eq!(unlisted, 1);
    }

    #[test]
    fn a_deliberate_difference_explains_the_others_on_its_objects() {
        let d = |object: &str, field: &str, ours: &str, theirs: &str| {
            serde_json::json!({"result": "differ", "kind": "PersistentVolumeClaim", "object": object, "field": field,
                               "before": "", "ours": ours, "theirs": theirs, "rule": null})
        };
        let report = serde_json::json!({"decisions": 4, "pending": 0, "counts": {"differ": {"PersistentVolumeClaim": 4}},
        "differences": [
            d("ns/data", "spec.volumeName", "pv-data", ""),
            d("ns/data", "event Normal/Rebound", "recorded", ""),
            d("pv-data", "status.phase", "Bound", "Released"),
            d("ns/other", "status.phase", "Bound", "Pending"),
        ]});
        let (text, unlisted) = summary(&report);
        assert_eq!(text.matches("deliberate: README, deliberate differences: \"Retained volumes").count(), 3, "{text}");
        assert_eq!(unlisted, 1, "{text}");
    }
}
