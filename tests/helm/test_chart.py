"""The Helm chart, offline: lint, render per template branch, Kubernetes schema checks.

helm-python-sdk (Helm 4's library through ctypes) lints and renders the chart and applies
values.schema.json; kubernetes-validate checks every rendered object against the
Kubernetes 1.30 schemas in strict mode (unknown fields are errors). No cluster is involved.

Custom resources (ServiceMonitor, PodMonitor, PrometheusRule, KEDA's ScaledObject) have no
schema in kubernetes-validate: their shape is checked by focused tests instead (the fields
their operators read, and that every metric they name is defined in fastapply/metrics.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip(
    "helm_python",
    reason="helm-python-sdk is not installed: pip install -e '.[chart]' (or '.[dev]')")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate",
    reason="kubernetes-validate is not installed: pip install -e '.[chart]' (or '.[dev]')")
yaml = pytest.importorskip("yaml", reason="pyyaml is not installed: pip install -e '.[chart]'")

CHART = Path(__file__).resolve().parents[2] / "helm" / "fastapply"
KUBE_VERSION = "1.30"
#: Custom resources: no schema in kubernetes-validate; see the focused checks below.
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ScaledObject"}
RELEASE, NAMESPACE = "fa", "ml"
FULLNAME = f"{RELEASE}-fastapply"

#: One override set per template branch.
SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cpu-smoke": {"gpu": {"count": 0}},
    "source-pvc": {
        "engine": {"source": "pvc", "pvc": {"existingClaim": "fastapply-engines"}},
        "serve": {"runtime": "trtllm-engine"},
    },
    "source-s3": {
        "engine": {"source": "s3", "s3": {
            "uri": "s3://engines/fastapply/qwen-h100.tar.gz",
            "endpointUrl": "http://minio.storage:9000",
            "sha256": "ab" * 32,
            "credentialsSecret": {"name": "engine-s3", "accessKeyIdKey": "id",
                                  "secretAccessKeyKey": "secret"}}},
    },
    "source-build-hub": {
        "engine": {"pvc": {"existingClaim": "shared-engines"}, "build": {
            "profile": "llama-3.1-8b", "adapterPath": "adapters/fast-apply",
            "model": {"hubRepo": "meta-llama/Llama-3.1-8B-Instruct",
                      "hubTokenSecret": "hf-token"}}},
        "serve": {"runtime": "trtllm-engine"},
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    },
    "gpu-products-mig": {
        "gpu": {"resourceName": "nvidia.com/mig-3g.40gb",
                "products": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL"]},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 50, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname", "labelSelector": {
                        "matchLabels": {"app.kubernetes.io/name": "fastapply"}}}}]}},
        "runtimeClassName": "nvidia",
    },
    "keda-podmonitor": {
        "autoscaling": {"enabled": True, "kind": "keda", "keda": {
            "authenticationRef": "prometheus-auth"}},
        "podMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True, "alertLabels": {"team": "editor"}},
        "loadtest": {"test": {"enabled": False}},
    },
    "everything-on": {
        "autoscaling": {"enabled": True, "maxReplicas": 6},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"},
                           "extraRules": [{"record": "fastapply:queued:sum",
                                           "expr": "sum(fastapply_requests_queued)"}]},
        "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "GPU"}},
        "extraVolumes": [{"name": "ca", "secret": {"secretName": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True}],
        "runtimeClassName": "nvidia",
        "loadtest": {"test": {"verify": True, "users": 4}},
        "ingress": {"enabled": True, "tlsSecretName": "fastapply-tls"},
        "networkPolicy": {"enabled": True,
                          "clientNamespaceLabels": {"team": "editor"},
                          "extraIngress": [{"from": [{"namespaceSelector": {"matchLabels": {
                              "kubernetes.io/metadata.name": "ingress-nginx"}}}]}]},
        "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        "serve": {"contextLimit": 262144, "modelRepository": "model_repository",
                  "extraArgs": ["--dtype", "bfloat16"]},
        "extraEnv": [{"name": "TRTLLM_LOG_LEVEL", "value": "info"}],
        "ports": {"grpc": 9001},
    },
    # API keys from a Secret, with the OpenAI front and the client labels of the policy.
    "auth": {
        "auth": {"existingSecret": "fastapply-keys"},
        "ports": {"openai": 8080},
        "networkPolicy": {"enabled": True},
    },
}


# -- helpers --------------------------------------------------------------------------------


@cache
def _render(values_json: str) -> tuple[dict[str, Any], ...]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(json.loads(values_json), name=RELEASE, namespace=NAMESPACE)
    objects: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return tuple(objects)


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return list(_render(json.dumps(values or {}, sort_keys=True)))


def notes(values: dict[str, Any] | None = None) -> str:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = of_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def server(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = pod_spec(one(objects, "Deployment"))["containers"]
    return container


def init_containers(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    spec = pod_spec(one(objects, "Deployment"))
    return {c["name"]: c for c in spec.get("initContainers", [])}


def arg_after(args: list[str], flag: str) -> str:
    assert flag in args, f"{flag} missing from {args}"
    return args[args.index(flag) + 1]


def volumes(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in pod_spec(obj)["volumes"]}


# -- lint and Kubernetes schemas -----------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_strict_lint_is_clean(scenario: str) -> None:
    report = helm.lint(CHART, SCENARIOS[scenario], strict=True, namespace=NAMESPACE,
                       kube_version=f"v{KUBE_VERSION}.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not problems and not report["errors"], problems or report["errors"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_is_valid_kubernetes(scenario: str) -> None:
    objects = render(SCENARIOS[scenario])
    assert {"Deployment", "Service"} <= {o["kind"] for o in objects}
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def test_every_object_is_in_the_release_namespace_and_labelled() -> None:
    for obj in render(SCENARIOS["everything-on"]):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == RELEASE, obj["kind"]
        assert obj["metadata"]["name"].startswith(FULLNAME), obj["kind"]


# -- the serving pod -------------------------------------------------------------------------


def test_default_serves_trtllm_pytorch_on_one_gpu_from_the_build_output() -> None:
    objects = render()
    c = server(objects)
    assert c["args"][0] == "serve"
    assert arg_after(c["args"], "--runtime") == "trtllm-pytorch"
    assert arg_after(c["args"], "--model") == "/models/fastapply/current/quantized/hf"
    assert arg_after(c["args"], "--host") == "0.0.0.0"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["resources"]["requests"]["memory"] == "8Gi"  # values' own resources are kept
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["engine"]["mountPath"] == "/models" and mounts["engine"]["readOnly"]


def test_gpu_count_zero_serves_deterministic_on_cpu_without_an_engine() -> None:
    objects = render({"gpu": {"count": 0}})
    c = server(objects)
    assert arg_after(c["args"], "--runtime") == "deterministic"
    assert not {"--model", "--engine", "--model-repository"} & set(c["args"])
    assert "nvidia.com/gpu" not in c["resources"].get("limits", {})
    assert "nvidia.com/gpu" not in json.dumps(c["resources"])
    assert "engine" not in volumes(one(objects, "Deployment"))
    assert not init_containers(objects)
    assert not of_kind(objects, "Job") and not of_kind(objects, "PersistentVolumeClaim")
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_gpu_count_sets_the_gpu_limit_of_server_and_build() -> None:
    objects = render({"gpu": {"count": 2}})
    assert server(objects)["resources"]["limits"]["nvidia.com/gpu"] == 2
    (build,) = pod_spec(one(objects, "Job"))["containers"]
    assert build["resources"]["limits"]["nvidia.com/gpu"] == 2


def test_named_ports_and_probe_paths() -> None:
    c = server(render())
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
        "http": 8000, "grpc": 8001, "metrics": 8002}
    assert c["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert c["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    startup = c["startupProbe"]
    # The startup budget is the engine-load allowance: 15 minutes by default.
    assert startup["periodSeconds"] * startup["failureThreshold"] == 900


def test_startup_budget_follows_values() -> None:
    c = server(render({"probes": {"startup": {"failureThreshold": 180}}}))
    assert c["startupProbe"]["failureThreshold"] == 180
    assert c["startupProbe"]["periodSeconds"] == 10  # the rest of the block is kept


@pytest.mark.parametrize("pod_grace_s, drain_s", [(60, "30"), (600, "570"), (20, "0")])
def test_serve_drains_for_the_pod_grace_period_less_its_exit_margin(
        pod_grace_s: int, drain_s: str) -> None:
    """serve needs > 15 s after its drain to stop Triton and report drops before SIGKILL."""
    objects = render({"terminationGracePeriodSeconds": pod_grace_s})
    assert one(objects, "Deployment")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"] == pod_grace_s
    assert arg_after(server(objects)["args"], "--grace-period-s") == drain_s


def test_ports_follow_values_everywhere() -> None:
    objects = render({"ports": {"http": 9000, "grpc": 9001, "metrics": 9002}})
    c = server(objects)
    assert (arg_after(c["args"], "--http-port"), arg_after(c["args"], "--grpc-port"),
            arg_after(c["args"], "--metrics-port")) == ("9000", "9001", "9002")
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
        "http": 9000, "grpc": 9001, "metrics": 9002}
    svc = {p["name"]: p for p in one(objects, "Service")["spec"]["ports"]}
    assert svc["grpc"]["port"] == 9001 and svc["grpc"]["targetPort"] == "grpc"


def test_openai_port_is_off_by_default_and_a_named_port_of_the_pod_when_set() -> None:
    default = render({"networkPolicy": {"enabled": True}})
    assert "--openai-port" not in server(default)["args"]
    assert "openai" not in {p["name"] for p in one(default, "Service")["spec"]["ports"]}
    objects = render({"ports": {"openai": 8080}, "networkPolicy": {"enabled": True}})
    c = server(objects)
    assert arg_after(c["args"], "--openai-port") == "8080"
    assert {p["name"]: p["containerPort"] for p in c["ports"]}["openai"] == 8080
    svc = {p["name"]: p for p in one(objects, "Service")["spec"]["ports"]}
    assert (svc["openai"]["port"], svc["openai"]["targetPort"]) == (8080, "openai")
    clients = one(objects, "NetworkPolicy")["spec"]["ingress"][0]
    assert {p["port"] for p in clients["ports"]} == {"http", "grpc", "openai"}


def test_service_is_cluster_ip_with_grpc_as_http2() -> None:
    svc = one(render(), "Service")
    assert svc["spec"]["type"] == "ClusterIP"
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert ports["grpc"]["appProtocol"] == "kubernetes.io/h2c"
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "server"
    grpc = render({"service": {"grpcAppProtocol": "grpc"}})
    assert {p["name"]: p for p in one(grpc, "Service")["spec"]["ports"]}["grpc"][
        "appProtocol"] == "grpc"


@pytest.mark.parametrize("scenario", ["defaults", "source-s3", "source-build-hub", "auth"])
def test_every_container_runs_non_root_read_only_without_escalation(scenario: str) -> None:
    for obj in render(SCENARIOS[scenario]):
        if obj["kind"] not in ("Deployment", "Job", "Pod"):
            continue
        spec = obj["spec"] if obj["kind"] == "Pod" else pod_spec(obj)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 1000
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc["capabilities"]["drop"] == ["ALL"], c["name"]


def test_writable_dirs_are_empty_dirs_and_shm_is_memory_backed() -> None:
    objects = render({"shmSize": "8Gi"})
    vols = volumes(one(objects, "Deployment"))
    assert vols["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert "emptyDir" in vols["tmp"] and "emptyDir" in vols["cache"]
    mounts = {m["mountPath"]: m["name"] for m in server(objects)["volumeMounts"]}
    assert mounts["/dev/shm"] == "shm" and mounts["/tmp"] == "tmp"
    assert mounts["/opt/fastapply/cache"] == "cache"


def test_scheduling_values_reach_the_pod() -> None:
    values = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
              "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                  "nodeSelectorTerms": [{"matchExpressions": [{
                      "key": "zone", "operator": "In", "values": ["a"]}]}]}}}}
    spec = pod_spec(one(render(values), "Deployment"))
    assert spec["nodeSelector"] == values["nodeSelector"]
    assert spec["tolerations"] == values["tolerations"]
    assert spec["affinity"] == values["affinity"]


# -- engine sources ----------------------------------------------------------------------------


def test_pvc_source_mounts_the_claim_read_only_and_serves_the_engine() -> None:
    objects = render(SCENARIOS["source-pvc"])
    claim = volumes(one(objects, "Deployment"))["engine"]["persistentVolumeClaim"]
    assert claim == {"claimName": "fastapply-engines", "readOnly": True}
    args = server(objects)["args"]
    assert arg_after(args, "--runtime") == "trtllm-engine"
    assert arg_after(args, "--engine") == "/models/fastapply/current/engine"
    assert arg_after(args, "--tokenizer") == "/models/fastapply/current/quantized/hf"
    assert not of_kind(objects, "Job") and not of_kind(objects, "PersistentVolumeClaim")
    assert not init_containers(objects)


def test_s3_source_downloads_with_secret_credentials_into_an_empty_dir() -> None:
    objects = render(SCENARIOS["source-s3"])
    inits = init_containers(objects)
    assert list(inits) == ["fetch-engine", "unpack-engine"]
    env = {e["name"]: e for e in inits["fetch-engine"]["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {
        "name": "engine-s3", "key": "id"}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "engine-s3", "key": "secret"}
    assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio.storage:9000"
    assert env["ENGINE_URI"]["value"] == "s3://engines/fastapply/qwen-h100.tar.gz"
    assert "aws s3 cp" in inits["fetch-engine"]["args"][0]
    unpack = {e["name"]: e["value"] for e in inits["unpack-engine"]["env"]}
    assert unpack["ENGINE_SHA256"] == "ab" * 32 and unpack["ENGINE_ROOT"] == "/models/fastapply"
    assert "sha256sum -c" in inits["unpack-engine"]["args"][0]
    assert volumes(one(objects, "Deployment"))["engine"]["emptyDir"]["sizeLimit"] == "80Gi"
    assert not of_kind(objects, "Job")


def test_s3_without_a_secret_uses_the_pod_identity() -> None:
    objects = render({"engine": {"source": "s3", "s3": {"uri": "s3://b/engine.tar.gz"}},
                      "serviceAccount": {"annotations": {
                          "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/engines"}}})
    names = {e["name"] for e in init_containers(objects)["fetch-engine"]["env"]}
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"} & names
    sa = one(objects, "ServiceAccount")
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith("engines")


def test_build_source_runs_fastapply_build_all_in_a_gpu_job_onto_a_created_pvc() -> None:
    objects = render()
    job = one(objects, "Job")
    (build,) = pod_spec(job)["containers"]
    cmd = build["args"][2:]  # after the shell script and $0
    assert cmd[:3] == ["fastapply", "build", "all"]
    assert arg_after(cmd, "--config") == "qwen2.5-coder-1.5b"
    assert arg_after(cmd, "--out") == "/models/fastapply"
    assert arg_after(cmd, "--model") == "/models/hf/model"
    assert build["resources"]["limits"]["nvidia.com/gpu"] == 1
    pvc = one(objects, "PersistentVolumeClaim")
    assert volumes(job)["engine"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert volumes(one(objects, "Deployment"))["engine"]["persistentVolumeClaim"] == {
        "claimName": pvc["metadata"]["name"], "readOnly": True}
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # The serving pod waits for this build's marker, not just any engine.
    build_id = {e["name"]: e["value"] for e in build["env"]}["BUILD_ID"]
    wait = init_containers(objects)["wait-for-engine"]
    assert {e["name"]: e["value"] for e in wait["env"]}["BUILD_ID"] == build_id
    assert job["metadata"]["name"].endswith(build_id)
    # Build pods are not serving pods: the Service must not select them.
    assert pod_spec(job) and job["spec"]["template"]["metadata"]["labels"][
        "app.kubernetes.io/component"] == "build"


def test_build_with_hub_model_adapter_and_existing_claim() -> None:
    objects = render(SCENARIOS["source-build-hub"])
    job = one(objects, "Job")
    spec = pod_spec(job)
    (download,) = spec["initContainers"]
    assert download["args"][1:] == ["meta-llama/Llama-3.1-8B-Instruct", "main", "/models/hf/model"]
    token = {e["name"]: e for e in download["env"]}["HF_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "HF_TOKEN"}
    cmd = spec["containers"][0]["args"]
    assert arg_after(cmd, "--config") == "llama-3.1-8b"
    assert arg_after(cmd, "--adapter") == "/models/adapters/fast-apply"
    assert volumes(job)["engine"]["persistentVolumeClaim"]["claimName"] == "shared-engines"
    assert not of_kind(objects, "PersistentVolumeClaim")
    # Built on the serving GPU type: the build inherits the serving nodeSelector.
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_a_changed_build_gets_a_new_job_and_rolls_the_pods() -> None:
    def ids(values: dict[str, Any]) -> tuple[str, str]:
        objects = render(values)
        annotations = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return one(objects, "Job")["metadata"]["name"], annotations["fastapply.io/build-id"]

    base = ids({})
    assert base == ids({"replicaCount": 3})  # serving-only change: same build
    assert base[0] != ids({"engine": {"build": {"profile": "qwen2.5-coder-7b"}}})[0]
    newer = ids({"image": {"tag": "0.2.0"}})  # new image, new TensorRT-LLM: rebuild
    assert base[0] != newer[0] and base[1] != newer[1]
    assert all(len(name) <= 63 for name in (base[0], newer[0]))


def test_prerendered_repository_is_passed_as_is() -> None:
    args = server(render(SCENARIOS["everything-on"]))["args"]
    assert arg_after(args, "--model-repository") == "/models/fastapply/current/model_repository"
    assert "--model" not in args
    assert arg_after(args, "--context-limit") == "262144"
    assert args[-2:] == ["--dtype", "bfloat16"]


# -- optional objects --------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [False, True])
def test_hpa_only_when_enabled_and_it_owns_the_replica_count(enabled: bool) -> None:
    objects = render({"autoscaling": {"enabled": enabled}, "replicaCount": 2})
    hpas = of_kind(objects, "HorizontalPodAutoscaler")
    deployment = one(objects, "Deployment")
    if not enabled:
        assert not hpas and deployment["spec"]["replicas"] == 2
        return
    (hpa,) = hpas
    assert "replicas" not in deployment["spec"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    # The model's queue: Triton's nv_inference_pending_request_count stays 0 under overload.
    assert metric["pods"]["metric"]["name"] == "fastapply_requests_queued"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "2"}
    assert not of_kind(objects, "ScaledObject")


@pytest.mark.parametrize("enabled", [False, True])
def test_service_monitor_only_when_enabled(enabled: bool) -> None:
    monitors = of_kind(render({"serviceMonitor": {"enabled": enabled,
                                                  "labels": {"release": "prom"}}}),
                       "ServiceMonitor")
    if not enabled:
        assert not monitors
        return
    (monitor,) = monitors
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


def test_optional_objects_are_off_by_default() -> None:
    objects = render()
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"Ingress", "NetworkPolicy", "PodDisruptionBudget",
                        "HorizontalPodAutoscaler", "ServiceMonitor", "PodMonitor",
                        "PrometheusRule", "ScaledObject", "ConfigMap"}
    spec = pod_spec(one(objects, "Deployment"))
    assert "runtimeClassName" not in spec and "affinity" not in spec
    assert {v["name"] for v in spec["volumes"]} == {"shm", "tmp", "cache", "engine"}


def test_ingress_routes_grpc_to_the_grpc_port() -> None:
    ingress = one(render(SCENARIOS["everything-on"]), "Ingress")
    assert ingress["metadata"]["annotations"][
        "nginx.ingress.kubernetes.io/backend-protocol"] == "GRPC"
    (rule,) = ingress["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": FULLNAME, "port": {"name": "grpc"}}
    assert ingress["spec"]["tls"][0]["secretName"] == "fastapply-tls"


def test_network_policy_admits_labelled_clients_and_prometheus_only() -> None:
    policy = one(render(SCENARIOS["everything-on"]), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    clients, prometheus, extra = policy["spec"]["ingress"]
    assert clients["from"] == [{"podSelector": {"matchLabels": {"fastapply.io/client": "true"}},
                                "namespaceSelector": {"matchLabels": {"team": "editor"}}}]
    assert {p["port"] for p in clients["ports"]} == {"http", "grpc"}
    assert {p["port"] for p in prometheus["ports"]} == {"metrics"}
    peer = prometheus["from"][0]
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert extra == SCENARIOS["everything-on"]["networkPolicy"]["extraIngress"][0]


def test_pod_disruption_budget() -> None:
    pdb = one(render(SCENARIOS["everything-on"]), "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {
        "app.kubernetes.io/name": "fastapply", "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": "server"}}}
    default = one(render({"podDisruptionBudget": {"enabled": True}}), "PodDisruptionBudget")
    assert default["spec"]["maxUnavailable"] == 1 and "minAvailable" not in default["spec"]


def test_service_account_can_be_left_to_an_existing_one() -> None:
    objects = render({"serviceAccount": {"create": False, "name": "editors"}})
    assert not of_kind(objects, "ServiceAccount")
    assert pod_spec(one(objects, "Deployment"))["serviceAccountName"] == "editors"


def test_notes_show_the_client_command() -> None:
    text = notes({"ports": {"grpc": 9001}})
    assert "fastapply apply app.py edit.txt --url localhost:9001" in text
    assert f"port-forward svc/{FULLNAME} 9001:9001" in text
    assert "logs -f job/" in text  # the default builds the engine first
    assert "deterministic" in notes({"gpu": {"count": 0}})


# -- scheduling, volumes, GPUs ---------------------------------------------------------------


def node_terms(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [term["matchExpressions"] for term in required["nodeSelectorTerms"]]


PRODUCT = {"key": "nvidia.com/gpu.product", "operator": "In",
           "values": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL"]}


def test_gpu_products_are_required_in_every_node_term_of_server_and_build() -> None:
    values = SCENARIOS["gpu-products-mig"]
    objects = render(values)
    for obj in (one(objects, "Deployment"), one(objects, "Job")):
        spec = pod_spec(obj)
        # ANDed into each of the user's terms (terms are ORed: adding a term would loosen it)
        assert node_terms(spec) == [
            [{"key": "zone", "operator": "In", "values": ["a"]}, PRODUCT],
            [{"key": "pool", "operator": "In", "values": ["gpu"]}, PRODUCT]], obj["kind"]
        assert spec["affinity"]["podAntiAffinity"] == values["affinity"]["podAntiAffinity"]
        assert spec["runtimeClassName"] == "nvidia"
    # Without user affinity: one term with the product; without products: nothing added.
    alone = pod_spec(one(render({"gpu": {"products": ["NVIDIA-L40S"]}}), "Deployment"))
    assert node_terms(alone) == [[dict(PRODUCT, values=["NVIDIA-L40S"])]]
    # The CPU smoke runtime needs no GPU, so no GPU product either.
    cpu = pod_spec(one(render({"gpu": {"count": 0, "products": ["NVIDIA-L40S"]}}), "Deployment"))
    assert "affinity" not in cpu


def test_mig_profile_is_the_gpu_resource_of_server_and_build() -> None:
    objects = render(SCENARIOS["gpu-products-mig"])
    assert server(objects)["resources"]["limits"] == {"memory": "24Gi",
                                                      "nvidia.com/mig-3g.40gb": 1}
    (build,) = pod_spec(one(objects, "Job"))["containers"]
    assert build["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == 1
    assert "nvidia.com/gpu" not in json.dumps(build["resources"])


def test_extra_volumes_are_added_to_the_serving_pod() -> None:
    objects = render(SCENARIOS["everything-on"])
    assert volumes(one(objects, "Deployment"))["ca"] == {"name": "ca",
                                                          "secret": {"secretName": "corp-ca"}}
    mounts = {m["name"]: m for m in server(objects)["volumeMounts"]}
    assert mounts["ca"] == {"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True}
    assert mounts["engine"]["mountPath"] == "/models"  # the chart's own mounts stay


# -- autoscaling ------------------------------------------------------------------------------


def test_keda_scaled_object_replaces_the_hpa_and_sums_the_queue() -> None:
    objects = render(SCENARIOS["keda-podmonitor"])
    assert not of_kind(objects, "HorizontalPodAutoscaler")  # KEDA creates its own
    assert "replicas" not in one(objects, "Deployment")["spec"]
    scaled = one(objects, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": FULLNAME}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 4)
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
        "stabilizationWindowSeconds"] == 600
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["query"] == (
        f'sum(fastapply_requests_queued{{namespace="{NAMESPACE}", pod=~"{FULLNAME}-.*"}})')
    assert trigger["metadata"]["threshold"] == "2"
    assert trigger["metadata"]["serverAddress"].startswith("http")
    assert trigger["authenticationRef"] == {"name": "prometheus-auth"}
    own = render({"autoscaling": {"enabled": True, "kind": "keda",
                                  "keda": {"query": "sum(x)"}}})
    assert one(own, "ScaledObject")["spec"]["triggers"][0]["metadata"]["query"] == "sum(x)"


# -- monitoring -------------------------------------------------------------------------------


def test_pod_monitor_scrapes_the_serving_pods_metrics_port() -> None:
    objects = render(SCENARIOS["keda-podmonitor"])
    assert not of_kind(objects, "ServiceMonitor")
    monitor = one(objects, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"] == pod_spec_labels(one(objects, "Deployment"))
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "15s",
                        "scrapeTimeout": "10s"}


def pod_spec_labels(deployment: dict[str, Any]) -> dict[str, str]:
    """The Deployment's selector, checked to match its pods' labels."""
    selector: dict[str, str] = deployment["spec"]["selector"]["matchLabels"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    return selector


def rules(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (group,) = one(objects, "PrometheusRule")["spec"]["groups"]
    return {r.get("alert") or r["record"]: r for r in group["rules"]}


_METRIC = re.compile(r"\b((?:fastapply|nv|DCGM|kube)_[A-Za-z0-9_]+)\b")


def defined_metric_names() -> set[str]:
    """Every fastapply_* name the PROMETHEUS_* constants of fastapply/metrics.py define."""
    from fastapply import metrics

    found: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, str) and value.startswith("fastapply_"):
            found.add(value)
        elif isinstance(value, tuple | list):
            for item in value:
                collect(item)

    for name, value in vars(metrics).items():
        if name.startswith("PROMETHEUS_"):
            collect(value)
    return found


#: The queue metrics the Triton model publishes (fastapply/metrics.py PROMETHEUS_QUEUE, added
#: by the branch that instruments the model's queue; their names were fixed in advance).
#: Accepted by name only while PROMETHEUS_QUEUE is absent, i.e. until that branch is merged.
QUEUE_METRICS = {"fastapply_requests_queued", "fastapply_requests_in_flight",
                 "fastapply_queue_time_ms_total"}


def assert_metrics_defined(text: str) -> set[str]:
    from fastapply import metrics

    used = {m for m in _METRIC.findall(text) if m.startswith("fastapply_")}
    pending = set() if hasattr(metrics, "PROMETHEUS_QUEUE") else QUEUE_METRICS
    assert used - defined_metric_names() - pending == set(), "undefined fastapply metrics"
    return used


def test_prometheus_rule_alerts_on_queue_to_compute_ratio_and_queued_requests() -> None:
    objects = render(SCENARIOS["keda-podmonitor"])
    rule = one(objects, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    alerts = rules(objects)
    assert set(alerts) == {"FastApplyQueueingHigh", "FastApplyRequestsQueued", "FastApplyErrors",
                           "FastApplyAtMaxReplicas"}
    matchers = f'{{namespace="{NAMESPACE}", pod=~"{FULLNAME}-.*"}}'
    ratio = " ".join(alerts["FastApplyQueueingHigh"]["expr"].split())
    assert ratio == (
        f"sum by (namespace, pod) (rate(fastapply_queue_time_ms_total{matchers}[5m])) / "
        f"clamp_min(sum by (namespace, pod) (rate(fastapply_request_latency_ms_total{matchers}"
        f"[5m])), 1e-9) > 1")
    assert alerts["FastApplyRequestsQueued"]["expr"].strip().endswith("> 8")
    assert f"fastapply_requests_queued{matchers}" in alerts["FastApplyRequestsQueued"]["expr"]
    # KEDA's HPA is named keda-hpa-<ScaledObject>.
    assert f'horizontalpodautoscaler="keda-hpa-{FULLNAME}"' in alerts[
        "FastApplyAtMaxReplicas"]["expr"]
    for name, alert in alerts.items():
        assert alert["for"] == "10m" and alert["labels"] == {"severity": "warning",
                                                             "team": "editor"}, name
        assert alert["annotations"]["summary"], name
        assert_metrics_defined(alert["expr"])
    # Prometheus' own templates reach Prometheus unrendered by Helm.
    assert "{{ $labels.pod }}" in alerts["FastApplyRequestsQueued"]["annotations"]["description"]


def test_prometheus_rule_thresholds_and_extra_rules_follow_values() -> None:
    objects = render(SCENARIOS["everything-on"])
    alerts = rules(objects)
    assert "fastapply:queued:sum" in alerts  # extraRules appended
    assert 'horizontalpodautoscaler="fa-fastapply"' in alerts["FastApplyAtMaxReplicas"]["expr"]
    custom = rules(render({"prometheusRule": {"enabled": True, "queueToComputeRatio": 0.5,
                                              "requestsQueuedPerPod": 3, "for": "2m"}}))
    assert custom["FastApplyQueueingHigh"]["expr"].strip().endswith("> 0.5")
    assert custom["FastApplyRequestsQueued"]["expr"].strip().endswith("> 3")
    assert "FastApplyAtMaxReplicas" not in custom  # no autoscaler, no ceiling
    assert {a["for"] for a in custom.values()} == {"2m"}


def test_grafana_dashboard_config_map_for_the_sidecar() -> None:
    objects = render(SCENARIOS["everything-on"])
    (config_map,) = of_kind(objects, "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "GPU"}
    dashboard = json.loads(config_map["data"]["fastapply.json"])
    assert dashboard["uid"] == "fastapply"
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 8 and all(p["title"] and p["description"] for p in dashboard["panels"])
    used = assert_metrics_defined("\n".join(exprs))
    assert {"fastapply_requests_queued", "fastapply_queue_time_ms_total",
            "fastapply_completion_tokens_total"} <= used
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "namespace", "pod"}
    assert all("$namespace" in e and "$pod" in e for e in exprs)


def test_autoscaler_metric_is_one_the_model_publishes() -> None:
    values = default_values()
    assert assert_metrics_defined(values["autoscaling"]["metricName"]) == {
        "fastapply_requests_queued"}


# -- helm test: the in-cluster load test ----------------------------------------------------


def helm_test_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = of_kind(objects, "Pod")
    return pod


def test_helm_test_runs_a_bounded_load_test_against_the_service() -> None:
    pod = helm_test_pod(render())
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod["spec"]
    (c,) = spec["containers"]
    assert c["image"] == "fastapply-loadtest:0.1.0"
    args = c["args"]
    assert args[0] == "loadtest"
    assert arg_after(args, "--url") == f"{FULLNAME}.{NAMESPACE}.svc:8001"
    assert arg_after(args, "--duration") == "30s" and arg_after(args, "--users") == "2"
    assert arg_after(args, "--formats") == "lazy_snippet,search_replace,udiff"  # a model
    assert "--verify" not in args
    # Kubernetes bounds it too: run time + request timeout + margin.
    assert spec["activeDeadlineSeconds"] == 30 + 60 + 60
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "test"
    # The Service must not send traffic to it.
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] != one(
        render(), "Service")["spec"]["selector"]["app.kubernetes.io/component"]


def test_helm_test_follows_runtime_ports_and_network_policy() -> None:
    cpu = helm_test_pod(render({"gpu": {"count": 0}}))["spec"]["containers"][0]["args"]
    assert arg_after(cpu, "--formats") == "search_replace,udiff"  # exact without a model
    on = helm_test_pod(render(SCENARIOS["everything-on"]))
    args = on["spec"]["containers"][0]["args"]
    assert arg_after(args, "--url").endswith(":9001") and "--verify" in args
    assert arg_after(args, "--users") == "4"
    # With the NetworkPolicy on, the test pod is a labelled client.
    assert on["metadata"]["labels"]["fastapply.io/client"] == "true"
    assert not of_kind(render(SCENARIOS["keda-podmonitor"]), "Pod")  # test disabled
    assert "helm test fa" in notes() and "helm test" not in notes(
        {"loadtest": {"test": {"enabled": False}}})


# -- API keys (auth.existingSecret) ----------------------------------------------------------

SECRET_REF = {"name": "fastapply-keys", "key": "api-keys"}


def pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The helm test pods by name."""
    return {p["metadata"]["name"]: p for p in of_kind(objects, "Pod")}


def containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every container and initContainer of every pod the chart renders."""
    found: list[dict[str, Any]] = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job", "Pod"):
            spec = obj["spec"] if obj["kind"] == "Pod" else pod_spec(obj)
            found += spec["containers"] + spec.get("initContainers", [])
    return found


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def test_api_keys_reach_the_server_from_the_secret_as_environment() -> None:
    env = env_of(server(render(SCENARIOS["auth"])))
    assert env["FASTAPPLY_API_KEYS"] == {"name": "FASTAPPLY_API_KEYS",
                                         "valueFrom": {"secretKeyRef": SECRET_REF}}
    own = env_of(server(render({"auth": {"existingSecret": "keys", "secretKey": "list.csv"}})))
    assert own["FASTAPPLY_API_KEYS"]["valueFrom"]["secretKeyRef"] == {"name": "keys",
                                                                      "key": "list.csv"}


def test_no_argument_carries_a_key_and_every_key_variable_comes_from_the_secret() -> None:
    for c in containers(render(SCENARIOS["auth"])):
        words = c.get("command", []) + c.get("args", [])
        assert not any("--api-key" in w or "fastapply-keys" in w for w in words), c["name"]
        for name, var in env_of(c).items():
            if name.startswith("FASTAPPLY_API_KEY"):
                assert var == {"name": name, "valueFrom": {"secretKeyRef": SECRET_REF}}, c["name"]


@pytest.mark.parametrize("scenario", ["defaults", "cpu-smoke", "everything-on"])
def test_without_auth_nothing_about_keys_is_rendered(scenario: str) -> None:
    objects = render(SCENARIOS[scenario])
    text = json.dumps(objects)
    assert "FASTAPPLY_API_KEY" not in text and "api-keys" not in text
    assert f"{FULLNAME}-auth" not in pods(objects)
    assert "command" not in pods(objects)[f"{FULLNAME}-loadtest"]["spec"]["containers"][0]
    assert "FASTAPPLY_API_KEY" not in notes(SCENARIOS[scenario])


def test_auth_helm_test_pod_checks_each_port_with_the_key_from_the_secret() -> None:
    pod = pods(render(SCENARIOS["auth"]))[f"{FULLNAME}-auth"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["metadata"]["labels"]["fastapply.io/client"] == "true"  # the policy admits it
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] > 0
    (c,) = spec["containers"]
    assert c["image"] == "fastapply-loadtest:0.1.0"  # the load test's image, its Python
    assert c["command"] == ["python3", "-c"]
    env = env_of(c)
    assert env["FASTAPPLY_API_KEYS"]["valueFrom"]["secretKeyRef"] == SECRET_REF
    assert env["HTTP_URL"]["value"] == f"http://{FULLNAME}.{NAMESPACE}.svc:8000"
    assert env["OPENAI_URL"]["value"] == f"http://{FULLNAME}.{NAMESPACE}.svc:8080"
    # No OpenAI front: Triton's HTTP port only. Tests off: no test pods at all.
    without_front = pods(render({"auth": {"existingSecret": "fastapply-keys"}}))
    assert "OPENAI_URL" not in env_of(without_front[f"{FULLNAME}-auth"]["spec"]["containers"][0])
    assert not pods(render({"auth": {"existingSecret": "fastapply-keys"},
                            "loadtest": {"test": {"enabled": False}}}))
    assert f"logs {FULLNAME}-auth" in notes(SCENARIOS["auth"])


def test_load_test_sends_the_first_key_of_the_secret_set_at_run_time(tmp_path: Path) -> None:
    (c,) = pods(render(SCENARIOS["auth"]))[f"{FULLNAME}-loadtest"]["spec"]["containers"]
    assert c["args"][0] == "loadtest"  # the arguments are the ones without auth
    assert env_of(c)["FASTAPPLY_API_KEYS"]["valueFrom"]["secretKeyRef"] == SECRET_REF
    # Run the wrapper with a stand-in `fastapply` that shows what it was given.
    fake = tmp_path / "fastapply"
    fake.write_text('#!/bin/sh\n'
                    'echo "key=$FASTAPPLY_API_KEY keys=${FASTAPPLY_API_KEYS-unset} $*"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "FASTAPPLY_API_KEYS": "k-old,k-new"}
    done = subprocess.run(c["command"] + c["args"][:3], env=env, capture_output=True,
                          text=True, timeout=10, check=True)
    assert done.stdout.strip() == (
        f"key=k-old keys=unset loadtest --url {FULLNAME}.{NAMESPACE}.svc:8001")


class _Stub(BaseHTTPRequestHandler):
    """Triton's HTTP port and the OpenAI front as the server contract has them, with the
    keys in ``server.keys`` (None: open, as a server that ignores its keys)."""

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200 if self.path in ("/v2/health/ready", "/health") else 404, {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        keys = self.server.keys  # type: ignore[attr-defined]
        bearer = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        if self.path == "/v1/code/apply":
            if keys is not None and bearer not in keys:
                self._answer(401, {"error": {"message": "no key", "type": "invalid_request_error",
                                             "code": "invalid_api_key"}})
            else:
                self._answer(200, {"mergedCode": "a = 1\nb = 3\n"})
        elif self.path == "/v2/models/fast_apply/generate":
            key = self.headers.get("fastapply-api-key") or bearer
            if keys is not None and key not in keys:
                self._answer(401, {"error": "a fastapply API key is required"})
            else:
                self._answer(200, {"merged_code": "a = 1\nb = 3\n", "stats": "{}"})
        else:
            self._answer(404, {})

    def log_message(self, *_: Any) -> None:
        pass


@contextmanager
def stub_server(keys: set[str] | None) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    httpd.keys = keys  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(("server_keys", "failed"), [
    ({"k-old", "k-new"}, []),
    # A server that ignores its keys: every refusal check fails.
    (None, ["triton http, no key: refused", "triton http, a wrong key: refused",
            "openai front, no key: refused", "openai front, a wrong key: refused"]),
    # Pods not rolled after the new key was added: the new key is refused.
    ({"k-old"}, ["triton http, key 2 of 2: accepted", "openai front, key 2 of 2: accepted"]),
], ids=["enforced", "open", "not-rolled"])
def test_auth_helm_test_script_refuses_and_accepts_as_the_contract_says(
        server_keys: set[str] | None, failed: list[str]) -> None:
    """The auth pod's script, run here against a stand-in server on loopback."""
    (c,) = pods(render(SCENARIOS["auth"]))[f"{FULLNAME}-auth"]["spec"]["containers"]
    with stub_server(server_keys) as url:
        env = {**os.environ, "FASTAPPLY_API_KEYS": "k-old, k-new", "HTTP_URL": url,
               "OPENAI_URL": url, "REQUEST_TIMEOUT_S": "5"}
        done = subprocess.run([sys.executable, "-c", c["args"][0]], env=env,
                              capture_output=True, text=True, timeout=30)
    lines = done.stdout.splitlines()
    assert [m.group(1) for m in map(re.compile(r"FAIL (.+?): \d+ ").match, lines)
            if m] == failed, done.stdout + done.stderr
    assert done.returncode == (1 if failed else 0), done.stdout + done.stderr
    assert sum(line.startswith("ok") for line in lines) == 11 - len(failed)
    assert "k-old" not in done.stdout and "k-new" not in done.stdout  # keys never printed


