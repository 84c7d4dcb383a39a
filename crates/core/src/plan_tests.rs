//! The plans' branches, each from a handful of objects.
use super::*;
use crate::plugin::PluginRegistry;
use crate::view::Objects;
use pv_model::k8s::Pod;
use serde_json::json;

fn pv(v: serde_json::Value) -> PersistentVolume {
    let mut base = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
    merge(&mut base, v);
    serde_json::from_value(base).unwrap()
}

fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
    let mut base =
        json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
    merge(&mut base, v);
    serde_json::from_value(base).unwrap()
}

/// Merges `b` into `a`, objects key by key (the test objects' builders).
pub(crate) fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn claimed(phase: &str) -> PersistentVolume {
    pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}}, "status": {"phase": phase}}))
}

#[test]
fn a_volume_without_claim_ref_is_unused_and_looks_nothing_up() {
    let v = pv(json!({}));
    assert_eq!(claim_lookup(&v), ClaimLookup::None);
    assert_eq!(plan_volume(&v, None), VolumePlan::Unused);
}

#[test]
fn a_claim_ref_without_uid_is_a_user_pre_binding() {
    let v = pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1"}}}));
    assert_eq!(claim_lookup(&v), ClaimLookup::None);
    assert_eq!(plan_volume(&v, Some(&Arc::new(pvc(json!({}))))), VolumePlan::PreBound);
}

#[test]
fn the_lookup_asks_the_api_server_only_while_the_volume_is_not_released() {
    let want = |ask_api| ClaimLookup::Claim { namespace: "ns".into(), name: "c1".into(), uid: "u1".into(), ask_api };
    assert_eq!(claim_lookup(&claimed("Bound")), want(true));
    assert_eq!(claim_lookup(&claimed("Pending")), want(true));
    assert_eq!(claim_lookup(&claimed("Released")), want(false));
    assert_eq!(claim_lookup(&claimed("Failed")), want(false));
}

#[test]
fn a_gone_claim_releases_the_volume_once() {
    assert_eq!(plan_volume(&claimed("Bound"), None), VolumePlan::Release { mark_released: true });
    assert_eq!(plan_volume(&claimed("Released"), None), VolumePlan::Release { mark_released: false });
    assert_eq!(plan_volume(&claimed("Failed"), None), VolumePlan::Release { mark_released: false });
}

#[test]
fn a_claim_of_the_same_name_with_another_uid_is_gone() {
    let other = pvc(json!({"metadata": {"uid": "u2"}, "spec": {"volumeName": "pv1"}}));
    assert_eq!(
        plan_volume(&claimed("Bound"), Some(&Arc::new(other.clone()))),
        VolumePlan::Release { mark_released: true }
    );
}

#[test]
fn an_unbound_claim_is_queued_unless_its_volume_mode_differs() {
    let c = pvc(json!({}));
    assert_eq!(
        plan_volume(&claimed("Available"), Some(&Arc::new(c.clone()))),
        VolumePlan::QueueClaim(ObjectKey::new("ns", "c1"))
    );
    let block = pvc(json!({"spec": {"volumeMode": "Block"}}));
    assert_eq!(
        plan_volume(&claimed("Available"), Some(&Arc::new(block.clone()))),
        VolumePlan::VolumeModeMismatch(Arc::new(block))
    );
}

#[test]
fn a_claim_bound_to_the_volume_makes_it_bound() {
    let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
    assert_eq!(plan_volume(&claimed("Available"), Some(&Arc::new(c.clone()))), VolumePlan::Bound);
    assert_eq!(plan_volume(&claimed("Bound"), Some(&Arc::new(c.clone()))), VolumePlan::Bound);
}

#[test]
fn a_claim_bound_elsewhere_deletes_an_unneeded_provisioned_volume_and_unbinds_any_other() {
    let c = pvc(json!({"spec": {"volumeName": "pv2"}}));
    let provisioned = |policy: &str, phase: &str| {
        pv(json!({"metadata": {"annotations": {ann::PROVISIONED_BY: "kubernetes.io/host-path"}},
                  "spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}, "persistentVolumeReclaimPolicy": policy},
                  "status": {"phase": phase}}))
    };
    assert_eq!(
        plan_volume(&provisioned("Delete", "Bound"), Some(&Arc::new(c.clone()))),
        VolumePlan::DeleteUnneeded { mark_released: true }
    );
    assert_eq!(
        plan_volume(&provisioned("Delete", "Released"), Some(&Arc::new(c.clone()))),
        VolumePlan::DeleteUnneeded { mark_released: false }
    );
    assert_eq!(plan_volume(&provisioned("Retain", "Bound"), Some(&Arc::new(c.clone()))), VolumePlan::Unbind);
    assert_eq!(plan_volume(&claimed("Bound"), Some(&Arc::new(c.clone()))), VolumePlan::Unbind);
}

