"""The deployment files, checked offline: every Kubernetes object against the Kubernetes schemas
(kubernetes-validate, strict: an unknown field is an error), the KEDA ScaledObjects against KEDA's
CRD schema and their trigger metadata against each scaler's keys, the names they point at against
the code, the compose file against the Compose specification and the NATS values against the chart.
Each validator is also shown a broken copy and must refuse it. Sources: tests/deploy/schemas/."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from spotter_orchestrator.handlers import COMMAND_ENDPOINTS, durable_name
from spotter_shared import metrics
from spotter_shared.contracts.commands import COMMANDS_STREAM
from spotter_shared.contracts.rag import RAG_INDEXER_DURABLE, RAG_STREAM

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SCHEMAS = Path(__file__).parent / "schemas"
K8S_VERSION = "1.33"

# Each scaler's metadata keys (required, optional), from its source at KEDA v2.20.2:
# pkg/scalers/nats_jetstream_scaler.go, prometheus_scaler.go, cpu_memory_scaler.go (the `keda:"name=…"` tags).
SCALER_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "nats-jetstream": (frozenset({"natsServerMonitoringEndpoint", "stream", "consumer"}),
                       frozenset({"account", "accountID", "lagThreshold", "activationLagThreshold", "useHttps"})),
    "prometheus": (frozenset({"serverAddress", "query", "threshold"}),
                   frozenset({"queryParameters", "activationThreshold", "namespace", "customHeaders", "ignoreNullValues",
                              "unsafeSsl", "awsRegion", "timeout", "identityOwner"})),
    "cpu": (frozenset({"value"}), frozenset({"containerName"})),
}


# ------------------------------------------------------------------------------------------- loading

def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every object of the Kubernetes manifests (kustomization files are checked on their own)."""
    found = []
    for path in sorted((DEPLOY / "k8s").rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for n, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                found.append((f"{path.relative_to(DEPLOY)}#{n}", doc))
    return found


MANIFESTS = manifests()
KEDA_KINDS = {"ScaledObject", "ScaledJob", "TriggerAuthentication", "ClusterTriggerAuthentication"}


def kube_objects() -> list[tuple[str, dict[str, Any]]]:
    return [(where, doc) for where, doc in MANIFESTS if doc["kind"] not in KEDA_KINDS]


def scaled_objects() -> list[dict[str, Any]]:
    return [doc for _, doc in MANIFESTS if doc["kind"] == "ScaledObject"]


def deployments() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in MANIFESTS if doc["kind"] == "Deployment"}


# ---------------------------------------------------------------------------------------- validators