# -- values.schema.json ------------------------------------------------------------------------

BAD_VALUES = [
    ({"replicaCount": -1}, "/replicaCount", "minimum"),
    ({"engine": {"source": "nfs"}}, "/engine/source", "one of"),
    ({"gpu": {"count": "two"}}, "/gpu/count", "want integer"),
    ({"ports": {"grpc": "8001"}}, "/ports/grpc", "want integer"),
    ({"shmSize": "lots"}, "/shmSize", "pattern"),
    ({"serve": {"runtime": "vllm"}}, "/serve/runtime", "one of"),
    ({"engine": {"source": "pvc"}}, "/engine/pvc/existingClaim", "minLength"),
    ({"engine": {"source": "s3"}}, "/engine/s3/uri", "minLength"),
    ({"autoscaling": {"enabld": True}}, "enabld", "additional"),
    # HPA or KEDA: one autoscaler owns the replica count, never both.
    ({"autoscaling": {"kind": "both"}}, "/autoscaling/kind", "one of"),
    ({"autoscaling": {"keda": {"serverAddress": "prometheus:9090"}}},
     "/autoscaling/keda/serverAddress", "pattern"),
    # Both monitors would scrape every pod twice and double every sum.
    ({"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
     "/podMonitor/enabled", "must be false"),
    ({"gpu": {"resourceName": "nvidia.com/mig 1g"}}, "/gpu/resourceName", "pattern"),
    ({"gpu": {"products": "NVIDIA-H100-80GB-HBM3"}}, "/gpu/products", "want array"),
    ({"prometheusRule": {"errorRatio": 5}}, "/prometheusRule/errorRatio", "maximum"),
    ({"loadtest": {"test": {"formats": "diff"}}}, "/loadtest/test/formats", "pattern"),
    ({"loadtest": {"test": {"durationSeconds": 0}}}, "/loadtest/test/durationSeconds", "minimum"),
    ({"auth": {"secretKey": ""}}, "/auth/secretKey", "minLength"),
    ({"auth": {"existingSecret": 5}}, "/auth/existingSecret", "want string"),
    ({"auth": {"existingSecret": "Fastapply_Keys"}}, "/auth/existingSecret", "pattern"),
    ({"auth": {"secret": "fastapply-keys"}}, "secret", "additional"),
]


@pytest.mark.parametrize(("values", "field", "says"), BAD_VALUES,
                         ids=[b[1] for b in BAD_VALUES])
def test_schema_rejects_bad_values_naming_the_field(values: dict[str, Any], field: str,
                                                    says: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as caught:
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    message = str(caught.value)
    assert field in message and says in message, message


def test_schema_accepts_every_scenario_and_a_cpu_chart_without_engine_settings() -> None:
    with helm.Chart.load(CHART) as chart:
        for values in SCENARIOS.values():
            chart.validate_schema(chart.merge_values(values))
        # With no GPU the engine is not used, so its required settings are not required.
        chart.validate_schema(chart.merge_values({"gpu": {"count": 0},
                                                  "engine": {"source": "s3"}}))


# -- values.yaml, schema and README in step ------------------------------------------------

_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.\-/]+):(\s|$)")


