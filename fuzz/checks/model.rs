//! What the model's fuzz target checks, shared by `cargo fuzz` and by the stable regression test
//! that replays the kept corpus (`crates/model/tests/fuzz_corpus.rs`).
//!
//! [`quantity`]: any string parses to a quantity or to an error, never a panic; a parsed one
//! prints in a form that parses back to the same value, and its whole-unit value never rounds
//! below it. [`label_selector`]: any JSON that decodes as a `LabelSelector` is validated and
//! matched without panicking, and only a valid one matches.

#![allow(dead_code)]

use pv_model::k8s::LabelSelector;
use pv_model::{selector, Quantity};
use std::collections::BTreeMap;

/// A quantity string.
pub fn quantity(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let Ok(q) = Quantity::parse(s) else { return };
    let printed = q.to_string();
    let back = Quantity::parse(&printed).unwrap_or_else(|e| panic!("{s:?} prints as {printed:?}, which fails: {e}"));
    assert_eq!(back, q, "{s:?} prints as {printed:?}, which parses to another value");
    assert!(q.value() * 1_000_000_000 >= q.nanos(), "{s:?}: value() rounds down");
    let _ = q.is_positive();
}

/// A `LabelSelector` as JSON, matched against a few label sets.
pub fn label_selector(data: &[u8]) {
    let Ok(sel) = serde_json::from_slice::<LabelSelector>(data) else { return };
    let valid = selector::validate(&sel).is_ok();
    let _ = selector::describe(&sel);
    let sets: [Option<BTreeMap<String, String>>; 3] = [
        None,
        Some(BTreeMap::new()),
        Some([("app".to_string(), "a".to_string()), ("tier".to_string(), String::new())].into()),
    ];
    for labels in &sets {
        let r = selector::matches(&sel, labels.as_ref());
        assert_eq!(r.is_ok(), valid, "validate and matches disagree on {sel:?}");
    }
}

/// The `model` target: the first byte chooses a quantity string (even) or a selector (odd).
pub fn model(data: &[u8]) {
    match data.split_first() {
        Some((b, rest)) if b % 2 == 0 => quantity(rest),
        Some((_, rest)) => label_selector(rest),
        None => {}
    }
}
