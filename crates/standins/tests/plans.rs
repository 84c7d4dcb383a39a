//! The stand-ins' plans over cluster states: every `tests/standins/*.yaml` at the workspace root
//! holds objects (as `simulate` and `explain -f` take them, CSI kinds included) and, next to it,
//! `NAME.steps`, the steps the scheduler and attach-detach stand-ins plan for it, one per line
//! (`UPDATE_GOLDEN=1` rewrites them). The comment at the top of each file says why.

use pv_explain::Snapshot;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/standins");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

fn steps(text: &str) -> String {
    let loaded = pv_sim::load(text).expect("fixture parses");
    let mut s = Snapshot::from_input(loaded.objects).expect("fixture loads");
    s.add_others(loaded.others).expect("fixture's other objects decode");
    let now = "2030-01-01T12:00:00Z".parse().unwrap();
    let mut out = String::new();
    for step in pv_standins::schedule::plan(&s, now) {
        out.push_str(&format!("scheduler: {step}\n"));
    }
    for step in pv_standins::attach::plan(&s, &BTreeSet::new()) {
        out.push_str(&format!("attachdetach: {step}\n"));
    }
    out
}

#[test]
fn every_fixture_plans_its_steps() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 8, "tests/standins holds {} fixtures", fixtures.len());
    let mut failures = Vec::new();
    for path in fixtures {
        let actual = steps(&std::fs::read_to_string(&path).unwrap());
        let golden = path.with_extension("steps");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&golden, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&golden) {
            Ok(want) if want == actual => {}
            Ok(want) => failures.push(format!("{}:\n--- expected\n{want}--- actual\n{actual}", path.display())),
            Err(e) => failures.push(format!("{}: {e} (UPDATE_GOLDEN=1 writes it)", golden.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn attachment_names_are_kcms() {
    // KCM's: "csi-" and the hex SHA-256 of handle, driver and node, concatenated (sha256sum of "hdn").
    assert_eq!(
        pv_standins::attach::attachment_name("h", "d", "n"),
        "csi-9072ed11cc1acb5fa433a877ff339b6311d013f33bddd1d0092711a8ace5b16d"
    );
}
