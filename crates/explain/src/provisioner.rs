//! Past the binder: what an external provisioner is doing about a claim.
//!
//! Once the controller hands a claim to an external provisioner it only says, again and again,
//! "waiting for a volume to be created, either by external provisioner X or manually created by
//! system administrator" (external-provisioner#154 shows it repeated for hours). Whether X exists,
//! runs, leads or fails is in objects a person would have to know to look at. This module looks at
//! them, the way that person would, and turns them into one verdict:
//!
//! - the **CSIDriver** object of that name (a CSI driver that is installed registers one);
//! - the provisioner's **leader Lease**: external-provisioner (and every provisioner built on
//!   sig-storage-lib-external-provisioner) elects its leader through a Lease named after the
//!   provisioner, `/` replaced by `-`, then every character outside `[a-zA-Z0-9-]` by `-`, with an
//!   `X` appended when the name would end in `-` (csi-lib-utils' `leaderelection`). It lives in
//!   the namespace the provisioner runs in, so every namespace is searched. A Lease whose
//!   `renewTime + leaseDurationSeconds` is past, or that no one holds, says the provisioner is
//!   down;
//! - the provisioner's **events on the claim**: `Provisioning` when it starts, `ProvisioningFailed`
//!   with its error, `ProvisioningSucceeded` (the controller's own `ExternalProvisioning` is not
//!   an answer);
//! - for a claim of a WaitForFirstConsumer class, the **selected node's CSINode**, which lists the
//!   drivers whose node plugin runs there;
//! - the **CSIStorageCapacity** objects of the claim's class, when the CSIDriver says the driver
//!   publishes them (`storageCapacity: true`).
//!
//! [`check`] is pure: the objects and the time come in, a [`Report`] comes out.

use crate::snapshot::Snapshot;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use k8s_openapi::jiff::Timestamp;
use pv_model::annotations as ann;
use pv_model::helpers;
use pv_model::quantity::Quantity;

/// What the checks conclude, the `provisioner.verdict` of the JSON output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No CSIDriver, no Lease, no answer on the claim: nothing of the provisioner is installed.
    NotInstalled,
    /// Its Lease has expired or is released: the provisioner is not running.
    Down,
    /// Its latest answer on the claim is `ProvisioningFailed`.
    Failing,
    /// The selected node does not run the driver (its CSINode does not list it).
    NotOnNode,
    /// The driver publishes capacity for the class and none of it fits the claim.
    NoCapacity,
    /// It has started provisioning the claim (latest answer `Provisioning`).
    Provisioning,
    /// It holds its Lease but has not answered the claim yet.
    Running,
    /// Something of it is installed (a CSIDriver, or answers to other claims) but nothing shows
    /// that it runs: no Lease (it may run without leader election) and no answer on this claim.
    NoAnswer,
    /// Nothing past the binder was given (a file without CSIDriver, Lease or Event objects).
    Unknown,
}

impl Verdict {
    /// The name `--output json` uses.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::NotInstalled => "notInstalled",
            Verdict::Down => "down",
            Verdict::Failing => "failing",
            Verdict::NotOnNode => "notOnNode",
            Verdict::NoCapacity => "noCapacity",
            Verdict::Provisioning => "provisioning",
            Verdict::Running => "running",
            Verdict::NoAnswer => "noAnswer",
            Verdict::Unknown => "unknown",
        }
    }
}

/// One of the provisioner's events on the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimEvent {
    /// `Provisioning`, `ProvisioningFailed` or `ProvisioningSucceeded`.
    pub reason: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The event's message.
    pub message: String,
    /// Seconds since it was last seen, when the event carries a time.
    pub seconds_ago: Option<i64>,
    /// How many times it was seen.
    pub count: i32,
}

/// The selected node of a WaitForFirstConsumer claim, and whether the driver runs there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCheck {
    /// `volume.kubernetes.io/selected-node`.
    pub name: String,
    /// `Some(true)` when its CSINode lists the driver, `Some(false)` when it does not, `None`
    /// when there is no CSINode for the node.
    pub driver_registered: Option<bool>,
}

