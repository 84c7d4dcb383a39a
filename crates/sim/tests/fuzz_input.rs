//! Randomized input for the parser behind `simulate` and `explain`: arbitrary text and mutations
//! of valid manifests must give an answer (objects or a located error), never a panic.
//! `PV_PROPTEST_CASES` raises the number of cases for a longer run.

use proptest::prelude::*;

const VALID: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1, labels: {a: b}}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], claimRef: {namespace: d, name: c}, hostPath: {path: /tmp/x}}\nstatus: {phase: Bound}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, namespace: d}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, selector: {matchExpressions: [{key: a, operator: In, values: [b]}]}}\n";

fn cases() -> u32 {
    std::env::var("PV_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = pv_sim::load_documents(&text);
    }

    #[test]
    fn mutated_manifests_never_panic_and_errors_are_located(pos in 0usize..VALID.len(), len in 0usize..12, insert in "[-:{}\\[\\],a-zA-Z0-9 .\"'\n]{0,12}") {
        let mut text = VALID.to_string();
        let start = pos.min(text.len());
        let end = (start + len).min(text.len());
        if text.is_char_boundary(start) && text.is_char_boundary(end) {
            text.replace_range(start..end, &insert);
        }
        if let Err(e) = pv_sim::load_documents(&text) {
            let msg = e.to_string();
            prop_assert!(!msg.is_empty());
            prop_assert!(msg.starts_with("document ") || e.document == 0, "{msg}");
        }
    }
}
