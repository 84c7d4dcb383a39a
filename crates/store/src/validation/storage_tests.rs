//! The CSI kinds' validation and defaults, case by case.
use super::*;

fn texts(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn check(f: impl Fn(&mut Vec<FieldError>)) -> Vec<String> {
    let mut errs = Vec::new();
    f(&mut errs);
    texts(&errs)
}

#[test]
fn a_driver_gets_every_default_and_is_then_valid() {
    let mut d = json!({"metadata": {"name": "csi.example.com"}});
    default_csi_driver(&mut d);
    assert_eq!(
        d["spec"],
        json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
               "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"],
               "requiresRepublish": false, "seLinuxMount": false, "preventPodSchedulingIfMissing": false})
    );
    assert!(check(|e| validate_csi_driver(&d, e)).is_empty());
    let mut empty_modes = json!({"spec": {"volumeLifecycleModes": [], "attachRequired": false}});
    default_csi_driver(&mut empty_modes);
    assert_eq!(empty_modes["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
    assert_eq!(empty_modes["spec"]["attachRequired"], json!(false));
}

#[test]
fn a_driver_spec_is_refused_field_by_field_in_upstreams_order() {
    let mut d = json!({"spec": {"fsGroupPolicy": "x", "volumeLifecycleModes": ["x", "Ephemeral"],
        "tokenRequests": [{"audience": "a", "expirationSeconds": 5}, {"audience": "a"},
                          {"audience": "b", "expirationSeconds": 99_999_999_999_i64}],
        "nodeAllocatableUpdatePeriodSeconds": 3, "serviceAccountTokenInSecrets": true}});
    default_csi_driver(&mut d);
    assert_eq!(
        check(|e| validate_csi_driver(&d, e)),
        [
            "spec.fsGroupPolicy: Unsupported value: \"x\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
            "spec.tokenRequests[0].expirationSeconds: Invalid value: 5: may not specify a duration less than 10 minutes",
            "spec.tokenRequests[1].audience: Duplicate value: \"a\"",
            "spec.tokenRequests[2].expirationSeconds: Invalid value: 99999999999: may not specify a duration larger than 2^32 seconds",
            "spec.volumeLifecycleModes: Unsupported value: \"x\": supported values: \"Persistent\", \"Ephemeral\"",
            "spec.nodeAllocatableUpdatePeriodSeconds: Invalid value: 3: must be greater than or equal to 10 seconds",
        ]
    );
    let mut secrets = json!({"spec": {"serviceAccountTokenInSecrets": true}});
    default_csi_driver(&mut secrets);
    assert_eq!(
        check(|e| validate_csi_driver(&secrets, e)),
        ["spec.serviceAccountTokenInSecrets: Invalid value: true: serviceAccountTokenInSecrets is set but no tokenRequests are specified"]
    );
}

#[test]
fn a_driver_keeps_attach_required_and_its_modes_and_warns_about_tokens() {
    let mut old = json!({"spec": {}});
    default_csi_driver(&mut old);
    let mut new = old.clone();
    new["spec"]["attachRequired"] = json!(false);
    new["spec"]["volumeLifecycleModes"] = json!(["Ephemeral"]);
    new["spec"]["podInfoOnMount"] = json!(true);
    assert_eq!(
        check(|e| validate_csi_driver_update(&old, &new, e)),
        [
            "spec.attachedRequired: Invalid value: false: field is immutable",
            "spec.volumeLifecycleModes: Invalid value: [\"Ephemeral\"]: field is immutable"
        ]
    );
    assert!(csi_driver_spec_changed(&old, &new));
    let mut tokens = old.clone();
    tokens["spec"]["tokenRequests"] = json!([{"audience": "x"}]);
    assert_eq!(csi_driver_warnings(None, &tokens), [TOKEN_IN_SECRETS_WARNING]);
    assert_eq!(csi_driver_warnings(Some(&old), &tokens), [TOKEN_IN_SECRETS_WARNING]);
    assert!(csi_driver_warnings(Some(&tokens), &tokens).is_empty());
    tokens["spec"]["serviceAccountTokenInSecrets"] = json!(false);
    assert!(csi_driver_warnings(None, &tokens).is_empty());
}

#[test]
fn a_node_is_stored_with_null_lists_and_an_empty_status() {
    let mut n = json!({"spec": {"drivers": []}, "status": {"storageHealth": [{"name": "x"}]}});
    default_csi_node(&mut n);
    assert_eq!(n, json!({"spec": {"drivers": null}, "status": {}}));
    let mut d = json!({"spec": {"drivers": [{"name": "d", "nodeID": "n"}]}});
    default_csi_node(&mut d);
    assert_eq!(d["spec"]["drivers"][0]["topologyKeys"], Value::Null);
}

#[test]
fn node_drivers_are_refused_as_upstream_words_it() {
    let long = "x".repeat(257);
    let n = json!({"spec": {"drivers": [
        {"name": "Bad_D!", "nodeID": "", "topologyKeys": ["", "a", "a"], "allocatable": {"count": -1}},
        {"name": "Bad_D!", "nodeID": long},
        {"name": ""}]}});
    let e = check(|e| validate_csi_node(&n, e));
    assert!(
        e[0].starts_with("spec.drivers[0].name: Invalid value: \"Bad_D!\": a lowercase RFC 1123 subdomain"),
        "{e:?}"
    );
    assert_eq!(e[1], "spec.drivers[0].nodeID: Required value");
    assert_eq!(e[2], "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0");
    assert_eq!(e[3], "spec.drivers[0]: Required value");
    assert_eq!(e[4], "spec.drivers[0]: Invalid value: \"\": name part must be non-empty");
    assert!(e[5].starts_with("spec.drivers[0]: Invalid value: \"\": name part must consist"), "{e:?}");
    assert_eq!(e[6], "spec.drivers[0]: Duplicate value: \"a\"");
    assert!(e[8].ends_with("must be 256 characters or less"), "{e:?}");
    assert_eq!(e[9], "spec.drivers[1].name: Duplicate value: \"Bad_D!\"");
    assert_eq!(e[10..], ["spec.drivers[2].name: Required value", "spec.drivers[2].nodeID: Required value"]);
}

#[test]
fn a_registered_driver_keeps_its_node_id_but_not_its_allocatable() {
    let old = json!({"spec": {"drivers": [{"name": "d", "nodeID": "n1", "topologyKeys": ["k"], "allocatable": {"count": 3}}]}});
    let mut more = old.clone();
    more["spec"]["drivers"][0]["allocatable"]["count"] = json!(5);
    more["spec"]["drivers"].as_array_mut().unwrap().push(json!({"name": "e", "nodeID": "x"}));
    assert!(check(|e| validate_csi_node_update(&old, &more, e)).is_empty());
    let mut moved = old.clone();
    moved["spec"]["drivers"][0]["nodeID"] = json!("n2");
    assert_eq!(
        check(|e| validate_csi_node_update(&old, &moved, e)),
        ["spec.drivers: Invalid value: {\"Name\":\"d\",\"NodeID\":\"n2\",\"TopologyKeys\":[\"k\"],\"Allocatable\":null}: field is immutable"]
    );
}

fn attachment(source: Value, attacher: &str, node: &str) -> Value {
    json!({"spec": {"attacher": attacher, "source": source, "nodeName": node}})
}

#[test]
fn an_attachment_needs_one_source_a_node_and_an_attacher() {
    let e = check(|e| validate_volume_attachment(&json!({"spec": {}}), true, e));
    assert_eq!(
        e[0],
        "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
    );
    assert!(e[1].starts_with("spec.nodeName: Invalid value: \"\": a lowercase RFC 1123 subdomain"), "{e:?}");
    assert_eq!(e[2], "spec.attacher: Required value");
    let a = attachment(json!({"persistentVolumeName": "Bad_PV"}), "Bad_Attacher!", "n");
    let e = check(|e| validate_volume_attachment(&a, true, e));
    assert!(e[0].starts_with("spec.source.persistentVolumeName: Invalid value: \"Bad_PV\""), "{e:?}");
    assert!(e[1].starts_with("spec.attacher: Invalid value: \"Bad_Attacher!\": an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'Example.com', "), "{e:?}");
    let long = format!("{}.com", "a".repeat(70));
    let a = attachment(json!({"persistentVolumeName": "", "inlineVolumeSpec": {}}), &long, "n");
    let e = check(|e| validate_volume_attachment(&a, true, e));
    assert_eq!(e[0], "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName");
    assert_eq!(e[2], "spec.attacher: Too long: may not be more than 63 characters");
    let ok = attachment(json!({"persistentVolumeName": "pv1"}), "csi.example.com", "n1");
    assert!(check(|e| validate_volume_attachment(&ok, true, e)).is_empty());
}

#[test]
fn an_inline_volume_must_be_a_plain_csi_volume() {
    let inline = json!({"capacity": {"storage": "1Gi"}, "claimRef": {"name": "x"}, "storageClassName": "s",
        "nodeAffinity": {"required": {"nodeSelectorTerms": []}}, "volumeMode": "Block",
        "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": "/x"}});
    let a = attachment(json!({"inlineVolumeSpec": inline}), "x", "n");
    let p = "spec.source.inlineVolumeSpec";
    assert_eq!(
        check(|e| validate_volume_attachment(&a, true, e)),
        [
            format!("{p}.claimRef: Forbidden: may not be specified in the context of inline volumes"),
            format!("{p}.capacity: Forbidden: may not be specified in the context of inline volumes"),
            format!("{p}.csi: Required value: has to be specified in the context of inline volumes"),
            format!("{p}.accessModes: Required value"),
            format!("{p}.persistentVolumeReclaimPolicy: Forbidden: may only be Retain in the context of inline volumes"),
            format!("{p}.nodeAffinity: Forbidden: may not be specified in the context of inline volumes"),
            format!("{p}.storageClassName: Forbidden: may not be specified in the context of inline volumes"),
            format!("{p}.volumeMode: Forbidden: may not specify volumeMode other than Filesystem in the context of inline volumes"),
        ]
    );
    let ok = attachment(
        json!({"inlineVolumeSpec": {"accessModes": ["ReadWriteOnce"], "csi": {"driver": "x", "volumeHandle": "h"}}}),
        "x",
        "n",
    );
    assert!(check(|e| validate_volume_attachment(&ok, true, e)).is_empty());
}