/// What was found about the provisioner of one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The provisioner's name (the class's, or the CSI driver a migrated plugin hands over to).
    pub name: String,
    /// Whether a CSIDriver object of that name exists (`None`: it could not be read).
    pub csi_driver: Option<bool>,
    /// The Lease looked at, `namespace/name`, when one was found.
    pub lease: Option<String>,
    /// Its `holderIdentity` (`None` when no Lease, or no holder).
    pub lease_holder: Option<String>,
    /// Seconds since its `renewTime`.
    pub lease_renewed_seconds_ago: Option<i64>,
    /// The provisioner's latest event on the claim.
    pub last_event: Option<ClaimEvent>,
    /// The selected node, for a claim that has one.
    pub node: Option<NodeCheck>,
    /// What CSIStorageCapacity says, when the driver publishes it for the class.
    pub capacity: Option<String>,
    /// The conclusion.
    pub verdict: Verdict,
    /// The conclusion for a person, one sentence.
    pub message: String,
}

/// The name external-provisioner gives its leader Lease for provisioner `name`.
pub fn lease_name(name: &str) -> String {
    let mut s: String =
        name.replace('/', "-").chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    if s.ends_with('-') {
        s.push('X');
    }
    s
}

/// The external provisioner the claim's class hands claims to (the CSI driver a migrated
/// in-tree name goes to), if the class exists and its provisioner is not in-tree.
pub fn of_class(snapshot: &Snapshot, claim: &PersistentVolumeClaim) -> Option<String> {
    let class = helpers::claim_class(claim);
    let c = snapshot.classes.iter().find(|c| helpers::name(&c.metadata) == class)?;
    let p = pv_model::csi::migrated_driver(&c.provisioner).map_or_else(|| c.provisioner.clone(), str::to_string);
    (!p.starts_with(ann::IN_TREE_PREFIX)).then_some(p)
}

/// Reasons of the events an external provisioner records on a claim.
const ANSWERS: [&str; 3] = ["Provisioning", "ProvisioningFailed", "ProvisioningSucceeded"];

/// "3h", "5m", "12s": a duration as a person reads it.
pub fn ago(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// When an event was last seen (the newest time it carries).
pub fn event_time(e: &Event) -> Option<Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).map(|t| t.0))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn seconds_between(now: Timestamp, then: Timestamp) -> i64 {
    now.as_second() - then.as_second()
}

/// The provisioner's events on this claim (this uid; events without a uid by name), latest last.
fn answers<'a>(snapshot: &'a Snapshot, claim: &PersistentVolumeClaim) -> Vec<&'a Event> {
    let uid = helpers::uid(&claim.metadata);
    let ns = claim.metadata.namespace.as_deref().unwrap_or("");
    let name = helpers::name(&claim.metadata);
    let mut v: Vec<&Event> = snapshot
        .events
        .iter()
        .filter(|e| ANSWERS.contains(&e.reason.as_deref().unwrap_or("")))
        .filter(|e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some("PersistentVolumeClaim")
                && match o.uid.as_deref().filter(|u| !u.is_empty()) {
                    Some(u) => u == uid,
                    None => o.namespace.as_deref() == Some(ns) && o.name.as_deref() == Some(name),
                }
        })
        .collect();
    v.sort_by_key(|e| event_time(e));
    v
}