#[test]
fn a_bound_claim_without_volume_name_or_volume_is_lost() {
    assert!(matches!(plan_bound_claim(&pvc(json!({})), None), BoundClaimPlan::LostReference));
    let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
    assert!(matches!(plan_bound_claim(&c, None), BoundClaimPlan::LostVolume));
}

#[test]
fn a_bound_claim_rebinds_an_unclaimed_volume_keeps_its_own_and_is_misbound_to_another_claims() {
    let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
    assert!(matches!(plan_bound_claim(&c, Some(Arc::new(pv(json!({}))))), BoundClaimPlan::Rebind(_)));
    assert!(matches!(plan_bound_claim(&c, Some(Arc::new(claimed("Bound")))), BoundClaimPlan::KeepBound(_)));
    let other = pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u2"}}}));
    assert!(matches!(plan_bound_claim(&c, Some(Arc::new(other))), BoundClaimPlan::Misbound(_)));
}

// --- the unbound claim ----------------------------------------------------------------------

/// A plugin that only answers to its name (the plan looks plugins up; it never calls them).
struct Named(&'static str);

#[async_trait::async_trait]
impl VolumePlugin for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn can_provision(&self) -> bool {
        true
    }
    fn supports_mount_options(&self) -> bool {
        false
    }
    fn can_support(&self, _: &PersistentVolume) -> bool {
        false
    }
    fn can_delete(&self) -> bool {
        true
    }
    fn can_recycle(&self) -> bool {
        false
    }
    async fn provision(
        &self,
        _: &crate::ProvisionOptions,
    ) -> std::result::Result<PersistentVolume, crate::PluginError> {
        unreachable!("a plan provisions nothing")
    }
    async fn delete(&self, _: &PersistentVolume) -> std::result::Result<(), crate::PluginError> {
        unreachable!("a plan deletes nothing")
    }
    async fn recycle(
        &self,
        _: &PersistentVolume,
        _: &dyn crate::RecyclerEvents,
    ) -> std::result::Result<(), crate::PluginError> {
        unreachable!("a plan recycles nothing")
    }
}

/// Objects with host-path's stand-in registered.
fn objects() -> Objects {
    let mut plugins = PluginRegistry::new();
    plugins.register(Arc::new(Named("kubernetes.io/host-path")));
    Objects::new(plugins)
}

fn sc(v: serde_json::Value) -> StorageClass {
    serde_json::from_value(v).unwrap()
}

fn free(name: &str, size: &str) -> serde_json::Value {
    json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": size}}, "status": {"phase": "Available"}})
}

fn class(name: &str, provisioner: &str) -> serde_json::Value {
    json!({"metadata": {"name": name}, "provisioner": provisioner})
}

fn claim(size: &str) -> PersistentVolumeClaim {
    pvc(json!({"spec": {"resources": {"requests": {"storage": size}}}}))
}

fn with_class(size: &str, class: &str) -> PersistentVolumeClaim {
    pvc(json!({"spec": {"storageClassName": class, "resources": {"requests": {"storage": size}}}}))
}

fn requesting(volume: &str, size: &str) -> PersistentVolumeClaim {
    pvc(json!({"spec": {"volumeName": volume, "resources": {"requests": {"storage": size}}}}))
}

fn bound_name(plan: &UnboundClaimPlan) -> Option<&str> {
    match plan {
        UnboundClaimPlan::Bind { volume, .. } => Some(helpers::name(&volume.metadata)),
        _ => None,
    }
}

#[test]
fn a_claim_naming_a_missing_volume_waits_for_it() {
    let plan = plan_unbound_claim(&objects(), &requesting("pv9", "1Gi"));
    assert!(matches!(plan, UnboundClaimPlan::VolumeNotFound(ref n) if n == "pv9"), "{plan:?}");
}

