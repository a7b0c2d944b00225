"""Static checks of the deployment manifests in k8s/ (no cluster here: parsing and invariants only)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

K8S = Path(__file__).resolve().parents[2] / "k8s"
# Anything that looks like a credential written inline.
_SECRET_KEYS = re.compile(r"(password|secret|token|api[_-]?key|private[_-]?key|credentials?)$", re.IGNORECASE)
_SECRET_VALUES = re.compile(
    r"(BEGIN [A-Z ]*PRIVATE KEY|\"type\":\s*\"service_account\"|AKIA[0-9A-Z]{16}|ghp_[0-9A-Za-z]{20,})"
)


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d is not None]


def _walk(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, str(key)), value
            yield from _walk(value, (*path, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, str(i)))


def _images(node) -> list[str]:
    return [v for p, v in _walk(node) if p[-1] == "image" and isinstance(v, str)]


def test_k8s_manifests_static_all_yaml_parses():
    files = sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("*.yml"))
    assert {f.name for f in files} >= {"dagster-values.yaml", "raycluster.yaml"}
    for path in files:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert any(d for d in docs), path


def test_k8s_manifests_static_dagster_values():
    (values,) = _docs("dagster-values.yaml")
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    # Postgres storage: bundled or external, password from a Secret, never inline.
    assert values["postgresql"]["postgresqlDatabase"]
    assert "postgresqlPassword" not in values["postgresql"]
    # The password comes from a Secret the user creates: the chart's generated one would hold its
    # default password ("test").
    assert values["generatePostgresqlPasswordSecret"] is False
    assert values["global"]["postgresqlSecretName"] == values["postgresql"]["existingSecret"]
    # SQLAlchemy 2.x maps postgresql:// to psycopg 3, which is not installed; psycopg2 is.
    assert values["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    # `dagster code-server start` (reloads in place), not `dagster api grpc` (cannot reload).
    assert "dagsterApiGrpcArgs" not in deployment
    args = deployment["codeServerArgs"]
    assert args[args.index("--python-file") + 1].endswith("definitions.py")
    env = {e["name"]: e.get("value") for e in deployment["env"]}
    assert env["MARIN_PREFIX"].startswith("gs://")
    # Ray Client: a run pod has no Ray node, so it connects through the head's client port.
    assert env["RAY_ADDRESS"].startswith("ray://marin-ray-head-svc.") and env["RAY_ADDRESS"].endswith(":10001")
    launcher_env = dict(v.split("=", 1) for v in values["runLauncher"]["config"]["k8sRunLauncher"]["envVars"])
    assert launcher_env["RAY_ADDRESS"] == env["RAY_ADDRESS"]
    assert launcher_env["MARIN_PREFIX"] == env["MARIN_PREFIX"]
    # Workload identity instead of key files.
    assert "iam.gke.io/gcp-service-account" in values["serviceAccount"]["annotations"]
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env


def test_k8s_manifests_static_experiments_repository_slot():
    """The team's experiments repository: one claim mounted at MARIN_PROJECT_ROOT (on PYTHONPATH) in
    the code server, the run pods and every Ray worker, which imports the scripts' step functions."""
    (values,) = _docs("dagster-values.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e.get("value") for e in deployment["env"]}
    root = env["MARIN_PROJECT_ROOT"]
    assert root in env["PYTHONPATH"].split(":")
    (volume,) = [v for v in deployment["volumes"] if v["name"] == "experiments"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert {"name": "experiments", "mountPath": root, "readOnly": True} in deployment["volumeMounts"]
    # Run pods get the deployment's volumes (includeConfigInLaunchedRuns) and the variables.
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    launcher_env = dict(v.split("=", 1) for v in values["runLauncher"]["config"]["k8sRunLauncher"]["envVars"])
    assert launcher_env["MARIN_PROJECT_ROOT"] == root and root in launcher_env["PYTHONPATH"].split(":")
    (cluster,) = _docs("raycluster.yaml")
    for group in cluster["spec"]["workerGroupSpecs"]:
        spec = group["template"]["spec"]
        (container,) = spec["containers"]
        worker_env = {e["name"]: e.get("value") for e in container["env"]}
        assert worker_env["MARIN_PROJECT_ROOT"] == root and root in worker_env["PYTHONPATH"].split(":")
        assert {"name": "experiments", "mountPath": root, "readOnly": True} in container["volumeMounts"]
        assert any(v.get("persistentVolumeClaim", {}).get("claimName") == claim for v in spec["volumes"])


def test_k8s_manifests_static_raycluster():
    (cluster,) = _docs("raycluster.yaml")
    assert cluster["apiVersion"] == "ray.io/v1" and cluster["kind"] == "RayCluster"
    import ray

    assert cluster["spec"]["rayVersion"] == ray.__version__  # cluster and client Ray must match
    head = cluster["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    groups = {g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}
    tpu = [g for g in groups.values() if "google.com/tpu" in str(g)]
    gpu = [g for g in groups.values() if "nvidia.com/gpu" in str(g)]
    assert tpu and gpu and "cpu" in groups
    for group in groups.values():
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        assert group["template"]["spec"]["serviceAccountName"] == "marin-dagster"
    # The TPU group's chips per host match what TpuConfig requests for that slice type.
    from marin_resources.accelerators import TpuConfig

    for group in tpu:
        tpu_type = group["groupName"].removeprefix("tpu-")
        container = group["template"]["spec"]["containers"][0]
        chips = int(container["resources"]["limits"]["google.com/tpu"])
        assert TpuConfig(tpu_type=tpu_type).ray_remote_options()["resources"]["TPU"] == chips
    # KubeRay names the head Service <name>-head-svc; the Dagster side must point at it.
    (values,) = _docs("dagster-values.yaml")
    address = values["dagster-user-deployments"]["deployments"][0]["env"]
    assert any(e.get("value", "").startswith(f"ray://{cluster['metadata']['name']}-head-svc") for e in address)
    head_ports = {p["name"]: p["containerPort"] for p in head["template"]["spec"]["containers"][0]["ports"]}
    assert head_ports["client"] == 10001 and head_ports["dashboard"] == 8265  # the Jobs API ray_run uses


def test_k8s_manifests_static_ray_token_auth_everywhere():
    """Every Ray container and every Dagster pod that reaches Ray: token mode, the token from the one
    Secret (key RAY_AUTH_TOKEN), never inline."""
    (cluster,) = _docs("raycluster.yaml")
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    containers = [c for g in groups for c in g["template"]["spec"]["containers"]]
    assert len(containers) == 1 + len(cluster["spec"]["workerGroupSpecs"])
    for container in containers:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in env, container["name"]
        secrets = [f["secretRef"] for f in container["envFrom"] if "secretRef" in f]
        assert {"name": "marin-ray-auth"} in secrets, container["name"]  # required, not optional
    (values,) = _docs("dagster-values.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e.get("value") for e in deployment["env"]}
    assert env["RAY_AUTH_MODE"] == "token" and env["MARIN_RAY_DASHBOARD_URL"].startswith("http")
    assert {"name": "marin-ray-auth"} in deployment["envSecrets"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    launcher_env = dict(v.split("=", 1) for v in launcher["envVars"])
    assert launcher_env["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in launcher_env
    assert {"name": "marin-ray-auth"} in launcher["envSecrets"]


def test_k8s_manifests_static_images_consistent():
    (values,) = _docs("dagster-values.yaml")
    (cluster,) = _docs("raycluster.yaml")
    user_image = values["dagster-user-deployments"]["deployments"][0]["image"]
    user_repo = user_image["repository"]
    ray_images = _images(cluster)
    assert ray_images
    for image in ray_images:
        repo, _, tag = image.rpartition(":")
        assert repo == user_repo, image
        assert tag.startswith(str(user_image["tag"])), image
    # The head (drivers' actors, autoscaler) runs exactly the user-code image.
    head_image = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    assert head_image == f"{user_repo}:{user_image['tag']}"
    dockerfile = (K8S / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", dockerfile, re.MULTILINE)
    assert "definitions.py" in dockerfile


def _inline_secrets(doc) -> list[tuple]:
    """(path, value) of every credential-looking value written inline in a manifest."""
    found = []
    for path, value in _walk(doc):
        key = path[-1]
        # A reference to a Secret by name (``...SecretName``, ``existingSecret``) is fine; a value is not.
        inline = isinstance(value, str | int) and not isinstance(value, bool)
        reference = key.lower().endswith("secretname") or key == "existingSecret"
        if inline and _SECRET_KEYS.search(key) and not reference:
            found.append((path, value))
        if key == "env" and isinstance(value, list):
            for item in value:
                if (
                    isinstance(item, dict)
                    and _SECRET_KEYS.search(item.get("name", "").replace("_", "-"))
                    and "value" in item
                ):
                    found.append(((*path, item["name"]), item["value"]))
        if key == "envVars" and isinstance(value, list):
            for item in value:
                name = str(item).split("=", 1)[0]
                if "=" in str(item) and _SECRET_KEYS.search(name.replace("_", "-")):
                    found.append(((*path, name), item))
    return found


def test_k8s_manifests_static_secret_detector_catches_inline_secrets():
    bad = {
        "postgresql": {"postgresqlPassword": "hunter2"},
        "env": [{"name": "WANDB_API_KEY", "value": "abc"}, {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {}}}],
        "envVars": ["HF_TOKEN=xyz", "MARIN_PREFIX=gs://b"],
    }
    names = {p[-1] for p, _ in _inline_secrets(bad)}
    assert names == {"postgresqlPassword", "WANDB_API_KEY", "HF_TOKEN"}
    assert _SECRET_VALUES.search("-----BEGIN RSA PRIVATE KEY-----")


@pytest.mark.parametrize("name", ["dagster-values.yaml", "raycluster.yaml", "Dockerfile"])
def test_k8s_manifests_static_no_inline_secrets(name):
    text = (K8S / name).read_text()
    assert not _SECRET_VALUES.search(text)
    if name.endswith(".yaml"):
        for doc in _docs(name):
            assert _inline_secrets(doc) == []