def validate_kube(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _strict(schema: Any) -> Any:
    """The CRD's structural schema with unknown fields refused, as `kubectl apply --validate=strict`
    does (the API server would otherwise drop them without a word)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _crd_validator() -> jsonschema.Validator:
    crd = yaml.safe_load((SCHEMAS / "keda.sh_scaledobjects.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    return jsonschema.Draft7Validator(_strict(version["schema"]["openAPIV3Schema"]))


CRD = _crd_validator()


def validate_scaled_object(doc: dict[str, Any]) -> None:
    """KEDA's CRD schema, each trigger's metadata keys, and the names it points at."""
    assert doc["apiVersion"] == "keda.sh/v1alpha1", doc["apiVersion"]
    CRD.validate(doc)
    spec = doc["spec"]
    target = spec["scaleTargetRef"]["name"]
    assert target in deployments(), f"{target} is no Deployment of the base"
    assert "replicas" not in deployments()[target]["spec"], f"{target} sets replicas, which KEDA owns"
    names = set()
    for trigger in spec["triggers"]:
        kind, meta = trigger["type"], trigger.get("metadata", {})
        assert kind in SCALER_KEYS, f"no key list for scaler {kind}"
        required, optional = SCALER_KEYS[kind]
        assert required <= meta.keys(), f"{kind}: missing {sorted(required - meta.keys())}"
        assert not meta.keys() - required - optional, f"{kind}: unknown keys {sorted(meta.keys() - required - optional)}"
        assert all(isinstance(v, str) for v in meta.values()), f"{kind}: metadata values are strings"
        if kind == "cpu":
            assert trigger.get("metricType") in ("Utilization", "AverageValue"), "cpu needs metricType"
        if kind == "nats-jetstream":
            _check_consumer(target, meta["stream"], meta["consumer"])
        if kind == "prometheus":
            for name in re.findall(r"\bspotter_\w+", meta["query"]):
                base = re.sub(r"_(count|sum|bucket|total)$", "", name)
                known = {m._name for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)}
                assert base in known or name in known, f"{name} is no metric the services export"
        if "name" in trigger:
            names.add(trigger["name"])
    formula = spec.get("advanced", {}).get("scalingModifiers", {}).get("formula")
    if formula:
        used = set(re.findall(r"[A-Za-z_]\w*", formula))
        assert used == names, f"the formula uses {sorted(used)}, the triggers are {sorted(names)}"


def _check_consumer(target: str, stream: str, consumer: str) -> None:
    expected = {
        "spotter-orchestrator": (COMMANDS_STREAM, {durable_name(ep) for ep in COMMAND_ENDPOINTS}),
        "spotter-rag": (RAG_STREAM, {RAG_INDEXER_DURABLE}),
    }
    assert target in expected, f"{target} has no durable consumer to read lag from"
    want_stream, consumers = expected[target]
    assert stream == want_stream, f"{target}: stream {stream}, the code's is {want_stream}"
    assert consumer in consumers, f"{target}: consumer {consumer} is none of the code's {sorted(consumers)}"


COMPOSE_SCHEMA = jsonschema.Draft7Validator(json.loads((SCHEMAS / "compose-spec.json").read_text()))


def validate_compose(doc: dict[str, Any], base: Path = DEPLOY) -> None:
    COMPOSE_SCHEMA.validate(doc)
    services = doc["services"]
    for name, service in services.items():
        for needed in service.get("depends_on", {}):
            assert needed in services, f"{name} depends on {needed}, which is no service"
        build = service.get("build")
        if isinstance(build, dict):
            context = (base / build.get("context", ".")).resolve()
            assert (context / build.get("dockerfile", "Dockerfile")).is_file(), f"{name}: no {build.get('dockerfile')}"
        for source in service.get("volumes", []):
            host = source.split(":", 1)[0]
            if host.startswith("."):
                assert (base / host).exists(), f"{name} mounts {host}, which does not exist"


def _paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(values, dict):
        for key, value in values.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))


def validate_nats_values(values: dict[str, Any]) -> None:
    """Every key is one the chart has (its defaults are its key set; under a map whose default is
    empty, such as `merge` or `env`, any key goes), and the settings Spotter relies on are there."""
    defaults = yaml.safe_load((SCHEMAS / "nats-chart-values.yaml").read_text())
    for path in _paths(values):
        node: Any = defaults
        for depth, key in enumerate(path):
            if node == {}:
                break
            assert isinstance(node, dict) and key in node, f"{'.'.join(path[:depth + 1])} is not a value of the chart"
            node = node[key]
    config = values["config"]
    assert config["cluster"]["enabled"] and config["cluster"]["replicas"] == 3
    assert config["jetstream"]["enabled"] and config["jetstream"]["fileStore"]["enabled"]
    assert config["jetstream"]["merge"]["sync_interval"] == "always"
    assert config["monitor"]["enabled"], "KEDA reads consumer lag from the monitoring port"


# ------------------------------------------------------------------------------------------- checks

@pytest.mark.parametrize(("where", "doc"), kube_objects(), ids=[w for w, _ in kube_objects()])
def test_every_kubernetes_object_matches_the_kubernetes_schema(where: str, doc: dict[str, Any]) -> None:
    validate_kube(doc)


@pytest.mark.parametrize("doc", scaled_objects(), ids=[d["metadata"]["name"] for d in scaled_objects()])
def test_every_scaled_object_matches_kedas_crd_its_scalers_and_the_code(doc: dict[str, Any]) -> None:
    validate_scaled_object(doc)


def test_what_scales_what() -> None:
    keda = {d["spec"]["scaleTargetRef"]["name"]: {t["type"] for t in d["spec"]["triggers"]} for d in scaled_objects()}
    assert keda == {"spotter-orchestrator": {"nats-jetstream"}, "spotter-tool-runner": {"prometheus"},
                    "spotter-billing": {"prometheus"}, "spotter-rag": {"cpu", "nats-jetstream"}}
    orchestrator = next(d for d in scaled_objects() if d["metadata"]["name"] == "spotter-orchestrator")
    consumers = {t["metadata"]["consumer"] for t in orchestrator["spec"]["triggers"]}
    assert consumers == {durable_name(ep) for ep in COMMAND_ENDPOINTS}, "every command consumer counts"
    hpas = [d["spec"]["scaleTargetRef"]["name"] for _, d in MANIFESTS if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpas == ["spotter-gateway"] and not set(hpas) & keda.keys(), "one autoscaler per Deployment"


def test_network_policies_deny_by_default_and_cover_every_service() -> None:
    policies = {d["metadata"]["name"]: d["spec"] for _, d in MANIFESTS if d["kind"] == "NetworkPolicy"}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    talking = policies["services-to-nats-postgres-redis"]["podSelector"]["matchExpressions"][0]["values"]
    assert set(talking) == set(deployments())
    ports = {p["port"] for rule in policies["services-to-nats-postgres-redis"]["egress"] for p in rule["ports"]}
    assert ports == {4222, 5432, 6379}


def test_every_manifest_is_in_a_kustomization() -> None:
    listed: set[Path] = set()
    for kustomization in (DEPLOY / "k8s").rglob("kustomization.yaml"):
        for entry in yaml.safe_load(kustomization.read_text()).get("resources", []):
            target = (kustomization.parent / entry).resolve()
            assert target.exists(), f"{kustomization}: {entry} does not exist"
            listed.add(target / "kustomization.yaml" if target.is_dir() else target)
    files = {p.resolve() for p in (DEPLOY / "k8s").rglob("*.yaml")}
    unlisted = {p.name for p in files - listed if p.name not in ("kustomization.yaml", "secret.example.yaml")}
    assert not unlisted, f"not applied by any kustomization: {sorted(unlisted)}"


def test_the_compose_file_matches_the_compose_specification() -> None:
    validate_compose(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def test_the_nats_values_are_the_charts_and_sync_every_write() -> None:
    validate_nats_values(yaml.safe_load((DEPLOY / "nats" / "values.yaml").read_text()))
    assert re.search(r"^\s*sync_interval:\s*always\b", (DEPLOY / "nats" / "nats.conf").read_text(), re.M)


# ---------------------------------------------------------------------- each validator can say no

def _deployment() -> dict[str, Any]:
    return copy.deepcopy(deployments()["spotter-gateway"])


def _scaled(name: str = "spotter-orchestrator") -> dict[str, Any]:
    return copy.deepcopy(next(d for d in scaled_objects() if d["metadata"]["name"] == name))


def _broken_trigger_key() -> dict[str, Any]:
    doc = _scaled()
    meta = doc["spec"]["triggers"][0]["metadata"]
    meta["lagTreshold"] = meta.pop("lagThreshold")
    return doc


def _wrong_consumer() -> dict[str, Any]:
    doc = _scaled()
    doc["spec"]["triggers"][0]["metadata"]["consumer"] = "orchestrator-sends"
    return doc


def _unknown_spec_field() -> dict[str, Any]:
    doc = _scaled()
    doc["spec"]["minReplicas"] = 2  # the HPA's spelling; KEDA's is minReplicaCount
    return doc


def _number_metadata() -> dict[str, Any]:
    doc = _scaled("spotter-tool-runner")
    doc["spec"]["triggers"][0]["metadata"]["threshold"] = 50
    return doc


def _unknown_metric() -> dict[str, Any]:
    doc = _scaled("spotter-tool-runner")
    doc["spec"]["triggers"][0]["metadata"]["query"] = "sum(rate(spotter_tool_calls_total[2m]))"
    return doc


@pytest.mark.parametrize("broken", [_broken_trigger_key, _wrong_consumer, _unknown_spec_field, _number_metadata, _unknown_metric])
def test_a_broken_scaled_object_is_refused(broken: Any) -> None:
    with pytest.raises((AssertionError, jsonschema.ValidationError)):
        validate_scaled_object(broken())


def test_a_broken_kubernetes_object_is_refused() -> None:
    unknown_field = _deployment()
    unknown_field["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy "] = "Always"
    wrong_type = _deployment()
    wrong_type["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8080"
    for doc in (unknown_field, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            validate_kube(doc)


def test_a_broken_compose_file_is_refused() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    misspelt = copy.deepcopy(compose)
    misspelt["services"]["gateway"]["port"] = misspelt["services"]["gateway"].pop("ports")
    dangling = copy.deepcopy(compose)
    dangling["services"]["gateway"]["depends_on"]["postgress"] = {"condition": "service_healthy"}
    for doc in (misspelt, dangling):
        with pytest.raises((AssertionError, jsonschema.ValidationError)):
            validate_compose(doc)


def test_broken_nats_values_are_refused() -> None:
    values = yaml.safe_load((DEPLOY / "nats" / "values.yaml").read_text())
    misspelt = copy.deepcopy(values)
    misspelt["config"]["jetstream"]["filestore"] = misspelt["config"]["jetstream"].pop("fileStore")
    unsynced = copy.deepcopy(values)
    unsynced["config"]["jetstream"]["merge"] = {"sync_interval": "2m"}
    for doc in (misspelt, unsynced):
        with pytest.raises((AssertionError, KeyError)):
            validate_nats_values(doc)
