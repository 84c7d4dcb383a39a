//! Printing an [`Explanation`]: JSON for scripts (the format the README documents), text for people.
//!
//! The text form is built to be read at a glance in a terminal (100 columns when the width is not
//! known): two header lines with what the claim asks for, one table row per volume, then what
//! happens next and what the user could change. Nothing is ever cut: names take the room they
//! need and a DETAIL longer than the room left wraps onto lines of its own in its column. Colour is opt-in by the caller, who knows
//! whether stdout is a terminal.

use crate::analyze::{Candidate, Explanation};
use pv_model::VerdictKind;
use serde::Serialize;

/// The width the text output fits in when the terminal's is not known.
pub const WIDTH: usize = 100;

/// The narrowest DETAIL column: below it, wrapped lines would hold a word or two.
const MIN_DETAIL: usize = 24;

/// The JSON document the README documents, keys in the documented order: `claim`, `phase`,
/// `volumeName`, `candidates` (each `volume`, `verdict`, `detail`), `bestMatch`, `next`,
/// `message`. Serialize it with `serde_json`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct JsonDoc<'a> {
    claim: &'a str,
    phase: &'a str,
    volume_name: Option<&'a str>,
    candidates: Vec<JsonCandidate<'a>>,
    best_match: Option<&'a str>,
    next: &'static str,
    message: &'a str,
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
        message: &e.message,
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

/// The text form for a terminal `width` columns wide.
pub fn to_text_width(e: &Explanation, color: bool, width: usize) -> String {
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
        out.push_str(&table(&e.candidates, &st, width));
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
    out
}

fn table(rows: &[Candidate], st: &Style, width: usize) -> String {
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
        }
    }

    #[test]
    fn the_table_never_cuts_names_or_details_it_wraps_them_in_their_column() {
        let long_name = "pvc-0f3c2a9e-5b7d-4c1e-9a8b-123456789abc-with-a-suffix";
        let detail = "capacity 1Gi is less than the 10Gi the claim requests, and some more words to wrap";
        for width in [60, 100, 220] {
            let t = table(&[row(long_name, detail), row("b", "short")], &Style { on: false }, width);
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
        let wide = table(&[row(long_name, detail)], &Style { on: false }, 220);
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