/// Checks the external provisioner `name` for `claim` of class `class`, at `now`.
pub fn check(snapshot: &Snapshot, claim: &PersistentVolumeClaim, name: &str, class: &str, now: Timestamp) -> Report {
    let driver = snapshot.csi_drivers.iter().find(|d| d.metadata.name.as_deref() == Some(name));
    let csi_driver = if snapshot.read_csi { Some(driver.is_some()) } else { None };
    let wanted = lease_name(name);
    // The most recently renewed Lease of that name, in whichever namespace.
    let lease = snapshot
        .leases
        .iter()
        .filter(|l| l.metadata.name.as_deref() == Some(wanted.as_str()))
        .max_by_key(|l| l.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| t.0));
    let spec = lease.and_then(|l| l.spec.as_ref());
    let holder = spec.and_then(|s| s.holder_identity.clone()).filter(|h| !h.is_empty());
    let renewed_ago = spec.and_then(|s| s.renew_time.as_ref()).map(|t| seconds_between(now, t.0));
    let last = answers(snapshot, claim).last().copied();
    let last_event = last.map(|e| ClaimEvent {
        reason: e.reason.clone().unwrap_or_default(),
        type_: e.type_.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        seconds_ago: event_time(e).map(|t| seconds_between(now, t)),
        count: e.count.unwrap_or(1),
    });
    let node = helpers::annotation(&claim.metadata, ann::SELECTED_NODE).filter(|n| !n.is_empty()).map(|n| {
        let csinode = snapshot.csi_nodes.iter().find(|c| c.metadata.name.as_deref() == Some(n));
        NodeCheck {
            name: n.to_string(),
            driver_registered: csinode.map(|c| c.spec.drivers.iter().any(|d| d.name == name)),
        }
    });
    let capacity = capacity_check(snapshot, claim, class, driver.is_some_and(publishes_capacity));
    let mut r = Report {
        name: name.to_string(),
        csi_driver,
        lease: lease.map(|l| format!("{}/{wanted}", l.metadata.namespace.as_deref().unwrap_or(""))),
        lease_holder: holder.clone(),
        lease_renewed_seconds_ago: renewed_ago,
        last_event,
        node,
        capacity: capacity.as_ref().map(|c| c.describe.clone()),
        verdict: Verdict::NoAnswer,
        message: String::new(),
    };
    let seen = Seen {
        driver: driver.is_some(),
        lease_duration: spec.and_then(|s| s.lease_duration_seconds).unwrap_or(15) as i64,
        capacity,
        nothing_read: !snapshot.read_csi && snapshot.leases.is_empty() && snapshot.events.is_empty(),
        answered_anyone: answered_anyone(snapshot, name),
    };
    (r.verdict, r.message) = decide(&r, &seen);
    r
}

/// What [`decide`] needs beyond the [`Report`]'s fields.
struct Seen {
    /// A CSIDriver of the provisioner's name exists.
    driver: bool,
    /// The Lease's `leaseDurationSeconds`.
    lease_duration: i64,
    /// What published capacity says, when the driver publishes it.
    capacity: Option<CapacityCheck>,
    /// No CSI object, Lease or Event was read at all (a file without them).
    nothing_read: bool,
    /// The provisioner has answered some claim.
    answered_anyone: bool,
}