#[test]
fn a_claim_naming_an_unclaimed_volume_binds_to_it_only_if_it_fits() {
    let caches = objects().volume(pv(free("pv1", "1Gi")));
    assert_eq!(bound_name(&plan_unbound_claim(&caches, &requesting("pv1", "1Gi"))), Some("pv1"));
    match plan_unbound_claim(&caches, &requesting("pv1", "5Gi")) {
        UnboundClaimPlan::VolumeMismatch { volume, verdict } => {
            assert_eq!(helpers::name(&volume.metadata), "pv1");
            assert!(!verdict.detail.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_claim_naming_a_volume_that_points_back_finishes_the_binding_and_one_claimed_elsewhere_is_refused() {
    let mine =
        json!({"metadata": {"name": "pv1"}, "spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}}});
    let caches = objects().volume(pv(mine));
    assert_eq!(bound_name(&plan_unbound_claim(&caches, &requesting("pv1", "1Gi"))), Some("pv1"));
    let theirs =
        json!({"metadata": {"name": "pv2"}, "spec": {"claimRef": {"namespace": "ns", "name": "c2", "uid": "u2"}}});
    let caches = objects().volume(pv(theirs));
    match plan_unbound_claim(&caches, &requesting("pv2", "1Gi")) {
        UnboundClaimPlan::ClaimedByOther { volume, other, invalid } => {
            assert_eq!(helpers::name(&volume.metadata), "pv2");
            assert_eq!(other, "ns/c2");
            assert!(!invalid);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_claim_without_a_named_volume_binds_the_smallest_that_fits() {
    let caches =
        objects().volume(pv(free("big", "10Gi"))).volume(pv(free("small", "1Gi"))).volume(pv(free("mid", "5Gi")));
    assert_eq!(bound_name(&plan_unbound_claim(&caches, &claim("2Gi"))), Some("mid"));
}

#[test]
fn no_match_and_no_class_takes_the_default_class_first() {
    let default = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "x"});
    let caches = objects().volume(pv(free("small", "1Gi"))).class(sc(default));
    let plan = plan_unbound_claim(&caches, &claim("2Gi"));
    assert!(matches!(plan, UnboundClaimPlan::AssignDefaultClass(ref c) if c == "standard"), "{plan:?}");
    // Without a default class, and for a claim whose class is "", nothing can be done.
    assert!(matches!(plan_unbound_claim(&objects(), &claim("2Gi")), UnboundClaimPlan::NoClass));
    assert!(matches!(plan_unbound_claim(&caches, &with_class("2Gi", "")), UnboundClaimPlan::NoClass));
}

#[test]
fn a_first_consumer_class_waits_for_a_selected_node_then_provisions() {
    let mut wffc = class("late", "kubernetes.io/host-path");
    wffc["volumeBindingMode"] = "WaitForFirstConsumer".into();
    // web-0 uses the claim and waits for a node; web-1 has one, done-0 has finished.
    let pod = |name: &str, node: Option<&str>, phase: &str| {
        serde_json::from_value::<Pod>(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}}]},
            "status": {"phase": phase},
        }))
        .unwrap()
    };
    let caches = objects()
        .class(sc(wffc))
        .pod(pod("web-0", None, "Pending"))
        .pod(pod("web-1", Some("n1"), "Running"))
        .pod(pod("done-0", None, "Failed"));
    match plan_unbound_claim(&caches, &with_class("1Gi", "late")) {
        UnboundClaimPlan::WaitForFirstConsumer { pods } => assert_eq!(pods, ["web-0"]),
        other => panic!("{other:?}"),
    }
    let mut selected = with_class("1Gi", "late");
    helpers::set_annotation(&mut selected.metadata, ann::SELECTED_NODE, "node-1");
    let plan = plan_unbound_claim(&caches, &selected);
    assert!(matches!(plan, UnboundClaimPlan::Provision(Provisioning::Internal { .. })), "{plan:?}");
}

#[test]
fn a_first_consumer_class_leaves_free_volumes_to_the_scheduler_but_binds_one_pre_bound_to_it() {
    let mut wffc = class("late", "kubernetes.io/no-provisioner");
    wffc["volumeBindingMode"] = "WaitForFirstConsumer".into();
    let mut v = free("local", "1Gi");
    v["spec"]["storageClassName"] = "late".into();
    let caches = objects().class(sc(wffc.clone())).volume(pv(v.clone()));
    let plan = plan_unbound_claim(&caches, &with_class("1Gi", "late"));
    assert!(matches!(plan, UnboundClaimPlan::WaitForFirstConsumer { .. }), "{plan:?}");
    // The scheduler pre-bound it (claimRef to this claim): the controller finishes the binding.
    v["spec"]["claimRef"] = json!({"namespace": "ns", "name": "c1", "uid": "u1"});
    let caches = objects().class(sc(wffc)).volume(pv(v));
    assert_eq!(bound_name(&plan_unbound_claim(&caches, &with_class("1Gi", "late"))), Some("local"));
}

fn provisioning(caches: &Objects, class: &str) -> Provisioning {
    match plan_unbound_claim(caches, &with_class("1Gi", class)) {
        UnboundClaimPlan::Provision(p) => p,
        other => panic!("{other:?}"),
    }
}

#[test]
fn provisioning_by_plugin_external_provisioner_migrated_driver_or_not_at_all() {
    let caches = objects()
        .class(sc(class("hostpath", "kubernetes.io/host-path")))
        .class(sc(class("gce", "kubernetes.io/gce-pd")))
        .class(sc(class("ext", "example.com/nfs")))
        .class(sc(class("unknown", "kubernetes.io/no-such-plugin")));
    match provisioning(&caches, "hostpath") {
        Provisioning::Internal { plugin, class, node, refusal } => {
            assert_eq!(plugin.name(), "kubernetes.io/host-path");
            assert_eq!(helpers::name(&class.metadata), "hostpath");
            assert!(node.is_none() && refusal.is_none());
        }
        other => panic!("{other:?}"),
    }
    let driver = csi::migrated_driver("kubernetes.io/gce-pd").expect("gce-pd is migrated");
    assert!(
        matches!(provisioning(&caches, "gce"), Provisioning::External { ref provisioner, .. } if provisioner == driver)
    );
    assert!(
        matches!(provisioning(&caches, "ext"), Provisioning::External { ref provisioner, .. } if provisioner == "example.com/nfs")
    );
    assert!(
        matches!(provisioning(&caches, "unknown"), Provisioning::Failed(ref e) if e == "no volume plugin matched name: kubernetes.io/no-such-plugin")
    );
    assert!(
        matches!(provisioning(&caches, "gone"), Provisioning::Failed(ref e) if e == "storageclass.storage.k8s.io \"gone\" not found")
    );
    let caches = caches.dynamic_provisioning(false);
    assert!(matches!(provisioning(&caches, "hostpath"), Provisioning::Disabled));
}

#[test]
fn an_in_process_plugin_is_refused_a_data_source_mount_options_it_lacks_and_a_node_not_cached() {
    let mut with_options = class("opts", "kubernetes.io/host-path");
    with_options["mountOptions"] = json!(["ro"]);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
    let caches = objects().class(sc(class("hostpath", "kubernetes.io/host-path"))).class(sc(with_options)).node(node);
    let refusal = |claim: &PersistentVolumeClaim| match plan_unbound_claim(&caches, claim) {
        UnboundClaimPlan::Provision(Provisioning::Internal { refusal, node, .. }) => {
            (refusal, node.map(|n| helpers::name(&n.metadata).to_string()))
        }
        other => panic!("{other:?}"),
    };
    let cloned = pvc(
        json!({"spec": {"storageClassName": "hostpath", "dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}}),
    );
    assert_eq!(refusal(&cloned), (Some(Refusal::DataSource), None));
    assert!(Refusal::DataSource.before_annotation() && !Refusal::MountOptions.before_annotation());
    assert_eq!(refusal(&with_class("1Gi", "opts")), (Some(Refusal::MountOptions), None));
    let mut on = with_class("1Gi", "hostpath");
    helpers::set_annotation(&mut on.metadata, ann::SELECTED_NODE, "node-1");
    assert_eq!(refusal(&on), (None, Some("node-1".to_string())));
    helpers::set_annotation(&mut on.metadata, ann::SELECTED_NODE, "node-9");
    assert_eq!(refusal(&on), (Some(Refusal::NodeNotFound("node-9".into())), None));
    assert_eq!(
        Refusal::NodeNotFound("node-9".into()).message("kubernetes.io/host-path", &sc(class("x", "y"))),
        "Failed to get target node: node \"node-9\" not found"
    );
}
