//! Services (`pkg/registry/core/service`): namespaced, ports defaulted and validated.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::validation::service;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Service",
    plural: "services",
    key: "services",
    singular: "service",
    namespaced: true,
    status_subresource: true,
    short_names: &["svc"],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Service>(value)
    }

    fn categories(&self) -> &'static [&'static str] {
        &["all"]
    }

    fn default(&self, obj: &mut Value) {
        service::default_service(obj);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        service::validate_service(obj, errs);
    }
}
