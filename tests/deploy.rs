//! The deployment files (issue #28): the Kubernetes manifests
//! (`deploy/kubernetes/`) validate against the Kubernetes schemas offline
//! (PyPI's kubernetes-validate, `--strict`), and their images, ports, probe
//! paths and mounts are what the binary serves: each probe path is asked of
//! a gateway or an rls started on the manifest's own configuration. The
//! systemd unit (`deploy/systemd/tollgate.service`) verifies with
//! `systemd-analyze verify`, its commands pointed at the built binary.

use std::path::Path;

use serde_yaml_ng::Value;
use tollgate_gateway::config::ServeConfig;
use tollgate_rls::RlsArguments;
use tollgate_test_support::gateway::Gateway;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every document of a manifest file.
fn documents(name: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/kubernetes").join(name)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).unwrap())
        .collect()
}

fn of_kind<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|document| document["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// The container of a Deployment, and its port numbers by name.
fn container(documents: &[Value]) -> (&Value, Vec<(String, u64)>) {
    let deployment = of_kind(documents, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let ports = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|port| {
            (
                port["name"].as_str().unwrap().to_owned(),
                port["containerPort"].as_u64().unwrap(),
            )
        })
        .collect();
    (container, ports)
}

fn port(ports: &[(String, u64)], name: &str) -> u64 {
    ports
        .iter()
        .find(|(port, _)| port == name)
        .map(|(_, number)| *number)
        .unwrap_or_else(|| panic!("no port {name}"))
}

/// The image deploy/image/build.sh tags by default.
fn built_image() -> String {
    let script = std::fs::read_to_string(Path::new(ROOT).join("deploy/image/build.sh")).unwrap();
    let line = script
        .lines()
        .find(|line| line.starts_with("TAG=\"${1:-"))
        .unwrap();
    line.trim_start_matches("TAG=\"${1:-")
        .trim_end_matches("}\"")
        .to_owned()
}

/// The security settings every container must have.
fn assert_hardened(container: &Value, pod: &Value) {
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(container["resources"]["requests"]["cpu"].is_string());
}

/// The resources of a manifest find each other: its Services and
/// PodDisruptionBudgets select the Deployment's pods by their labels, and
/// every port a Service targets is a port the container names.
fn assert_wired(documents: &[Value], ports: &[(String, u64)]) {
    let labels = &of_kind(documents, "Deployment")["spec"]["template"]["metadata"]["labels"];
    let selects = |selector: &Value| {
        let selector = selector.as_mapping().unwrap();
        assert!(!selector.is_empty());
        selector
            .iter()
            .all(|(name, value)| labels.get(name) == Some(value))
    };
    for document in documents {
        match document["kind"].as_str() {
            Some("Service") => {
                assert!(selects(&document["spec"]["selector"]), "{document:?}");
                for service_port in document["spec"]["ports"].as_sequence().unwrap() {
                    let target = service_port["targetPort"].as_str().unwrap();
                    port(ports, target);
                }
            }
            Some("PodDisruptionBudget") => {
                assert!(
                    selects(&document["spec"]["selector"]["matchLabels"]),
                    "{document:?}"
                );
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_manifest_is_what_the_binary_serves() {
    let documents = documents("gateway.yaml");
    let (container, ports) = container(&documents);
    assert_wired(&documents, &ports);
    let pod = &of_kind(&documents, "Deployment")["spec"]["template"]["spec"];
    assert_hardened(container, pod);
    assert_eq!(container["image"].as_str().unwrap(), built_image());
    assert_eq!(built_image(), "tollgate:latest");
    // Its configuration parses, and listens on the ports the pod names.
    let toml = of_kind(&documents, "ConfigMap")["data"]["gateway.toml"]
        .as_str()
        .unwrap();
    let config = ServeConfig::from_toml_str(toml).unwrap();
    assert_eq!(u64::from(config.listen.port()), port(&ports, "http"));
    assert_eq!(u64::from(config.admin.listen.port()), port(&ports, "admin"));
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    let arguments: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|argument| argument.as_str().unwrap())
        .collect();
    assert_eq!(
        arguments,
        ["serve", "--config", &format!("{mount}/gateway.toml")]
    );
    assert_eq!(
        container["env"][0]["name"].as_str(),
        Some(config.admin.token_env.as_str())
    );
    // The probes ask the admin listener paths the gateway answers 200, on
    // that configuration (its listeners moved to free loopback ports).
    let loopback = toml
        .replace("0.0.0.0:8080", "127.0.0.1:0")
        .replace("0.0.0.0:8081", "127.0.0.1:0");
    let gateway = Gateway::start(&loopback, 0).await;
    for probe in ["readinessProbe", "livenessProbe"] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["port"], "admin", "{probe}");
        let path = get["path"].as_str().unwrap();
        let answer = gateway
            .client
            .get(gateway.admin_url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{probe} {path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rls_manifest_is_a_drop_in_for_envoyproxy_ratelimit() {
    let documents = documents("rls.yaml");
    let (container, ports) = container(&documents);
    assert_wired(&documents, &ports);
    // The Service exposes each of the Go service's ports.
    let service: Vec<&str> = of_kind(&documents, "Service")["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|service_port| service_port["name"].as_str().unwrap())
        .collect();
    assert_eq!(service, ["http", "grpc", "debug"]);
    let pod = &of_kind(&documents, "Deployment")["spec"]["template"]["spec"];
    assert_hardened(container, pod);
    assert_eq!(container["image"].as_str().unwrap(), built_image());
    // The Go service's ports.
    let defaults = RlsArguments::defaults();
    assert_eq!(port(&ports, "http"), u64::from(defaults.port));
    assert_eq!(port(&ports, "grpc"), u64::from(defaults.grpc_port));
    assert_eq!(port(&ports, "debug"), u64::from(defaults.debug_port));
    // The YAML mounted where RUNTIME_ROOT / RUNTIME_SUBDIRECTORY /
    // RUNTIME_APPDIRECTORY (config by default) says, dot files ignored.
    let env = |name: &str| {
        container["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|variable| variable["name"] == name)
            .and_then(|variable| variable["value"].as_str())
            .unwrap_or_else(|| panic!("no {name}"))
            .to_owned()
    };
    assert_eq!(env("RUNTIME_IGNOREDOTFILES"), "true");
    // Not ready until a configuration of a domain is loaded.
    assert_eq!(env("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"), "true");
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(
        mount,
        format!(
            "{}/{}/{}",
            env("RUNTIME_ROOT"),
            env("RUNTIME_SUBDIRECTORY"),
            defaults.runtime_appdirectory
        )
    );
    // The ConfigMap holds the example, word for word.
    let example =
        std::fs::read_to_string(Path::new(ROOT).join("examples/rls/config/example.yaml")).unwrap();
    assert_eq!(
        of_kind(&documents, "ConfigMap")["data"]["example.yaml"].as_str(),
        Some(example.as_str())
    );
    // Readiness asks a path rls answers 200 on its HTTP port, with that
    // configuration; liveness only that the port answers (a configuration
    // that fails to load makes a pod unready, not restarted).
    let mut arguments = tollgate_test_support::rls::arguments();
    arguments.healthy_with_at_least_one_config_loaded = true;
    let (rls, _directory) = tollgate_test_support::rls::start_at_noon(&example, arguments).await;
    let http = rls.server().http_address().unwrap();
    let get = &container["readinessProbe"]["httpGet"];
    assert_eq!(get["port"], "http");
    let path = get["path"].as_str().unwrap();
    let answer = reqwest::get(format!("http://{http}{path}")).await.unwrap();
    assert_eq!(answer.status(), 200, "readinessProbe {path}");
    assert_eq!(container["livenessProbe"]["tcpSocket"]["port"], "http");
    tollgate_test_support::rls::stop(rls).await;
}

#[test]
#[cfg_attr(
    not(has_kubernetes_validate),
    ignore = "python3 -m pip install kubernetes-validate to run"
)]
fn the_manifests_validate_against_the_kubernetes_schemas() {
    let directory = Path::new(ROOT).join("deploy/kubernetes");
    let mut files: Vec<_> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "yaml")
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    let output = std::process::Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict"])
        .args(&files)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Every resource passed: 5 of the gateway, 2 of Redis, 4 of rls.
    assert_eq!(text.matches(" passed for resource ").count(), 11, "{text}");
}

#[test]
#[cfg_attr(
    not(has_systemd_analyze),
    ignore = "install systemd (systemd-analyze) to run"
)]
fn the_systemd_unit_verifies() {
    let unit =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/systemd/tollgate.service")).unwrap();
    for setting in [
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "ExecStartPre=/usr/local/bin/tollgate check-config --config /etc/tollgate/gateway.toml",
    ] {
        assert!(unit.lines().any(|line| line == setting), "{setting}");
    }
    // Its commands pointed at the binary built for this test (verify wants
    // them to exist).
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("tollgate.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/tollgate", env!("CARGO_BIN_EXE_tollgate")),
    )
    .unwrap();
    let output = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze runs");
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{errors}");
    // Not even a setting ignored with a warning.
    assert!(errors.trim().is_empty(), "{errors}");
}
