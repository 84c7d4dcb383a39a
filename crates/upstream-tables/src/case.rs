//! A recorded case, as conformance/upstream-tables writes it (one JSON file per case).

use serde::Deserialize;
use serde_json::Value;

/// One case of upstream's tables.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Case {
    /// Upstream's test (and subtest) name.
    pub test: String,
    /// The case's own name.
    pub name: String,
    /// How upstream runs it: `sync` (one sync), `multisync` (syncs until nothing changes),
    /// `controller` (the running controller, fed API changes), `index` (one volume search),
    /// `check` (one matching check).
    pub run: String,
    /// The sync a `sync` or `multisync` case performs first.
    #[serde(default)]
    pub sync: Option<SyncCall>,
    #[serde(default)]
    pub classes: Vec<Value>,
    #[serde(default)]
    pub pods: Vec<Value>,
    #[serde(default)]
    pub initial_volumes: Vec<Value>,
    #[serde(default)]
    pub initial_claims: Vec<Value>,
    #[serde(default)]
    pub expected_volumes: Vec<Value>,
    #[serde(default)]
    pub expected_claims: Vec<Value>,
    /// Each a prefix of the event upstream's fake recorder must see, in order: `Type Reason [Message]`.
    #[serde(default)]
    pub expected_events: Vec<String>,
    /// API errors to inject, each once, on the first request that matches.
    #[serde(default)]
    pub errors: Vec<ReactorError>,
    /// The volume plugin's answers; none: the controller has no plugin at all.
    #[serde(default)]
    pub plugin: Option<PluginAnswers>,
    /// Upstream's fake CSI migration of the mock plugin.
    #[serde(default)]
    pub csi_migration: bool,
    /// What changes between the sync's decision and its operation's start.
    #[serde(default)]
    pub injection: Option<Injection>,
    /// API changes a `controller` case makes once the controller runs.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Upstream's verdict on its own controller.
    #[serde(default)]
    pub upstream_passed: bool,
    // `index` cases.
    #[serde(default)]
    pub volumes: Vec<Value>,
    #[serde(default)]
    pub claim: Option<Value>,
    #[serde(default)]
    pub delay_binding: bool,
    #[serde(default)]
    pub found: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    // `check` cases: one call of a matching check.
    /// `volumeMode` (true: the modes mismatch), `accessModes` (true: the volume has every mode
    /// the claim asks for), `migrationAnnotations` (true: changed) or `deletionFinalizers` (true:
    /// changed).
    #[serde(default)]
    pub check: String,
    #[serde(default)]
    pub volume: Option<Value>,
    /// Upstream's answer.
    #[serde(default)]
    pub result: bool,
    /// `migrationAnnotations`: the annotations before and after, and whether they are a claim's.
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub after: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub is_claim: bool,
    /// `deletionFinalizers`: the finalizers upstream returns.
    #[serde(default)]
    pub finalizers: Option<Vec<String>>,
}

/// The first sync.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncCall {
    /// `claim` or `volume`.
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    /// Upstream's test expects the sync to return an error.
    pub expect_error: bool,
}

/// An error upstream's fake API server answers once.
#[derive(Debug, Deserialize, Clone)]
pub struct ReactorError {
    pub verb: String,
    pub resource: String,
    pub message: String,
    /// The API status reason, when the error is a status error.
    #[serde(default)]
    pub reason: String,
}

/// What the mock plugin answers, call by call (`null`: success).
#[derive(Debug, Deserialize, Clone, Default)]
pub struct PluginAnswers {
    #[serde(default)]
    pub recycle: Vec<Option<String>>,
    #[serde(default)]
    pub delete: Vec<Option<String>>,
    #[serde(default)]
    pub provision: Vec<ProvisionAnswer>,
}

/// One provisioning call: the parameters it must get, and its error.
#[derive(Debug, Deserialize, Clone)]
pub struct ProvisionAnswer {
    #[serde(default)]
    pub parameters: Option<std::collections::BTreeMap<String, String>>,
    pub error: Option<String>,
}

/// Changes made while an operation waits to start.
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Injection {
    #[serde(default)]
    pub volumes: Vec<Value>,
    #[serde(default)]
    pub delete_volumes: Vec<String>,
    #[serde(default)]
    pub claims: Vec<Value>,
    #[serde(default)]
    pub delete_claims: Vec<String>,
    /// Reach only the controller's cache.
    #[serde(default)]
    pub cache_claims: Vec<Value>,
    #[serde(default)]
    pub cache_volumes: Vec<Value>,
    #[serde(default)]
    pub nodes: Vec<Value>,
}

