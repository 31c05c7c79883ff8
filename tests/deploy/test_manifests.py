"""Deployment files: Kubernetes manifests, the container definition and batch-system scripts.

No cluster is available to tests, so the manifests are parsed and checked for the fields the
Dask operator and Kubernetes need, and for consistency between files (names, volumes, RBAC).
When dask-kubernetes and jsonschema are installed, the DaskJob is also validated against the
operator's own CRD schema.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.batch import ArchiveConfig
from pipeline.config import parse

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "kubernetes"
BATCH_ARGS = ["python", "-m", "pipeline", "batch", "/config/archive.yaml"]


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _one(name: str, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _docs(name) if d["kind"] == kind]
    return doc


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return _one("kustomization.yaml", "Kustomization")


@pytest.fixture(scope="module")
def daskjob() -> dict[str, Any]:
    return _one("daskjob.yaml", "DaskJob")


@pytest.fixture(scope="module")
def cronjob() -> dict[str, Any]:
    return _one("cronjob.yaml", "CronJob")


def _generated(kustomization: dict[str, Any], file: str) -> str:
    """Name of the ConfigMap the kustomization generates from ``file``."""
    (name,) = [g["name"] for g in kustomization["configMapGenerator"] if file in g["files"]]
    return str(name)


def test_kustomization_lists_existing_files(kustomization: dict[str, Any]) -> None:
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file()
    for generator in kustomization["configMapGenerator"]:
        assert all((K8S / f).is_file() for f in generator["files"])
    # The DaskJob names the archive ConfigMap literally; a hash suffix would break that.
    assert kustomization["generatorOptions"]["disableNameSuffixHash"] is True
    namespaces = {
        d["metadata"].get("namespace")
        for f in kustomization["resources"]
        for d in _docs(f)
        if d["kind"] != "Namespace"
    }
    assert namespaces == {kustomization["namespace"]}


def test_daskjob_fields(daskjob: dict[str, Any], kustomization: dict[str, Any]) -> None:
    assert daskjob["apiVersion"] == "kubernetes.dask.org/v1"
    spec = daskjob["spec"]
    job_pod = spec["job"]["spec"]
    (runner,) = job_pod["containers"]
    assert runner["args"] == BATCH_ARGS
    assert job_pod["restartPolicy"] == "Never"
    cluster = spec["cluster"]["spec"]
    worker, scheduler = cluster["worker"], cluster["scheduler"]
    assert worker["replicas"] >= 1
    (wc,) = worker["spec"]["containers"]
    assert wc["args"][:2] == ["dask", "worker"] and "$(DASK_WORKER_NAME)" in wc["args"]
    (sc,) = scheduler["spec"]["containers"]
    assert sc["args"] == ["dask", "scheduler"]
    assert {"name": "tcp-comm", "containerPort": 8786, "protocol": "TCP"} in sc["ports"]
    service = scheduler["service"]
    # The operator names the cluster after the DaskJob; the Service must select that name.
    assert service["selector"] == {
        "dask.org/cluster-name": daskjob["metadata"]["name"],
        "dask.org/component": "scheduler",
    }
    assert {p["port"] for p in service["ports"]} == {8786, 8787}
    # One image for all roles (the code version is part of every result's identity).
    assert len({runner["image"], wc["image"], sc["image"]}) == 1
    # Runner and workers mount the same data claim at the same path.
    claim = _one("storage.yaml", "PersistentVolumeClaim")["metadata"]["name"]
    for pod, container in ((job_pod, runner), (worker["spec"], wc)):
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert volumes[mounts["/data"]]["persistentVolumeClaim"]["claimName"] == claim
    config = {v["name"]: v for v in job_pod["volumes"]}[
        {m["mountPath"]: m["name"] for m in runner["volumeMounts"]}["/config"]
    ]
    assert config["configMap"]["name"] == _generated(kustomization, "archive.yaml")


def test_daskjob_matches_the_operator_crd(daskjob: dict[str, Any]) -> None:
    pytest.importorskip("dask_kubernetes")
    jsonschema = pytest.importorskip("jsonschema")
    chart = "deployment/helm/dask-kubernetes-operator/crds/daskjob.yaml"
    crd = yaml.safe_load(files("dask_kubernetes.operator").joinpath(chart).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    assert (
        crd["spec"]["group"] == "kubernetes.dask.org" and crd["spec"]["names"]["kind"] == "DaskJob"
    )
    jsonschema.validate(daskjob, version["schema"]["openAPIV3Schema"])


def test_cronjob_fields(cronjob: dict[str, Any], kustomization: dict[str, Any]) -> None:
    assert cronjob["apiVersion"] == "batch/v1"
    spec = cronjob["spec"]
    assert len(spec["schedule"].split()) == 5
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] > 0
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    (container,) = pod["containers"]
    script = container["args"][0]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/manifests"]]["configMap"]["name"] == _generated(
        kustomization, "daskjob.yaml"
    )
    assert "kubectl create -f /manifests/daskjob.yaml" in script
    # The pod waits for the DaskJob: otherwise Forbid would not keep batches apart.
    assert "until" in script and "Successful" in script and "Failed" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_rbac_allows_what_the_cronjob_does(cronjob: dict[str, Any]) -> None:
    account = _one("rbac.yaml", "ServiceAccount")["metadata"]["name"]
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account
    role = _one("rbac.yaml", "Role")
    binding = _one("rbac.yaml", "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert {"kind": "ServiceAccount", "name": account}.items() <= binding["subjects"][0].items()
    (rule,) = role["rules"]
    assert rule["apiGroups"] == ["kubernetes.dask.org"] and rule["resources"] == ["daskjobs"]
    script = pod["containers"][0]["args"][0]
    used = set(re.findall(r"kubectl (get|create|delete)", script))
    assert used <= set(rule["verbs"]) and "watch" not in used


def test_archive_config_in_the_daskjob_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://cloudremoval-batch-scheduler:8786")
    cfg = parse(yaml.safe_load((K8S / "archive.yaml").read_text()), ArchiveConfig)
    assert cfg.cluster.kind == "address"
    assert cfg.cluster.address == "tcp://cloudremoval-batch-scheduler:8786"
    assert str(cfg.output.path).startswith("/data/")
    assert all(str(r).startswith("/data/") for r in cfg.archive.roots)


def test_dockerfile_runs_the_batch() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    (cmd,) = re.findall(r"^CMD (.*)$", text, flags=re.M)
    assert yaml.safe_load(cmd) == BATCH_ARGS
    root = DEPLOY.parent
    for line in re.findall(r"^COPY (.*)$", text, flags=re.M):
        *sources, _ = line.split()
        assert all((root / s).exists() for s in sources), line
    assert re.search(r"^FROM python:3\.1[1-9]", text, flags=re.M)
    assert re.search(r"^USER \d+", text, flags=re.M)  # not root


@pytest.mark.parametrize(
    ("script", "directive", "walltime"),
    [
        ("slurm/cloudremoval-batch.sbatch", "#SBATCH", "--time="),
        ("pbs/cloudremoval-batch.pbs", "#PBS", "walltime="),
    ],
)
def test_batch_system_scripts(script: str, directive: str, walltime: str) -> None:
    path = DEPLOY / script
    text = path.read_text()
    subprocess.run(["bash", "-n", str(path)], check=True)
    directives = [line for line in text.splitlines() if line.startswith(directive)]
    assert any(walltime in d for d in directives)
    (run,) = [line for line in text.splitlines() if line.startswith("exec ")]
    assert shlex.split(run)[1:5] == ["python", "-m", "pipeline", "batch"]
