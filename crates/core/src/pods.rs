//! Pods by the claims they name: the one index the binder (which pods use a claim, which wait
//! for it) and the protection controllers (which claims a pod's change concerns) share.

use pv_model::ObjectKey;
use std::collections::{BTreeSet, HashMap};

/// Pods by key, each as its user keeps it (`P`), and the keys of the pods that name each claim
/// (`namespace/name`, the claim in the pod's namespace).
pub struct PodIndex<P> {
    by_key: HashMap<ObjectKey, (P, Vec<ObjectKey>)>,
    by_claim: HashMap<ObjectKey, BTreeSet<ObjectKey>>,
}

impl<P> Default for PodIndex<P> {
    fn default() -> Self {
        PodIndex { by_key: HashMap::new(), by_claim: HashMap::new() }
    }
}

impl<P> PodIndex<P> {
    /// Records the pod at `key`, naming the claims `claims` (names in its namespace), or forgets
    /// it (`None`). Returns the claims it named before and names now, sorted, each once: a pod
    /// made again under its name may name others.
    pub fn set(&mut self, key: &ObjectKey, pod: Option<(P, Vec<String>)>) -> Vec<ObjectKey> {
        let mut touched = Vec::new();
        if let Some((_, old)) = self.by_key.remove(key) {
            for claim in old {
                if let Some(set) = self.by_claim.get_mut(&claim) {
                    set.remove(key);
                    if set.is_empty() {
                        self.by_claim.remove(&claim);
                    }
                }
                touched.push(claim);
            }
        }
        if let Some((pod, names)) = pod {
            let claims: Vec<ObjectKey> = names.iter().map(|c| ObjectKey::new(key.namespace(), c)).collect();
            for claim in &claims {
                self.by_claim.entry(claim.clone()).or_default().insert(key.clone());
                touched.push(claim.clone());
            }
            self.by_key.insert(key.clone(), (pod, claims));
        }
        touched.sort();
        touched.dedup();
        touched
    }

    /// The pods that name the claim with this key, in the order of their keys.
    pub fn using<'a>(&'a self, claim: &str) -> impl Iterator<Item = &'a P> + 'a {
        self.by_claim.get(claim).into_iter().flatten().filter_map(|k| self.by_key.get(k).map(|(p, _)| p))
    }

    /// True when no pod is recorded.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty() && self.by_claim.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_found_by_each_claim_it_names_until_it_names_others() {
        let mut pods = PodIndex::default();
        let (p, q) = (ObjectKey::new("ns", "p"), ObjectKey::new("ns", "q"));
        let claim = |n: &str| ObjectKey::new("ns", n);
        assert_eq!(pods.set(&q, Some(("q", vec!["a".into()]))), [claim("a")]);
        assert_eq!(pods.set(&p, Some(("p", vec!["b".into(), "a".into()]))), [claim("a"), claim("b")]);
        assert_eq!(pods.using("ns/a").copied().collect::<Vec<_>>(), ["p", "q"], "in the order of the pods' keys");
        // Made again under its name with another claim: both are touched.
        assert_eq!(pods.set(&p, Some(("p2", vec!["c".into()]))), [claim("a"), claim("b"), claim("c")]);
        assert_eq!(pods.using("ns/a").copied().collect::<Vec<_>>(), ["q"]);
        assert_eq!(pods.using("ns/b").count(), 0);
        assert_eq!(pods.using("other/c").count(), 0, "a claim is in its pod's namespace");
        assert_eq!(pods.set(&p, None), [claim("c")]);
        assert_eq!(pods.set(&q, None), [claim("a")]);
        assert!(pods.is_empty(), "nothing is kept of pods gone");
    }
}