def documented_keys() -> dict[str, str]:
    """Dotted path -> description, for every key with a `# --` comment above it."""
    documented: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
            continue
        match = _KEY.match(line)
        if not match or stripped.startswith("-"):
            comment = []
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        path = ".".join(k for _, k in stack)
        starts = [i for i, c in enumerate(comment) if c.startswith("# --")]
        if starts:
            text = " ".join(c.lstrip("#").strip() for c in comment[starts[-1]:])
            documented[path] = text.removeprefix("--").strip()
        comment = []
    return documented


def leaf_paths(tree: Any, prefix: str = "") -> list[str]:
    if isinstance(tree, dict) and tree:
        return [p for k, v in tree.items() for p in leaf_paths(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")]


def default_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def test_every_value_is_documented() -> None:
    documented = documented_keys()
    undocumented = [p for p in leaf_paths(default_values())
                    if not any(p == d or p.startswith(d + ".") for d in documented)]
    assert not undocumented, f"values without a `# --` comment: {undocumented}"
    assert all(documented.values()), "empty `# --` comments"


def schema_keys(schema: dict[str, Any], prefix: str = "") -> tuple[set[str], set[str]]:
    """(every property path, the paths of closed objects: additionalProperties false)."""
    keys: set[str] = set()
    closed = {prefix.rstrip(".")} if schema.get("additionalProperties") is False else set()
    for key, sub in schema.get("properties", {}).items():
        keys.add(prefix + key)
        sub_keys, sub_closed = schema_keys(sub, prefix + key + ".")
        keys |= sub_keys
        closed |= sub_closed
    return keys, closed


def test_schema_and_values_have_the_same_keys() -> None:
    keys, closed = schema_keys(json.loads((CHART / "values.schema.json").read_text()))
    in_values: set[str] = set()
    for leaf in leaf_paths(default_values()):
        parts = leaf.split(".")
        in_values |= {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    # Keys under open objects (resources, nodeSelector, ...) are free-form.
    checked = {p for p in in_values if (p.rsplit(".", 1)[0] if "." in p else "") in closed}
    assert checked - keys == set(), "values missing from values.schema.json"
    assert keys - {"global"} - in_values == set(), "schema keys missing from values.yaml"


def test_readme_table_lists_every_documented_value() -> None:
    readme = (CHART / "README.md").read_text().split("\n## Values\n", 1)[-1]
    in_table = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.MULTILINE))
    documented = set(documented_keys())
    assert documented - in_table == set(), "values missing from the README table"
    assert in_table - documented == set(), "README lists values that do not exist"
