"""The learned policy in the real worker: every decision names the model version that made
it; a step whose model call fails is decided by the fallback heuristic and says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from inference.features.spec import FeatureSpec
from inference.model import ModelConfig, Scorer, point_latest, save_model
from ops.local_stack import free_port
from ops.replay import replay
from ops.traces import get_loader
from tests.integration.conftest import FAST_AGENTS

pytestmark = pytest.mark.integration

N = 30


def tiny_model(root: Path, version: str = "it-v1") -> Path:
    torch.manual_seed(0)
    spec = FeatureSpec(gpu_models=("A10", "G2", "P100", "T4", "V100M16", "V100M32"), text_dim=16,
                       encoder="hashed-ngram-16")  # fmt: skip
    save_model(root / version, Scorer(ModelConfig(spec=spec, hidden=8, depth=2, head_hidden=8)), version)
    return point_latest(root, version)


def run(make_stack, env: dict[str, str]):  # type: ignore[no-untyped-def]
    p = make_stack(policy="learned")
    p.start_worker(env=env)
    p.start_agents(*FAST_AGENTS)
    loader = get_loader("openb", start_offset=10_000_000, limit=N)
    asyncio.run(replay(loader, p.settings, speed=float("inf"), limit=N, strict=True, progress=False))
    st = p.wait(lambda s: s["finished"] + s["rejected"] == N and s["pending"] + s["running"] + s["reserved"] == 0,
                timeout=180, what=f"{N} jobs to settle")  # fmt: skip
    assert st["finished"] == N, st
    assert st["loop"]["warm_ups"] >= 1, st["loop"]  # the made-up step before the first real one
    assert st["log_level"] == "WARNING"  # (Faust's start-up spinner would leave the root logger at DEBUG)
    assert st["loop"]["gc_frozen"] > 10_000  # the start-up heap, out of the collector's full passes
    for _ in range(40):
        if p.scalar("SELECT count() FROM decisions_applied WHERE outcome = 'placed'") == N:
            break
        asyncio.run(asyncio.sleep(0.5))
    return p.sql("SELECT model_version, fallback, reason FROM decisions_applied WHERE outcome = 'placed'")


def test_decisions_name_the_model_version(make_stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    latest = tiny_model(tmp_path)
    rows = run(make_stack, {"SEMSCHED_MODEL_DIR": str(latest), "SEMSCHED_INFERENCE": "in-process"})
    assert len(rows) == N
    assert {(v, f) for v, f, _ in rows} == {("it-v1", False)}
    assert all(r.startswith("learned: highest score") for _, _, r in rows)


def test_a_model_server_that_is_down_means_fallback_decisions_that_say_so(make_stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    latest = tiny_model(tmp_path)
    closed = f"127.0.0.1:{free_port()}"  # nothing listens there
    rows = run(make_stack, {"SEMSCHED_MODEL_DIR": str(latest), "SEMSCHED_INFERENCE": "triton",
                            "SEMSCHED_TRITON_URL": closed, "SEMSCHED_TRITON_DEADLINE_MS": "200"})  # fmt: skip
    assert len(rows) == N
    assert all(f for _, f, _ in rows), rows[:3]
    assert all("fell back to fgd" in r and "triton" in r.lower() for _, _, r in rows), rows[:3]


def test_the_worker_decides_through_a_real_triton_server(make_stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from inference.serving.process import start_server

    latest = tiny_model(tmp_path)
    with start_server(latest, log_path=tmp_path / "triton.log") as server:
        rows = run(make_stack, {"SEMSCHED_MODEL_DIR": str(latest), "SEMSCHED_INFERENCE": "triton",
                                "SEMSCHED_TRITON_URL": server.url, "SEMSCHED_TRITON_DEADLINE_MS": "2000"})  # fmt: skip
    assert len(rows) == N
    assert {(v, f) for v, f, _ in rows} == {("it-v1", False)}, rows[:3]
