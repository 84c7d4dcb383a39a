//! Printing an [`Explanation`]: JSON for scripts (the format the README documents), text for people.
//!
//! The text form is built to be read at a glance in a terminal (100 columns when the width is not
//! known): two header lines with what the claim asks for, the count of volumes per verdict, a
//! table of the volumes that matter (matches, then near misses: volumes failing a rule other than
//! `claimedByOther`, and volumes held by an earlier claim of the same name; at most
//! [`NEAR_MISSES`] rows, the rest folded into counts; every volume with `--all`), what was found
//! about an external provisioner, then what happens next and what the user could change. Nothing is ever cut: names take the room they
//! need and a DETAIL longer than the room left wraps onto lines of its own in its column. Colour is opt-in by the caller, who knows
//! whether stdout is a terminal.

use crate::analyze::{Candidate, Explanation};
use crate::provisioner::{ago, Report};
use pv_model::VerdictKind;
use serde::Serialize;

/// The width the text output fits in when the terminal's is not known.
pub const WIDTH: usize = 100;

/// The narrowest DETAIL column: below it, wrapped lines would hold a word or two.
const MIN_DETAIL: usize = 24;

/// The rows the text table shows without `--all`.
pub const NEAR_MISSES: usize = 10;

/// The JSON document the README documents, keys in the documented order: `claim`, `phase`,
/// `volumeName`, `candidates` (each `volume`, `verdict`, `detail`), `bestMatch`, `next`,
/// `reason` (the stable code, as `pv_controller_pending_claims{reason}`), `message`, `hint`,
/// `steps` (what the controller's next sync would write and record, in order), `summary` (verdict → count) and, for a claim waiting for an external provisioner (or whose
/// provisioning for its first consumer failed), `provisioner`. Serialize it with `serde_json`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JsonDoc<'a> {
    claim: &'a str,
    phase: &'a str,
    volume_name: Option<&'a str>,
    candidates: Vec<JsonCandidate<'a>>,
    best_match: Option<&'a str>,
    next: &'static str,
    reason: &'static str,
    message: &'a str,
    hint: Option<&'a str>,
    steps: &'a [String],
    summary: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provisioner: Option<JsonProvisioner<'a>>,
    /// In a list (`explain pvc -A`): how many candidates were left out (the text table's rule:
    /// matches and nearest misses are listed; `summary` still counts every volume).
    #[serde(skip_serializing_if = "Option::is_none")]
    candidates_not_listed: Option<usize>,
}

/// The `provisioner` object: what was found past the binder.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JsonProvisioner<'a> {
    name: &'a str,
    csi_driver: Option<bool>,
    lease: Option<&'a str>,
    lease_holder: Option<&'a str>,
    lease_renewed_seconds_ago: Option<i64>,
    last_event: Option<JsonEvent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<JsonNode<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<&'a str>,
    verdict: &'static str,
    message: &'a str,
}

/// `provisioner.lastEvent`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JsonEvent<'a> {
    reason: &'a str,
    #[serde(rename = "type")]
    type_: &'a str,
    message: &'a str,
    seconds_ago: Option<i64>,
    count: i32,
}

/// `provisioner.node`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JsonNode<'a> {
    name: &'a str,
    driver_registered: Option<bool>,
}

fn json_provisioner(r: &Report) -> JsonProvisioner<'_> {
    JsonProvisioner {
        name: &r.name,
        csi_driver: r.csi_driver,
        lease: r.lease.as_deref(),
        lease_holder: r.lease_holder.as_deref(),
        lease_renewed_seconds_ago: r.lease_renewed_seconds_ago,
        last_event: r.last_event.as_ref().map(|e| JsonEvent {
            reason: &e.reason,
            type_: &e.type_,
            message: &e.message,
            seconds_ago: e.seconds_ago,
            count: e.count,
        }),
        node: r.node.as_ref().map(|n| JsonNode { name: &n.name, driver_registered: n.driver_registered }),
        capacity: r.capacity.as_deref(),
        verdict: r.verdict.as_str(),
        message: &r.message,
    }
}

