//! `pv-upstream-tables DIR`: replays each case upstream's PersistentVolume controller unit-test
//! tables recorded into DIR (conformance/upstream-tables, run by
//! scripts/e2e-upstream-tables.sh) through this controller, and compares objects and events as
//! upstream's test does.
//!
//! Prints a line per case (`same`, `differ` with what differs, `not applicable` with why) and,
//! last, `N same, M differ, K not applicable`. `--listed FILE`: the cases known to differ, one
//! list item (`- ` and the case's name in backquotes) of FILE's section "Upstream's unit-test
//! tables" (conformance/DIFFERENCES.md); exits 1 when a case differs that FILE
//! does not list, or FILE lists a case that is the same. Exits 2 when DIR holds no case.

mod case;
mod compare;
mod inject;
mod mock;
mod replay;

use replay::Verdict;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

/// The heading of the section of conformance/DIFFERENCES.md that lists these cases.
const SECTION: &str = "## Upstream's unit-test tables";

fn listed(path: &str) -> Result<BTreeSet<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let Some(start) = text.find(SECTION) else {
        return Err(format!("{path} has no section \"{SECTION}\""));
    };
    let section = &text[start + SECTION.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    // Entries under "### Fixed" record what was found and fixed: they excuse nothing.
    let section = &section[..section.find("\n### Fixed").unwrap_or(section.len())];
    Ok(section
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .filter(|n| n.starts_with("Test"))
        .collect())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut dir, mut list) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--listed" => list = it.next().cloned(),
            _ if dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => {
                eprintln!("usage: pv-upstream-tables DIR [--listed FILE]");
                return ExitCode::from(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: pv-upstream-tables DIR [--listed FILE]");
        return ExitCode::from(2);
    };
    let known = match list.as_deref().map(listed).transpose() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("pv-upstream-tables: {e}");
            return ExitCode::from(2);
        }
    };
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        }
        Err(e) => {
            eprintln!("pv-upstream-tables: {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    files.sort();
    if files.is_empty() {
        eprintln!("pv-upstream-tables: no case in {}", dir.display());
        return ExitCode::from(2);
    }
    let (mut same, mut differ, mut na) = (0, 0, 0);
    let mut unlisted = Vec::new();
    let mut seen = BTreeSet::new();
    for f in &files {
        let mut case: case::Case = match std::fs::read(f)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pv-upstream-tables: {}: {e}", f.display());
                return ExitCode::from(2);
            }
        };
        let id = if case.run == "index" { format!("{}/{}", case.test, case.name) } else { case.test.clone() };
        seen.insert(id.clone());
        case.make_valid();
        if !matches!(case.run.as_str(), "index" | "check") && !case.upstream_passed {
            println!("note: upstream's own controller failed {id} in this run");
        }
        match replay::replay(&case).await {
            Verdict::Same => {
                same += 1;
                println!("same {id}");
                if known.as_ref().is_some_and(|k| k.contains(&id)) {
                    unlisted.push(format!("{id} is listed as differing but is the same"));
                }
            }
            Verdict::Differ(what) => {
                differ += 1;
                let mark = if known.as_ref().is_some_and(|k| !k.contains(&id)) {
                    unlisted.push(format!("{id} differs and is not listed"));
                    " (not listed)"
                } else {
                    ""
                };
                println!("differ {id}{mark}");
                for w in what.iter().take(8) {
                    println!("    {w}");
                }
            }
            Verdict::NotApplicable(why) => {
                na += 1;
                println!("not applicable {id}: {why}");
            }
        }
    }
    if let Some(k) = &known {
        unlisted.extend(k.iter().filter(|n| !seen.contains(*n)).map(|n| format!("{n} is listed but was not recorded")));
    }
    for u in &unlisted {
        println!("FAIL: {u}");
    }
    println!("{same} same, {differ} differ, {na} not applicable");
    if unlisted.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
