//! `--feature-gates` as kube-controller-manager 1.37 parses it: every Kubernetes feature gate is
//! known (a gate meant for another controller is accepted, as KCM accepts it), an unknown name
//! or a gate locked to its default and set otherwise stops the start with KCM's message. The
//! gates that concern this controller are GA in 1.37: their behaviour is always on.
//!
//! The table is Kubernetes 1.37.2's (`pkg/features`, the apiserver, client-go, component-base
//! and controller-manager gates KCM registers), each gate's state at 1.37: its default and
//! whether it is locked to it. Checked against the real kube-controller-manager 1.37.2, gate
//! by gate.

/// (name, default, locked to the default) of every feature gate KCM 1.37 knows.
const GATES: &[(&str, bool, bool)] = &[
    ("APIResponseCompression", true, false),
    ("APIServerIdentity", true, false),
    ("APIServerWebhookAuthenticationToken", false, false),
    ("APIServingWithRoutine", false, false),
    ("AggregatedDiscoveryRemoveBetaType", true, true),
    ("AllowDNSOnlyNodeCSR", false, false),
    ("AllowInsecureKubeletCertificateSigningRequests", false, false),
    ("AllowOverwriteTerminationGracePeriodSeconds", false, true),
    ("AllowParsingUserUIDFromCertAuth", true, false),
    ("AllowServiceExternalIPs", true, false),
    ("AllowUnsafeMalformedObjectDeletion", true, false),
    ("AtomicFIFO", true, false),
    ("AtomicWriteVolumeUserFields", false, false),
    ("AuthorizePodWebsocketUpgradeCreatePermission", true, false),
    ("CBORServingAndStorage", false, false),
    ("CPUManagerPolicyAlphaOptions", false, false),
    ("CPUManagerPolicyBetaOptions", true, false),
    ("CPUManagerPolicyOptions", true, true),
    ("CRDObservedGenerationTracking", true, false),
    ("CRDValidationRatcheting", true, true),
    ("CRIListStreaming", false, false),
    ("CSIServiceAccountTokenSecrets", true, true),
    ("CSIVolumeHealth", false, false),
    ("ChangeContainerStatusOnKubeletRestart", false, false),
    ("ClearingNominatedNodeNameAfterBinding", true, false),
    ("ClientsAllowCARotation", true, false),
    ("ClientsAllowCBOR", false, false),
    ("ClientsAllowTLSCacheGC", true, false),
    ("ClientsPreferCBOR", false, false),
    ("CloudControllerManagerWatchBasedRoutesReconciliation", false, false),
    ("CloudControllerManagerWebhook", false, false),
    ("ClusterTrustBundle", true, false),
    ("ClusterTrustBundleProjection", true, false),
    ("ComponentFlagz", true, false),
    ("ComponentStatusz", true, false),
    ("CompositePodGroup", false, false),
    ("ConcurrentWatchObjectDecode", true, false),
    ("ConsistentListFromCacheSkipTimeoutFallback", false, false),
    ("ConstrainedImpersonation", true, false),
    ("ContainerCheckpoint", true, false),
    ("ContainerRestartRules", true, false),
    ("ContainerStopSignals", false, false),
    ("ContextualLogging", true, false),
    ("ControllerManagerReleaseLeaderElectionLockOnExit", false, false),
    ("CoordinatedLeaderElection", false, false),
    ("CrossNamespaceVolumeDataSource", false, false),
    ("CustomCPUCFSQuotaPeriod", true, false),
    ("CustomResourceFieldSelectors", true, true),
    ("DRAAdminAccess", true, true),
    ("DRAConsumableCapacity", true, false),
    ("DRADerivedAttributes", false, false),
    ("DRADeviceBindingConditions", true, false),
    ("DRADeviceCompatibilityGroups", false, false),
    ("DRADeviceTaintRules", true, false),
    ("DRADeviceTaints", true, false),
    ("DRAExtendedResource", true, true),
    ("DRAFractionalCapacityRange", true, false),
    ("DRAListTypeAttributes", false, false),
    ("DRANodeAllocatableResources", false, false),
    ("DRAOptionalNodeOperations", false, false),
    ("DRAPartitionableDevices", true, false),
    ("DRAPartitionableDevicesType", false, false),
    ("DRAPrioritizedList", true, true),
    ("DRAResourceClaimDeviceStatus", true, true),
    ("DRAResourceClaimGranularStatusAuthorization", true, false),
    ("DRAResourcePoolStatus", false, false),
    ("DRASchedulerFilterTimeout", true, false),
    ("DRAWorkloadResourceClaims", false, false),
    ("DeclarativeValidation", true, true),
    ("DeclarativeValidationBeta", true, false),
    ("DeclarativeValidationTakeover", false, true),
    ("DefaultPodSysctls", false, false),
    ("DeploymentReplicaSetTerminatingReplicas", true, false),
    ("DetectCacheInconsistency", true, false),
    ("DisableAllocatorDualWrite", true, true),
    ("DisableCPUQuotaWithExclusiveCPUs", true, true),
    ("DisableNodeKubeProxyVersion", true, true),
    ("DynamicResourceAllocation", true, true),
    ("EmptyDirVolumeMode", false, false),
    ("EnvFiles", true, false),
    ("EtcdRangeStream", true, false),
    ("EventedPLEG", false, false),
    ("EvictionRequestAPI", false, false),
    ("ExcludeAdmissionWebhookVirtualResources", true, false),
    ("ExecProbeTimeout", true, true),
    ("ExtendWebSocketsToKubelet", true, false),
    ("ExternalServiceAccountTokenSigner", true, true),
    ("GRPCContainerProbeTLS", false, false),
    ("GenericWorkload", false, false),
    ("GitRepoVolumeDriver", false, true),
    ("GracefulNodeShutdown", true, false),
    ("GracefulNodeShutdownBasedOnPodPriority", true, false),
    ("H2CContainerProbe", false, false),
    ("HPAConfigurableTolerance", true, true),
    ("HPAGeneration", true, false),
    ("HPAOptimizedSelectorStore", true, false),
    ("HPAScaleToZero", true, false),
    ("HostnameOverride", true, true),
    ("HugepageAwareEviction", true, false),
    ("ImageMaximumGCAge", true, true),
    ("ImageVolume", true, true),
    ("ImageVolumeWithDigest", false, false),
    ("InOrderInformers", true, true),
    ("InOrderInformersBatchProcess", true, false),
    ("InPlacePodLevelResourcesVerticalScaling", true, false),
    ("InPlacePodVerticalScaling", true, true),
    ("InPlacePodVerticalScalingExclusiveCPUs", false, false),
    ("InPlacePodVerticalScalingExclusiveMemory", false, false),
    ("InPlacePodVerticalScalingInitContainers", true, true),
    ("InPlacePodVerticalScalingMemoryBackedVolumes", false, false),
    ("InPlacePodVerticalScalingSchedulerPreemption", false, false),
    ("InformerResourceVersion", true, false),
    ("InterPodAffinityHostnameFastPath", false, false),
    ("JobManagedBy", true, true),
    ("KMSv1", false, false),
    ("KubeProxyIPVS", true, false),
    ("KubeProxyNFTablesLocalhostNodePorts", false, false),
    ("KubeletAllocatedPodsEndpoint", false, false),
    ("KubeletCgroupDriverFromCRI", true, true),
    ("KubeletCrashLoopBackOffMax", true, false),
    ("KubeletEnsureSecretPulledImages", true, false),
    ("KubeletFineGrainedAuthz", true, true),
    ("KubeletInUserNamespace", true, false),
    ("KubeletPSI", true, true),
    ("KubeletPodResourcesDynamicResources", true, true),
    ("KubeletPodResourcesGet", true, true),
    ("KubeletPodResourcesListUseActivePods", true, false),
    ("KubeletRegistrationGetOnExistsOnly", false, false),
    ("KubeletSeparateDiskGC", true, false),
    ("KubeletServiceAccountTokenForCredentialProviders", true, false),
    ("KubeletTracing", true, true),
    ("ListFromCacheSnapshot", true, false),
    ("LocalStorageCapacityIsolationFSQuotaMonitoring", false, false),
    ("LoggingAlphaOptions", false, false),
    ("LoggingBetaOptions", true, false),
    ("ManifestBasedAdmissionControlConfig", true, false),
    ("MatchLabelKeysInPodAffinity", true, true),
    ("MatchLabelKeysInPodTopologySpread", true, false),
    ("MatchLabelKeysInPodTopologySpreadSelectorMerge", true, false),
    ("MaxUnavailableStatefulSet", true, false),
    ("MemoryQoS", true, false),
    ("MultiCIDRServiceAllocator", true, true),
    ("MutableCSINodeAllocatableCount", true, true),
    ("MutablePVNodeAffinity", false, false),
    ("MutablePodResourcesForSuspendedJobs", true, false),
    ("MutableSchedulingDirectivesForSuspendedJobs", true, false),
    ("MutatingAdmissionPolicy", true, false),
    ("NFTablesNetlink", true, false),
    ("NFTablesProxyMode", true, true),
    ("NativeHistograms", true, false),
    ("NodeControllerLeaseCircuitBreaker", true, false),
    ("NodeDeclaredFeatures", true, true),
    ("NodeInclusionPolicyInPodTopologySpread", true, true),
    ("NodeLifecycleConditions", false, false),
    ("NodeLogQuery", true, true),
    ("NodeSwap", true, true),
    ("NominatedNodeNameForExpectation", true, false),
    ("OpenAPIEnums", true, false),
    ("OpportunisticBatching", true, false),
    ("PLEGOnDemandRelist", true, true),
    ("PersistentVolumeClaimUnusedSinceTime", true, false),
    ("PodAndContainerStatsFromCRI", false, false),
    ("PodCertificateRequest", true, false),
    ("PodDeletionCost", true, false),
    ("PodGroupPreemptionPolicy", false, false),
    ("PodLevelResourceManagers", false, false),
    ("PodLevelResources", true, false),
    ("PodLevelResourcesFixDefaulting", true, false),
    ("PodLevelResourcesFixKubeletQOSClass", true, false),
    ("PodLogsQuerySplitStreams", false, false),
    ("PodObservedGenerationTracking", true, true),
    ("PodReadyToStartContainersCondition", true, true),
    ("PodSchedulingReadiness", true, true),
    ("PodTopologyLabelsAdmission", true, false),
    ("PodsAPI", true, false),
    ("PortForwardWebsockets", true, false),
    ("PreferSameTrafficDistribution", true, true),
    ("ProcMountType", true, true),
    ("QOSReserved", false, false),
    ("RecoverVolumeExpansionFailure", true, true),
    ("RecursiveReadOnlyMounts", true, true),
    ("ReduceDefaultCrashLoopBackOffDecay", false, false),
    ("RelaxedEnvironmentVariableValidation", true, true),
    ("RelaxedServiceNameValidation", true, true),
    ("ReloadKubeletClientCAFile", true, false),
    ("ReloadKubeletServerCertificateFile", true, false),
    ("RemoteRequestHeaderUID", true, false),
    ("ResourceHealthStatus", true, false),
    ("ResourceHealthStatusMessage", true, false),
    ("RestartAllContainersOnContainerExits", true, false),
    ("RotateKubeletServerCertificate", true, false),
    ("RuntimeClassInImageCriApi", false, false),
    ("SELinuxChangePolicy", true, true),
    ("SELinuxMount", true, false),
    ("SELinuxMountReadWriteOncePod", true, true),
    ("SchedulerAsyncAPICalls", false, false),
    ("SchedulerAsyncPreemption", true, false),
    ("SchedulerPopFromBackoffQ", true, false),
    ("SchedulerPreQueueingHints", false, false),
    ("SeparateCacheWatchRPC", false, true),
    ("SeparateTaintEvictionController", true, true),
    ("ServiceAccountNodeAudienceRestriction", true, false),
    ("ServiceAccountTokenJTI", true, true),
    ("ServiceAccountTokenNodeBinding", true, true),
    ("ServiceAccountTokenNodeBindingValidation", true, true),
    ("ServiceAccountTokenPodNodeInfo", true, true),
    ("ServiceCIDRStatusFieldWiping", true, false),
    ("ShardedListAndWatch", false, false),
    ("SizeBasedListCostEstimate", true, false),
    ("StaleControllerConsistencyDaemonSet", true, false),
    ("StaleControllerConsistencyHPA", true, false),
    ("StaleControllerConsistencyJob", true, false),
    ("StaleControllerConsistencyReplicaSet", true, false),
    ("StaleControllerConsistencyStatefulSet", true, false),
    ("StatefulSetRecreateStrategy", false, false),
    ("StatefulSetSemanticRevisionComparison", true, false),
    ("StorageCapacityScoring", true, false),
    ("StorageNamespaceIndex", true, false),
    ("StorageVersionAPI", false, false),
    ("StorageVersionHash", true, false),
    ("StorageVersionMigrator", true, false),
    ("StrictIPCIDRValidation", true, false),
    ("StructuredAuthenticationConfigurationEgressSelector", true, false),
    ("StructuredAuthenticationConfigurationJWKSMetrics", true, false),
    ("SupplementalGroupsPolicy", true, true),
    ("SystemdWatchdog", true, true),
    ("TaintTolerationComparisonOperators", false, false),
    ("TokenRequestServiceAccountUIDValidation", true, false),
    ("TopologyAwareWorkloadScheduling", false, false),
    ("TopologyManagerPolicyAlphaOptions", false, false),
    ("TopologyManagerPolicyBetaOptions", true, false),
    ("TopologyManagerPolicyOptions", true, true),
    ("TranslateStreamCloseWebsocketRequests", true, false),
    ("UnauthenticatedHTTP2DOSMitigation", true, false),
    ("UnknownVersionInteroperabilityProxy", true, false),
    ("UnlockWhileProcessingFIFO", true, false),
    ("UserNamespacesHostNetworkSupport", false, false),
    ("UserNamespacesSupport", true, true),
    ("VolumeAttributesClass", true, true),
    ("VolumeBindMountOptions", false, false),
    ("VolumeLimitScaling", true, false),
    ("WatchCacheInitializationPostStartHook", true, true),
    ("WatchList", true, false),
    ("WatchListClient", true, false),
    ("WatchListCompression", true, false),
    ("WebhookRoundTripLoadBalancing", true, false),
    ("WinDSR", true, true),
    ("WinOverlay", true, true),
    ("WindowsCPUAndMemoryAffinity", false, false),
    ("WindowsGracefulNodeShutdown", true, false),
    ("WindowsHostNetwork", false, false),
    ("WorkloadWithJob", false, false),
];