/// Volumes per verdict, in the order of [`VerdictKind`].
pub fn summary(candidates: &[Candidate]) -> Vec<(VerdictKind, usize)> {
    let mut counts = std::collections::BTreeMap::<VerdictKind, usize>::new();
    for c in candidates {
        *counts.entry(c.verdict).or_default() += 1;
    }
    counts.into_iter().collect()
}

/// Volumes per verdict, those left out of the explanation's candidates included.
fn counts(e: &Explanation) -> Vec<(VerdictKind, usize)> {
    let mut all = std::collections::BTreeMap::<VerdictKind, usize>::new();
    for (k, n) in summary(&e.candidates).into_iter().chain(e.omitted.iter().copied()) {
        *all.entry(k).or_default() += n;
    }
    all.into_iter().collect()
}

/// One entry of `candidates`.
#[derive(Serialize, Debug)]
pub struct JsonCandidate<'a> {
    volume: &'a str,
    verdict: &'static str,
    detail: &'a str,
}

/// The JSON form of an explanation.
pub fn to_json(e: &Explanation) -> JsonDoc<'_> {
    JsonDoc {
        claim: &e.claim,
        phase: &e.phase,
        volume_name: e.volume_name.as_deref(),
        candidates: e
            .candidates
            .iter()
            .map(|c| JsonCandidate { volume: &c.volume, verdict: c.verdict.as_str(), detail: &c.detail })
            .collect(),
        best_match: e.best_match.as_deref(),
        next: e.next.as_str(),
        reason: e.reason,
        message: &e.message,
        hint: e.hint.as_deref(),
        steps: &e.steps,
        summary: counts(e).into_iter().map(|(k, n)| (k.as_str().to_string(), n.into())).collect(),
        provisioner: e.provisioner.as_ref().map(json_provisioner),
        candidates_not_listed: None,
    }
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn verdict(&self, v: VerdictKind, s: &str) -> String {
        match v {
            VerdictKind::Match => self.paint("32", s),
            VerdictKind::DelayBinding => self.paint("33", s),
            _ => self.paint("31", s),
        }
    }
}

fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

