//! Prints the built-in resources `pv-controller up` serves, one JSON object per line
//! (`group`, `version`, `kind`, `plural`, `namespaced`), in discovery's order: what the schema
//! generators (`scripts/gen-openapi.py`, `scripts/gen-patch-strategies.py`,
//! `conformance/protoclient/schema`) cut upstream's schemas down to, so that a kind added to the
//! store's registry reaches them with no edit.
//!
//!     cargo run -q -p pv-apiserver --example served

use pv_apiserver::resources;

fn main() {
    for (group, version) in resources::built_in_group_versions() {
        for s in resources::built_in().into_iter().filter(|s| s.group == group && s.version == version) {
            let line = serde_json::json!({
                "group": s.group,
                "version": s.version,
                "kind": s.kind(),
                "plural": s.plural(),
                "namespaced": s.rt.namespaced,
            });
            println!("{line}");
        }
    }
}