/// An API change of a `controller` case.
#[derive(Debug, Deserialize)]
pub struct Action {
    /// `add-claim`, `delete-claim` or `delete-volume`.
    pub op: String,
    pub object: Value,
}

/// A name kube-apiserver accepts for `name`: upstream's fake API server takes any name
/// (`volume1-4_1`, `completedClaim`); lowercase, with `-` for `_`.
fn valid_name(name: &str) -> String {
    name.to_lowercase().replace('_', "-")
}

fn collect_names(objects: &[Value], out: &mut std::collections::BTreeMap<String, String>) {
    for o in objects {
        if let Some(n) = o.pointer("/metadata/name").and_then(Value::as_str) {
            if valid_name(n) != n {
                out.insert(n.to_string(), valid_name(n));
            }
        }
    }
}

fn rename(v: &mut Value, names: &std::collections::BTreeMap<String, String>) {
    match v {
        Value::String(s) => {
            for (from, to) in names {
                if s.contains(from.as_str()) {
                    *s = s.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rename(x, names)),
        Value::Object(m) => {
            // An annotation with an empty key (`newClaim(..., "")` in upstream's tables) is one
            // no API server stores.
            if let Some(Value::Object(ann)) = m.get_mut("annotations") {
                ann.remove("");
            }
            m.values_mut().for_each(|x| rename(x, names));
        }
        _ => {}
    }
}

impl Case {
    /// The case with the objects' names made ones kube-apiserver accepts, everywhere they
    /// appear (claim references, volume names, messages), and annotations with an empty key
    /// dropped: upstream's fake API server validates nothing, this controller's store does as
    /// kube-apiserver does. Returns the names changed.
    pub fn make_valid(&mut self) -> Vec<(String, String)> {
        let mut names = std::collections::BTreeMap::new();
        for list in [&self.initial_volumes, &self.initial_claims, &self.expected_volumes, &self.expected_claims] {
            collect_names(list, &mut names);
        }
        for list in [
            &mut self.initial_volumes,
            &mut self.initial_claims,
            &mut self.expected_volumes,
            &mut self.expected_claims,
            &mut self.pods,
            &mut self.volumes,
        ] {
            list.iter_mut().for_each(|v| rename(v, &names));
        }
        for v in self.claim.iter_mut().chain(self.volume.iter_mut()) {
            rename(v, &names);
        }
        if let Some(s) = self.sync.as_mut() {
            if let Some(n) = names.get(&s.name) {
                s.name = n.clone();
            }
        }
        for a in &mut self.actions {
            rename(&mut a.object, &names);
        }
        for e in &mut self.expected_events {
            for (from, to) in &names {
                *e = e.replace(from.as_str(), to);
            }
        }
        if let Some(inj) = self.injection.as_mut() {
            for list in [&mut inj.volumes, &mut inj.claims, &mut inj.cache_claims, &mut inj.cache_volumes] {
                list.iter_mut().for_each(|v| rename(v, &names));
            }
            for n in inj.delete_volumes.iter_mut().chain(inj.delete_claims.iter_mut()) {
                if let Some(to) = names.get(n.as_str()) {
                    *n = to.clone();
                }
            }
        }
        names.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_an_api_server_refuses_are_made_valid_everywhere() {
        let mut case: Case = serde_json::from_value(json!({
            "test": "TestSync/x", "name": "x", "run": "sync",
            "sync": {"kind": "volume", "name": "volume1-4_1", "expectError": false},
            "initialVolumes": [{"metadata": {"name": "volume1-4_1"}, "spec": {"claimRef": {"name": "completedClaim"}}}],
            "initialClaims": [{"metadata": {"name": "completedClaim", "annotations": {"": "yes", "a": "b"}}, "spec": {"volumeName": "volume1-4_1"}}],
            "expectedEvents": ["Normal X volume1-4_1"],
        }))
        .unwrap();
        let renamed = case.make_valid();
        assert_eq!(renamed.len(), 2);
        assert_eq!(case.sync.as_ref().unwrap().name, "volume1-4-1");
        assert_eq!(case.initial_volumes[0]["spec"]["claimRef"]["name"], "completedclaim");
        assert_eq!(case.initial_claims[0]["spec"]["volumeName"], "volume1-4-1");
        assert_eq!(case.initial_claims[0]["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(case.expected_events, vec!["Normal X volume1-4-1"]);
    }
}