#[test]
fn an_attachment_keeps_its_spec_and_its_status_is_checked() {
    let mut old = attachment(json!({"persistentVolumeName": "pv1"}), "csi.example.com", "n1");
    default_volume_attachment(&mut old);
    assert_eq!(old["status"], json!({"attached": false}));
    let mut moved = old.clone();
    moved["spec"]["nodeName"] = json!("n2");
    assert_eq!(
        check(|e| validate_volume_attachment_update(&old, &moved, e)),
        ["spec: Invalid value: null: field is immutable"]
    );
    let mut status = old.clone();
    status["status"] = json!({"attached": true, "attachError": {"message": "m", "errorCode": -1},
                              "detachError": {"message": "x".repeat(1025)}});
    default_volume_attachment(&mut status);
    assert_eq!(status["status"]["attachError"]["time"], Value::Null);
    assert_eq!(
        check(|e| validate_volume_attachment_update(&old, &status, e)),
        [
            "status.attachError.errorCode: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            "status.detachError.message: Too long: may not be more than 1024 bytes"
        ]
    );
}

#[test]
fn a_capacity_needs_a_class_a_selector_and_no_negative_capacity_and_keeps_its_inputs() {
    let c = json!({"storageClassName": "Bad_SC", "capacity": "-1", "maximumVolumeSize": "-2",
        "nodeTopology": {"matchExpressions": [{"key": "k", "operator": "Bogus"}]}});
    let e = check(|e| validate_csi_storage_capacity(&c, e));
    assert_eq!(
        e[0],
        "nodeTopology.matchExpressions[0].operator: Invalid value: \"Bogus\": not a valid selector operator"
    );
    assert!(e[1].starts_with("storageClassName: Invalid value: \"Bad_SC\""), "{e:?}");
    assert_eq!(e[2], "capacity: Invalid value: \"-1\": must be greater than or equal to 0");
    assert_eq!(e.len(), 3);
    let old = json!({"storageClassName": "sc1", "nodeTopology": {"matchLabels": {"z": "1"}}, "capacity": "1Gi"});
    let mut new = old.clone();
    new["capacity"] = json!("2Gi");
    assert!(check(|e| validate_csi_storage_capacity_update(&old, &new, e)).is_empty());
    new["storageClassName"] = json!("sc2");
    new["nodeTopology"]["matchLabels"]["a"] = json!("b");
    assert_eq!(
        check(|e| validate_csi_storage_capacity_update(&old, &new, e)),
        [
            "nodeTopology: Invalid value: {\"matchLabels\":{\"a\":\"b\",\"z\":\"1\"}}: field is immutable",
            "storageClassName: Invalid value: \"sc2\": field is immutable"
        ]
    );
}

#[test]
fn an_attributes_class_needs_a_driver_and_parameters_that_never_change() {
    assert_eq!(
        check(|e| validate_volume_attributes_class(&json!({}), e)),
        ["driverName: Required value", "parameters: Required value: must contain at least one key/value pair"]
    );
    let bad = json!({"driverName": "Bad Driver!", "parameters": {"": "x"}});
    let e = check(|e| validate_volume_attributes_class(&bad, e));
    assert!(e[0].starts_with("driverName: Invalid value: \"bad driver!\": name part must consist"), "{e:?}");
    assert_eq!(e[1], "parameters: Invalid value: \"\": field can not be empty.");
    let old = json!({"driverName": "csi.example.com", "parameters": {"iops": "100"}});
    let cleared = json!({"driverName": "csi.example.com"});
    assert_eq!(
        check(|e| validate_volume_attributes_class_update(&old, &cleared, e)),
        [
            "parameters: Forbidden: updates to parameters are forbidden.",
            "parameters: Required value: must contain at least one key/value pair"
        ]
    );
    assert!(check(|e| validate_volume_attributes_class_update(&old, &old, e)).is_empty());
}