/// The verdict and its sentence, in order of what a person should act on first: a provisioner
/// that is down, a node without the driver, a failure, no capacity; then what is under way.
fn decide(r: &Report, seen: &Seen) -> (Verdict, String) {
    let name = &r.name;
    let who = format!("provisioner {name:?}");
    let wanted = lease_name(name);
    let (holder, renewed_ago, duration) = (&r.lease_holder, r.lease_renewed_seconds_ago, seen.lease_duration);
    let lease_label = r.lease.clone().unwrap_or_default();
    let lease_expired = renewed_ago.is_some_and(|a| a > duration);
    if r.lease.is_some() && (holder.is_none() || lease_expired) {
        let when = renewed_ago.map_or_else(
            || "never renewed".to_string(),
            |a| format!("last renewed {} ago, for {duration}s at a time", ago(a)),
        );
        let held = match holder {
            Some(h) => format!("held by {h}"),
            None => "released, held by no one".to_string(),
        };
        (Verdict::Down, format!("The lease {lease_label} of {who} was {when} ({held}): the provisioner is down."))
    } else if let Some(NodeCheck { name: node, driver_registered: Some(false) | None }) =
        r.node.as_ref().filter(|_| seen.driver)
    {
        let what = if r.node.as_ref().and_then(|n| n.driver_registered).is_none() {
            format!("node {node} has no CSINode")
        } else {
            format!("the CSINode of node {node} does not list {name}")
        };
        (
            Verdict::NotOnNode,
            format!(
                "The claim's selected node {node} does not run the driver: {what} (is the driver's node \
                 plugin running there?)."
            ),
        )
    } else if let Some(e) = r.last_event.as_ref().filter(|e| e.reason == "ProvisioningFailed") {
        let mut when = Vec::new();
        if e.count > 1 {
            when.push(format!("{} times", e.count));
        }
        if let Some(a) = e.seconds_ago {
            when.push(format!("last {} ago", ago(a)));
        }
        let when = if when.is_empty() { String::new() } else { format!(" ({})", when.join(", ")) };
        (Verdict::Failing, format!("The {who} is failing{when}: {}", e.message))
    } else if let Some(c) = seen.capacity.as_ref().filter(|c| !c.fits) {
        (Verdict::NoCapacity, format!("The {who} publishes no capacity that fits the claim: {}.", c.describe))
    } else if let Some(e) = r.last_event.as_ref().filter(|e| e.reason == "Provisioning") {
        let when = e.seconds_ago.map(|a| format!(" (event Provisioning {} ago)", ago(a))).unwrap_or_default();
        (Verdict::Provisioning, format!("The {who} is provisioning a volume for the claim{when}."))
    } else if let (Some(h), Some(a)) = (holder, renewed_ago) {
        (
            Verdict::Running,
            format!(
                "The {who} runs (leader {h}, lease {lease_label} renewed {} ago) but has not answered the \
                 claim yet.",
                ago(a)
            ),
        )
    } else if seen.nothing_read {
        (
            Verdict::Unknown,
            format!(
                "The input holds nothing past the binder (no CSIDriver, Lease or Event): add `kubectl get \
                 csidrivers,csinodes,leases,events -A -o yaml` to it to see what {who} does."
            ),
        )
    } else if r.csi_driver == Some(false) && r.last_event.is_none() && !seen.answered_anyone {
        (
            Verdict::NotInstalled,
            format!(
                "No CSIDriver {name:?} and no provisioner has ever answered (no Lease {wanted}, no event on the \
                 claim): is the driver installed?"
            ),
        )
    } else {
        let before = if seen.driver {
            format!("CSIDriver {name:?} exists, but nothing shows that its provisioner runs")
        } else if seen.answered_anyone {
            format!("The {who} has answered other claims, but nothing shows that it runs now")
        } else {
            format!("Nothing shows that the {who} runs")
        };
        (
            Verdict::NoAnswer,
            format!(
                "{before}: no Lease {wanted} in any namespace (csi-provisioner keeps one with --leader-election) \
                 and no answer on the claim; is it running?"
            ),
        )
    }
}

/// Whether the provisioner has answered any claim (an installed provisioner that runs without
/// leader election leaves events).
fn answered_anyone(snapshot: &Snapshot, name: &str) -> bool {
    snapshot.events.iter().any(|e| {
        ANSWERS.contains(&e.reason.as_deref().unwrap_or(""))
            && e.source.as_ref().and_then(|s| s.component.as_deref()).is_some_and(|c| c.starts_with(name))
    })
}

fn publishes_capacity(d: &k8s_openapi::api::storage::v1::CSIDriver) -> bool {
    d.spec.storage_capacity == Some(true)
}

struct CapacityCheck {
    fits: bool,
    describe: String,
}

