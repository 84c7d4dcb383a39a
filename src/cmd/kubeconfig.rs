//! `pv-controller kubeconfig --service-account NS/NAME`: a kubeconfig for `run` from the current
//! context's cluster and a new token of that ServiceAccount (TokenRequest, as `kubectl create
//! token` makes one), printed on stdout.

use super::{user, KubeconfigArgs};
use anyhow::Result;
use clap::Args;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::{AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `kubeconfig`.
#[derive(Args, Debug)]
pub struct KubeconfigCmdArgs {
    /// The ServiceAccount whose token the kubeconfig carries, as NAMESPACE/NAME (deploy/rbac.yaml
    /// creates kube-system/pv-controller).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub service_account: String,
    /// How long the token is valid (the API server may shorten it; `kubectl create token`'s
    /// default is one hour). When it expires, `run`'s requests are refused with 401: write a new
    /// kubeconfig and restart `run`.
    #[arg(long, default_value = "24h", value_parser = super::run::parse_duration)]
    pub duration: Duration,
    #[command(flatten)]
    pub kube: KubeconfigArgs,
}

/// The kubeconfig file `kube` points at (`--kubeconfig`, else the first of `KUBECONFIG`, else
/// `~/.kube/config`), read as kubectl reads it.
fn source(kube: &KubeconfigArgs) -> Result<(Kubeconfig, PathBuf)> {
    let path = kube.kubeconfig.clone().or_else(|| {
        std::env::var_os("KUBECONFIG")
            .and_then(|v| std::env::split_paths(&v).next())
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".kube/config")))
    });
    let Some(path) = path else { return Err(user("no kubeconfig: give --kubeconfig or set KUBECONFIG")) };
    let kc = Kubeconfig::read_from(&path).map_err(|e| user(format!("{}: {e}", path.display())))?;
    Ok((kc, path))
}

/// The cluster of the selected context, with a certificate authority given by path inlined (the
/// new file may live elsewhere).
fn cluster_of(kc: &Kubeconfig, path: &Path, kube: &KubeconfigArgs) -> Result<NamedCluster> {
    let shown = path.display().to_string();
    let cluster_name = match &kube.cluster {
        Some(c) => c.clone(),
        None => {
            let ctx_name = kube
                .context
                .clone()
                .or_else(|| kc.current_context.clone())
                .ok_or_else(|| user(format!("{shown}: no current context (give --context)")))?;
            let ctx = kc
                .contexts
                .iter()
                .find(|c| c.name == ctx_name)
                .and_then(|c| c.context.as_ref())
                .ok_or_else(|| user(format!("{shown}: context {ctx_name:?} not found")))?;
            ctx.cluster.clone()
        }
    };
    let mut named = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .cloned()
        .ok_or_else(|| user(format!("{shown}: cluster {cluster_name:?} not found")))?;
    let cluster: &mut Cluster =
        named.cluster.as_mut().ok_or_else(|| user(format!("{shown}: cluster {cluster_name:?} is empty")))?;
    if let Some(ca) = cluster.certificate_authority.take() {
        let ca_path = match path.parent() {
            Some(dir) if Path::new(&ca).is_relative() => dir.join(&ca),
            _ => PathBuf::from(&ca),
        };
        let pem = std::fs::read(&ca_path).map_err(|e| {
            user(format!("{shown}: cluster {cluster_name:?}: certificate-authority {}: {e}", ca_path.display()))
        })?;
        // Kubernetes' byte encoding is base64, as kubeconfig's `-data` fields are.
        let data = serde_json::to_value(k8s_openapi::ByteString(pem))?;
        cluster.certificate_authority_data = data.as_str().map(str::to_string);
    }
    Ok(named)
}

/// Writes the kubeconfig on stdout.
pub fn run(args: KubeconfigCmdArgs) -> Result<ExitCode> {
    let (ns, name) = args
        .service_account
        .split_once('/')
        .filter(|(n, s)| !n.is_empty() && !s.is_empty())
        .ok_or_else(|| user(format!("--service-account {:?}: give it as NAMESPACE/NAME", args.service_account)))?;
    let (kc, path) = source(&args.kube)?;
    let named = cluster_of(&kc, &path, &args.kube)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let token = rt.block_on(async {
        let (client, url, _) = args.kube.connect(Duration::from_secs(10)).await?;
        let api: Api<ServiceAccount> = Api::namespaced(client, ns);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(args.duration.as_secs() as i64),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answer = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| user(format!("token for serviceaccount {ns}/{name} from {url}: {e}")))?;
        answer.status.and_then(|s| s.token).ok_or_else(|| user(format!("{url} answered no token for {ns}/{name}")))
    })?;
    let user_name = format!("{ns}-{name}");
    let out = Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![named.clone()],
        auth_infos: vec![NamedAuthInfo {
            name: user_name.clone(),
            auth_info: Some(AuthInfo { token: Some(token.into()), ..Default::default() }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: user_name.clone(),
            context: Some(Context { cluster: named.name.clone(), user: Some(user_name.clone()), ..Default::default() }),
            other: Default::default(),
        }],
        current_context: Some(user_name),
        ..Default::default()
    };
    print!("{}", text(&out)?);
    Ok(ExitCode::SUCCESS)
}

/// A kubeconfig as YAML (JSON is YAML, and kube reads it; kubectl too).
fn text(kc: &Kubeconfig) -> Result<String> {
    Ok(serde_json::to_string_pretty(kc)? + "\n")
}