/// Gates that set every alpha or beta gate at once.
const ALL: &[&str] = &["AllAlpha", "AllBeta"];

/// Parses `--feature-gates` (`Name=true,Other=false`, names optionally as `kube:Name`) and
/// refuses what kube-controller-manager refuses, with its words.
pub fn parse(spec: &str) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) =
            pair.split_once('=').ok_or_else(|| format!("--feature-gates: missing bool value for {pair}"))?;
        let name = name.trim();
        let name = name.strip_prefix("kube:").unwrap_or(name);
        // Go's strconv.ParseBool, as the flag parses it.
        let value = match value.trim() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            other => return Err(format!("--feature-gates: invalid value of {name}={other}, err: strconv.ParseBool: parsing {other:?}: invalid syntax")),
        };
        if !ALL.contains(&name) {
            let Some(&(_, default, locked)) = GATES.iter().find(|(n, _, _)| *n == name) else {
                return Err(format!("--feature-gates: unrecognized feature gate: {name}"));
            };
            if locked && value != default {
                return Err(format!(
                    "--feature-gates: cannot set feature gate {name} to {value}, feature is locked to {default}"
                ));
            }
        }
        out.push((name.to_string(), value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_as_kube_controller_manager_parses_them() {
        assert_eq!(
            parse("VolumeAttributesClass=true, kube:APIResponseCompression=false,"),
            Ok(vec![("VolumeAttributesClass".into(), true), ("APIResponseCompression".into(), false)])
        );
        assert_eq!(parse("AllAlpha=false,AllBeta=T"), Ok(vec![("AllAlpha".into(), false), ("AllBeta".into(), true)]));
        assert_eq!(parse(""), Ok(vec![]));
        // A gate of another controller is known to KCM, so accepted here too.
        assert!(parse("AllowServiceExternalIPs=false").is_ok());
    }

    #[test]
    fn an_unknown_or_locked_gate_is_refused_with_upstream_words() {
        assert_eq!(parse("NoSuchGate=true"), Err("--feature-gates: unrecognized feature gate: NoSuchGate".into()));
        assert_eq!(
            parse("VolumeAttributesClass=false"),
            Err("--feature-gates: cannot set feature gate VolumeAttributesClass to false, feature is locked to true"
                .into())
        );
        assert!(parse("VolumeAttributesClass").unwrap_err().contains("missing bool value"));
        assert!(parse("VolumeAttributesClass=yes").unwrap_err().contains("invalid value of VolumeAttributesClass=yes"));
    }
}