/// Wraps words to `width` columns, continuation lines indented by `indent` spaces.
fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split_whitespace() {
        let last = lines.last_mut().expect("one line at least");
        let len = last.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width.saturating_sub(indent) {
            lines.push(word.to_string());
        } else {
            if len > 0 {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    lines.join(&format!("\n{}", " ".repeat(indent)))
}

fn class_label(c: &str) -> String {
    if c.is_empty() {
        "\"\"".into()
    } else {
        c.to_string()
    }
}

/// The text form, [`WIDTH`] columns wide. `color` adds ANSI colours (verdicts, headings).
pub fn to_text(e: &Explanation, color: bool) -> String {
    to_text_width(e, color, WIDTH)
}

/// The text form for a terminal `width` columns wide, near misses only.
pub fn to_text_width(e: &Explanation, color: bool, width: usize) -> String {
    to_text_with(e, color, width, false)
}

/// The rows the table shows: every one with `all` or when they are no more than [`NEAR_MISSES`];
/// else matches, then volumes held by an earlier claim of this name, then those failing a rule
/// other than `claimedByOther` (each group in the explanation's order), at most [`NEAR_MISSES`].
pub(crate) fn shown(candidates: &[Candidate], all: bool) -> Vec<&Candidate> {
    // Nearest miss first: what fits, then what one change would make fit (a size, a label, a
    // mode), then another class or phase, then volumes other claims hold.
    let rank = |c: &Candidate| match c.verdict {
        VerdictKind::Match => 0,
        VerdictKind::DelayBinding => 1,
        _ if c.earlier_claim => 2,
        VerdictKind::Capacity => 3,
        VerdictKind::Selector => 4,
        VerdictKind::VolumeAttributesClass => 5,
        VerdictKind::VolumeMode => 6,
        VerdictKind::AccessModes => 7,
        VerdictKind::StorageClass => 8,
        VerdictKind::Phase | VerdictKind::BeingDeleted => 9,
        VerdictKind::ClaimedByOther => 10,
    };
    let mut rows: Vec<&Candidate> = candidates.iter().collect();
    // The bound volume (or best match) stays first: it is what the explanation is about.
    let first = rows.first().filter(|c| c.verdict == VerdictKind::Match || c.detail.starts_with("bound")).copied();
    rows.sort_by_key(|c| (!first.is_some_and(|f| std::ptr::eq(f, *c)), rank(c)));
    if all || candidates.len() <= NEAR_MISSES {
        return rows;
    }
    rows.retain(|c| rank(c) < 10);
    rows.truncate(NEAR_MISSES);
    rows
}

/// The text form for a terminal `width` columns wide; `all` lists every volume.
pub fn to_text_with(e: &Explanation, color: bool, width: usize, all: bool) -> String {
    let st = Style { on: color };
    let r = &e.request;
    let mut out = String::new();
    let volume = e.volume_name.as_deref().map(|v| format!(", volumeName {v}")).unwrap_or_default();
    out.push_str(&format!("{} {} ({}{volume})\n", st.bold("Claim:"), e.claim, e.phase));
    let class = match &r.class {
        None => "class not set".to_string(),
        Some(c) if c.is_empty() => "class \"\" (none)".to_string(),
        Some(c) => format!("class {c}"),
    };
    let mut wants = vec![r.size.clone(), r.modes.clone(), class, r.volume_mode.clone()];
    if let Some(s) = &r.selector {
        wants.push(format!("selector {s}"));
    }
    if let Some(v) = &r.attributes_class {
        wants.push(format!("attributes class {v}"));
    }
    out.push_str(&format!("{} {}\n", st.bold("Wants:"), wrap(&wants.join(", "), width, 7)));
    out.push('\n');
    if e.candidates.is_empty() {
        out.push_str("No volume to consider.\n");
    } else {
        let counts: Vec<String> = summary(&e.candidates).iter().map(|(k, n)| format!("{n} {}", k.as_str())).collect();
        if e.candidates.len() > 1 {
            let line = format!("{} ({})", e.candidates.len(), counts.join(", "));
            out.push_str(&format!("{} {}\n", st.bold("Volumes:"), wrap(&line, width, 9)));
        }
        let rows = shown(&e.candidates, all);
        if !rows.is_empty() {
            out.push_str(&table(&rows, &st, width));
        }
        let hidden: Vec<Candidate> =
            e.candidates.iter().filter(|c| !rows.iter().any(|r| std::ptr::eq(*r, *c))).cloned().collect();
        if !hidden.is_empty() {
            let counts: Vec<String> = summary(&hidden).iter().map(|(k, n)| format!("{n} {}", k.as_str())).collect();
            let line = format!("{} more not listed ({}); --all lists every volume", hidden.len(), counts.join(", "));
            out.push_str(&wrap(&line, width, 0));
            out.push('\n');
        }
    }
    if let Some(p) = &e.provisioner {
        out.push('\n');
        out.push_str(&provisioner_text(p, &st, width));
    }
    out.push('\n');
    out.push_str(&format!(
        "{} {}\n",
        st.bold("Next:"),
        wrap(&format!("{} — {}", e.next.as_str(), e.message), width, 6)
    ));
    if let Some(h) = &e.hint {
        out.push_str(&format!("{} {}\n", st.bold("Hint:"), wrap(h, width, 6)));
    }
    for (i, step) in e.steps.iter().enumerate() {
        let label = if i == 0 { st.bold("Steps:") } else { "      ".to_string() };
        out.push_str(&format!("{label} {}. {}\n", i + 1, wrap(step, width, 10)));
    }
    out
}

/// What was found about the external provisioner, one line per source.
fn provisioner_text(p: &Report, st: &Style, width: usize) -> String {
    let mut out = format!("{} {} — {}\n", st.bold("Provisioner:"), p.name, p.verdict.as_str());
    if p.verdict == crate::provisioner::Verdict::Unknown {
        return out;
    }
    let mut line = |label: &str, text: String| {
        out.push_str(&format!("  {label:<11} {}\n", wrap(&text, width, 14)));
    };
    line(
        "CSIDriver:",
        match p.csi_driver {
            Some(true) => format!("{} exists", p.name),
            Some(false) => "none of that name".into(),
            None => "not read".into(),
        },
    );
    line(
        "Lease:",
        match (&p.lease, &p.lease_holder, p.lease_renewed_seconds_ago) {
            (None, _, _) => format!("none named {} in any namespace", crate::provisioner::lease_name(&p.name)),
            (Some(l), h, a) => format!(
                "{l}, {}, renewed {}",
                h.as_deref().map_or_else(|| "held by no one".to_string(), |h| format!("held by {h}")),
                a.map_or_else(|| "never".to_string(), |a| format!("{} ago", ago(a)))
            ),
        },
    );
    line(
        "Last event:",
        match &p.last_event {
            None => "none from the provisioner on this claim".into(),
            Some(e) => format!(
                "{} {}{}{}: {}",
                e.type_,
                e.reason,
                e.seconds_ago.map(|a| format!(" {} ago", ago(a))).unwrap_or_default(),
                if e.count > 1 { format!(" (x{})", e.count) } else { String::new() },
                e.message
            ),
        },
    );
    if let Some(n) = &p.node {
        line(
            "Node:",
            match n.driver_registered {
                Some(true) => format!("{} (selected), its CSINode lists the driver", n.name),
                Some(false) => format!("{} (selected), its CSINode does not list the driver", n.name),
                None => format!("{} (selected), no CSINode", n.name),
            },
        );
    }
    if let Some(c) = &p.capacity {
        line("Capacity:", c.clone());
    }
    out
}

fn table(rows: &[&Candidate], st: &Style, width: usize) -> String {
    const HEAD: [&str; 7] = ["VOLUME", "CAPACITY", "MODES", "CLASS", "PHASE", "VERDICT", "DETAIL"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|c| {
            [
                c.volume.clone(),
                c.capacity.clone(),
                c.modes.clone(),
                class_label(&c.class),
                if c.phase.is_empty() { "-".into() } else { c.phase.clone() },
                c.verdict.as_str().to_string(),
            ]
        })
        .collect();
    let mut widths: [usize; 6] = std::array::from_fn(|i| HEAD[i].len());
    for row in &cells {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let used: usize = widths.iter().map(|w| w + 2).sum();
    let detail_width = width.saturating_sub(used).max(MIN_DETAIL);
    let mut out = String::new();
    let head: Vec<String> = (0..6).map(|i| pad(HEAD[i], widths[i])).collect();
    out.push_str(&st.bold(&format!("{}  {}", head.join("  "), HEAD[6])));
    out.push('\n');
    for (row, c) in cells.iter().zip(rows) {
        let mut line: Vec<String> = (0..5).map(|i| pad(&row[i], widths[i])).collect();
        line.push(st.verdict(c.verdict, &pad(&row[5], widths[5])));
        let detail = wrap(&c.detail, detail_width + used, used);
        out.push_str(format!("{}  {detail}", line.join("  ")).trim_end());
        out.push('\n');
    }
    out
}

/// The JSON document of `explain pod`: `pod`, `node`, `phase`, `volumes` (each `name`, `claim`,
/// `ephemeral`, `phase`, `volumeName`, `reason`, `message`), `nodes` (each `node`, `fits`,
/// `reasons`: `[{verdict, detail}]`, `uses`), `verdict`, `fittingNodes`, `next`, `message`,
/// `hint`, `scheduler` (the scheduler's latest FailedScheduling message, or null).
pub fn pod_to_json(x: &crate::PodExplanation) -> serde_json::Value {
    use serde_json::json;
    json!({
        "pod": x.pod,
        "node": x.node,
        "phase": x.phase,
        "volumes": x.volumes.iter().map(|v| json!({
            "name": v.name,
            "claim": v.claim,
            "ephemeral": v.ephemeral,
            "phase": v.phase,
            "volumeName": v.volume,
            "reason": v.reason,
            "message": v.message,
        })).collect::<Vec<_>>(),
        "nodes": x.nodes.iter().map(|n| json!({
            "node": n.node,
            "fits": n.fits,
            "reasons": n.reasons.iter().map(|(v, d)| json!({"verdict": v.as_str(), "detail": d})).collect::<Vec<_>>(),
            "uses": n.uses.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "verdict": x.verdict.as_str(),
        "fittingNodes": x.fitting_nodes,
        "next": x.next.as_str(),
        "message": x.message,
        "hint": x.hint,
        "scheduler": x.scheduler,
    })
}

/// The text form of `explain pod`, `width` columns wide.
pub fn pod_to_text(x: &crate::PodExplanation, color: bool, width: usize) -> String {
    let st = Style { on: color };
    let mut out = String::new();
    let placed = match &x.node {
        Some(n) => format!("on node {n}"),
        None => "not scheduled".to_string(),
    };
    out.push_str(&format!("{} {} ({}, {placed})\n\n", st.bold("Pod:"), x.pod, x.phase));
    if x.volumes.is_empty() {
        out.push_str("The pod has no volume backed by a claim.\n");
    } else {
        let rows: Vec<[String; 5]> = x
            .volumes
            .iter()
            .map(|v| {
                let claim = if v.ephemeral { format!("{} (ephemeral)", v.claim) } else { v.claim.clone() };
                [
                    v.name.clone(),
                    claim,
                    v.phase.clone(),
                    v.volume.clone().unwrap_or_else(|| "-".into()),
                    v.reason.clone(),
                ]
            })
            .collect();
        out.push_str(&simple_table(&["VOLUME", "CLAIM", "PHASE", "PV", "STATE"], &rows, &st));
    }
    if !x.nodes.is_empty() {
        out.push('\n');
        let fits = x.nodes.iter().filter(|n| n.fits).count();
        out.push_str(&format!("{} {} of {} fit\n", st.bold("Nodes:"), fits, x.nodes.len()));
        let shown: Vec<&crate::pod::NodeFit> = x.nodes.iter().take(NEAR_MISSES * 2).collect();
        let name_w = shown.iter().map(|n| n.node.chars().count()).max().unwrap_or(4).max(4);
        out.push_str(&st.bold(&format!("{}  FITS  WHY", pad("NODE", name_w))));
        out.push('\n');
        for n in &shown {
            let why = if !n.reasons.is_empty() {
                n.reasons.iter().map(|(_, d)| d.as_str()).collect::<Vec<_>>().join("; ")
            } else if n.uses.is_empty() {
                "-".to_string()
            } else {
                format!("uses {}", n.uses.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
            };
            let fit = if n.fits { st.paint("32", "yes ") } else { st.paint("31", "no  ") };
            out.push_str(&format!("{}  {fit}  {}\n", pad(&n.node, name_w), wrap(&why, width, name_w + 8)));
        }
        if x.nodes.len() > shown.len() {
            out.push_str(&format!("{} more nodes not listed; -o json lists every node\n", x.nodes.len() - shown.len()));
        }
    }
    if let Some(m) = &x.scheduler {
        out.push('\n');
        out.push_str(&format!("{} {}\n", st.bold("Scheduler:"), wrap(m, width, 11)));
    }
    out.push('\n');
    out.push_str(&format!(
        "{} {}\n",
        st.bold("Verdict:"),
        wrap(&format!("{} — {}", x.verdict.as_str(), x.message), width, 9)
    ));
    let nodes = if x.fitting_nodes.is_empty() { "none".to_string() } else { x.fitting_nodes.join(", ") };
    out.push_str(&format!("{} {}\n", st.bold("Fitting nodes:"), wrap(&nodes, width, 15)));
    out.push_str(&format!("{} {}\n", st.bold("Next:"), x.next.as_str()));
    if let Some(h) = &x.hint {
        out.push_str(&format!("{} {}\n", st.bold("Hint:"), wrap(h, width, 6)));
    }
    out
}

fn simple_table<const N: usize>(head: &[&str; N], rows: &[[String; N]], st: &Style) -> String {
    let mut widths: [usize; N] = std::array::from_fn(|i| head[i].len());
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line =
        |cells: Vec<String>| cells.iter().enumerate().map(|(i, c)| pad(c, widths[i])).collect::<Vec<_>>().join("  ");
    let mut out = st.bold(line(head.iter().map(|h| h.to_string()).collect()).trim_end());
    out.push('\n');
    for row in rows {
        out.push_str(line(row.to_vec()).trim_end());
        out.push('\n');
    }
    out
}

/// The JSON form of `explain pvc -A`: a list of the single-claim documents, worst reason first.
/// Each claim lists its matches and nearest misses as the text table does (at most
/// [`NEAR_MISSES`]), and `candidatesNotListed` counts the rest: a thousand claims over a thousand
/// volumes would otherwise be a million entries.
pub fn list_to_json(l: &crate::ClaimList) -> Vec<JsonDoc<'_>> {
    l.claims
        .iter()
        .map(|e| {
            let mut doc = to_json(e);
            doc.candidates_not_listed = Some(e.omitted.iter().map(|(_, n)| n).sum());
            doc
        })
        .collect()
}

/// The text form of `explain pvc -A`: one group per reason, worst first, one line per claim (its
/// message, wrapped), and a summary line.
pub fn list_to_text(l: &crate::ClaimList, color: bool, width: usize) -> String {
    let st = Style { on: color };
    let mut out = String::new();
    if l.claims.is_empty() {
        out.push_str("Every claim is Bound.\n");
        return out;
    }
    let mut i = 0;
    while i < l.claims.len() {
        let reason = l.claims[i].reason;
        let group: Vec<&Explanation> = l.claims[i..].iter().take_while(|e| e.reason == reason).collect();
        i += group.len();
        out.push_str(&st.bold(&format!("{reason} ({})", group.len())));
        out.push('\n');
        let name_w = group.iter().map(|e| e.claim.chars().count()).max().unwrap_or(0);
        for e in group {
            let mut text = e.message.clone();
            if let Some(p) = &e.provisioner {
                text = format!("[provisioner {}] {text}", p.verdict.as_str());
            }
            out.push_str(&format!("  {}  {}\n", pad(&e.claim, name_w), wrap(&text, width, name_w + 4)));
        }
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for e in &l.claims {
        match counts.iter_mut().find(|(r, _)| r == e.reason) {
            Some((_, n)) => *n += 1,
            None => counts.push((e.reason.to_string(), 1)),
        }
    }
    let parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    out.push_str(&format!("\n{} claims not Bound: {}\n", l.claims.len(), parts.join(", ")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(volume: &str, detail: &str) -> Candidate {
        Candidate {
            volume: volume.into(),
            verdict: VerdictKind::Capacity,
            detail: detail.into(),
            capacity: "1Gi".into(),
            modes: "RWO".into(),
            class: "a-rather-long-storage-class-name".into(),
            phase: "Available".into(),
            earlier_claim: false,
        }
    }

    #[test]
    fn the_table_never_cuts_names_or_details_it_wraps_them_in_their_column() {
        let long_name = "pvc-0f3c2a9e-5b7d-4c1e-9a8b-123456789abc-with-a-suffix";
        let detail = "capacity 1Gi is less than the 10Gi the claim requests, and some more words to wrap";
        for width in [60, 100, 220] {
            let t = table(&[&row(long_name, detail), &row("b", "short")], &Style { on: false }, width);
            assert!(t.contains(long_name), "{t}");
            assert!(t.contains("a-rather-long-storage-class-name"), "{t}");
            let words: Vec<&str> = t.split_whitespace().collect();
            for w in detail.split_whitespace() {
                assert!(words.contains(&w), "{w:?} missing at width {width}:\n{t}");
            }
            let col = t.lines().next().unwrap().find("DETAIL").unwrap();
            for line in t.lines().skip(1).filter(|l| l.starts_with(' ')) {
                assert_eq!(line.len() - line.trim_start().len(), col, "continuation in the DETAIL column:\n{t}");
            }
        }
        let wide = table(&[&row(long_name, detail)], &Style { on: false }, 220);
        assert_eq!(wide.lines().count(), 2, "one row when the terminal is wide enough:\n{wide}");
    }

    #[test]
    fn wrap_keeps_lines_within_the_width() {
        let text = "word ".repeat(50);
        for line in wrap(&text, 40, 4).lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
        }
    }
}