/// The CSIStorageCapacity objects of `class`, when the driver publishes them: whether one has room
/// for the claim (`maximumVolumeSize` when set, else `capacity`).
fn capacity_check(
    snapshot: &Snapshot,
    claim: &PersistentVolumeClaim,
    class: &str,
    publishes: bool,
) -> Option<CapacityCheck> {
    if !publishes {
        return None;
    }
    let sizes: Vec<Quantity> = snapshot
        .capacities
        .iter()
        .filter(|c| c.storage_class_name == class)
        .filter_map(|c| c.maximum_volume_size.as_ref().or(c.capacity.as_ref()))
        .filter_map(|q| Quantity::parse(&q.0).ok())
        .collect();
    let want = helpers::claim_request(claim);
    let largest = sizes.iter().max().copied();
    Some(match largest {
        None => CapacityCheck {
            fits: false,
            describe: format!("no CSIStorageCapacity for class {class:?} (the driver publishes none yet)"),
        },
        Some(l) => CapacityCheck {
            fits: l >= want,
            describe: format!(
                "{} CSIStorageCapacity object(s) for class {class:?}, the largest {l}, the claim asks for {want}",
                sizes.len()
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec, CSINode, CSINodeDriver, CSINodeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

    const DRIVER: &str = "io.kubernetes.storage.mock";
    const NOW: i64 = 1_800_000_000;

    fn at(seconds_ago: i64) -> Timestamp {
        Timestamp::from_second(NOW - seconds_ago).unwrap()
    }

    fn now() -> Timestamp {
        at(0)
    }

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("csi".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn lease(ns: &str, holder: Option<&str>, renewed_ago: i64) -> Lease {
        Lease {
            metadata: ObjectMeta { name: Some(lease_name(DRIVER)), namespace: Some(ns.into()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(String::from),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(at(renewed_ago))),
                ..Default::default()
            }),
        }
    }

    fn event(reason: &str, message: &str, seconds_ago: i64, uid: &str) -> Event {
        Event {
            metadata: ObjectMeta { name: Some(format!("data.{reason}")), ..Default::default() },
            involved_object: ObjectReference {
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some("csi".into()),
                name: Some("data".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(if reason == "ProvisioningFailed" { "Warning" } else { "Normal" }.into()),
            last_timestamp: Some(Time(at(seconds_ago))),
            count: Some(1),
            source: Some(EventSource { component: Some(format!("{DRIVER}_host_1")), host: None }),
            ..Default::default()
        }
    }

    fn driver(capacity: bool) -> CSIDriver {
        CSIDriver {
            metadata: ObjectMeta { name: Some(DRIVER.into()), ..Default::default() },
            spec: CSIDriverSpec { storage_capacity: Some(capacity), ..Default::default() },
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot { read_csi: true, ..Default::default() }
    }

    fn run(s: &Snapshot) -> Report {
        check(s, &claim(), DRIVER, "csi-mock", now())
    }

    #[test]
    fn lease_names_follow_csi_lib_utils() {
        assert_eq!(lease_name("io.kubernetes.storage.mock"), "io-kubernetes-storage-mock");
        assert_eq!(lease_name("example.com/nfs"), "example-com-nfs");
        assert_eq!(lease_name("example.com/"), "example-com-X");
    }

    #[test]
    fn nothing_installed_and_no_answer_asks_whether_the_driver_is_installed() {
        let r = run(&snapshot());
        assert_eq!(r.verdict, Verdict::NotInstalled, "{r:?}");
        assert!(r.message.contains("is the driver installed?"), "{}", r.message);
        assert_eq!(r.csi_driver, Some(false));
        assert_eq!(r.lease_holder, None);
    }

    #[test]
    fn an_expired_lease_says_the_provisioner_is_down_even_after_a_failure() {
        let mut s = snapshot();
        s.csi_drivers.push(driver(false));
        s.leases.push(lease("kube-system", Some("node-a"), 3 * 3600));
        s.events.push(event("ProvisioningFailed", "boom", 4 * 3600, "u-1"));
        let r = run(&s);
        assert_eq!(r.verdict, Verdict::Down, "{r:?}");
        assert!(r.message.contains("last renewed 3h ago"), "{}", r.message);
        assert!(r.message.contains("the provisioner is down"), "{}", r.message);
        assert_eq!(r.lease.as_deref(), Some("kube-system/io-kubernetes-storage-mock"));
        assert_eq!(r.lease_renewed_seconds_ago, Some(3 * 3600));
    }

    #[test]
    fn a_released_lease_is_down_too() {
        let mut s = snapshot();
        s.leases.push(lease("default", None, 5));
        assert_eq!(run(&s).verdict, Verdict::Down);
    }

    #[test]
    fn the_latest_answer_failing_gives_its_message() {
        let mut s = snapshot();
        s.csi_drivers.push(driver(false));
        s.leases.push(lease("default", Some("node-a"), 2));
        s.events.push(event("Provisioning", "External provisioner is provisioning", 30, "u-1"));
        s.events.push(event("ProvisioningFailed", "rpc error: code = OutOfRange", 20, "u-1"));
        let r = run(&s);
        assert_eq!(r.verdict, Verdict::Failing, "{r:?}");
        assert!(r.message.ends_with(": rpc error: code = OutOfRange"), "{}", r.message);
        assert_eq!(r.last_event.as_ref().unwrap().reason, "ProvisioningFailed");
        // An earlier claim of the same name failed; this one is being provisioned.
        let mut s = snapshot();
        s.leases.push(lease("default", Some("node-a"), 2));
        s.events.push(event("ProvisioningFailed", "old", 5, "u-0"));
        s.events.push(event("Provisioning", "External provisioner is provisioning", 10, "u-1"));
        assert_eq!(run(&s).verdict, Verdict::Provisioning);
    }

    #[test]
    fn a_fresh_lease_without_an_answer_is_running() {
        let mut s = snapshot();
        s.csi_drivers.push(driver(false));
        s.leases.push(lease("csi", Some("node-a"), 3));
        let r = run(&s);
        assert_eq!(r.verdict, Verdict::Running, "{r:?}");
        assert_eq!(r.lease_holder.as_deref(), Some("node-a"));
    }

    #[test]
    fn a_csidriver_without_lease_or_answer_asks_whether_it_runs() {
        let mut s = snapshot();
        s.csi_drivers.push(driver(false));
        let r = run(&s);
        assert_eq!(r.verdict, Verdict::NoAnswer, "{r:?}");
        assert!(r.message.contains("is it running?"), "{}", r.message);
    }

    #[test]
    fn a_selected_node_without_the_driver_is_named() {
        let mut s = snapshot();
        s.csi_drivers.push(driver(false));
        s.leases.push(lease("csi", Some("node-a"), 3));
        s.csi_nodes.push(CSINode {
            metadata: ObjectMeta { name: Some("n1".into()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: vec![CSINodeDriver {
                    name: "other.driver".into(),
                    node_id: "n1".into(),
                    ..Default::default()
                }],
            },
            ..Default::default()
        });
        let mut c = claim();
        c.metadata.annotations = Some([(ann::SELECTED_NODE.to_string(), "n1".to_string())].into());
        let r = check(&s, &c, DRIVER, "csi-mock", now());
        assert_eq!(r.verdict, Verdict::NotOnNode, "{r:?}");
        assert!(r.message.contains("does not list io.kubernetes.storage.mock"), "{}", r.message);
        assert_eq!(r.node, Some(NodeCheck { name: "n1".into(), driver_registered: Some(false) }));
    }

    #[test]
    fn published_capacity_too_small_for_the_claim_is_said() {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
        use k8s_openapi::api::storage::v1::CSIStorageCapacity;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
        let mut s = snapshot();
        s.csi_drivers.push(driver(true));
        s.leases.push(lease("csi", Some("node-a"), 3));
        s.capacities.push(CSIStorageCapacity {
            metadata: ObjectMeta { name: Some("c1".into()), namespace: Some("csi".into()), ..Default::default() },
            storage_class_name: "csi-mock".into(),
            capacity: Some(Q("5Gi".into())),
            ..Default::default()
        });
        let mut c = claim();
        c.spec = Some(PersistentVolumeClaimSpec {
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_string(), Q("10Gi".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let r = check(&s, &c, DRIVER, "csi-mock", now());
        assert_eq!(r.verdict, Verdict::NoCapacity, "{r:?}");
        assert!(r.message.contains("the largest 5Gi"), "{}", r.message);
    }
}
