"""The worker's policy from its settings (streams/loop.py ``build_policy``): ``SEMSCHED_FALLBACK_POLICY``
is the heuristic a learned policy falls back to (default fgd), validated against the registry;
heuristics are built without it."""

from __future__ import annotations

import pydantic
import pytest

from inference.policy import LearnedPolicy
from scheduling.assign import schedule_step
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot
from streams.loop import build_policy
from streams.settings import Settings, fallback_choices


def snapshot() -> ClusterSnapshot:
    shapes = [(64_000, 262_144, 8, "A10"), (32_000, 131_072, 4, "T4"), (16_000, 65_536, 2, "V100M32"),
              (96_000, 393_216, 0, None)]  # fmt: skip
    return ClusterSnapshot.from_nodes([NodeView(node_id=f"n{i}", cpu_milli=c, memory_mib=m, num_gpu=g, gpu_model=model)
                                       for i, (c, m, g, model) in enumerate(shapes * 2)])  # fmt: skip


def jobs() -> list[JobRequest]:
    shapes = [(8000, 16384, 2, 1000), (4000, 8192, 2, 1000), (96_000, 8192, 0, 0), (16000, 32768, 4, 1000),
              (2000, 4096, 1, 250), (2000, 4096, 1, 250)]  # fmt: skip
    return [JobRequest(job_id=f"p{i}", cpu_milli=c, memory_mib=m, num_gpu=g, per_gpu_milli=per, submit_time=float(i))
            for i, (c, m, g, per) in enumerate(shapes)]  # fmt: skip


def placements(policy) -> list[tuple[str, str, tuple[int, ...]]]:
    result = schedule_step(snapshot(), jobs(), policy, now=10.0)
    return [(p.job_id, p.node_id, tuple(p.gpu_indices)) for p in result.placements]


@pytest.fixture
def no_model(tmp_path, monkeypatch):
    """The learned policy's model directory does not exist: it decides with its fallback."""
    monkeypatch.setenv("SEMSCHED_MODEL_DIR", str(tmp_path / "models" / "latest"))


def test_a_model_less_learned_worker_decides_with_the_configured_fallback(no_model, monkeypatch):
    monkeypatch.setenv("SEMSCHED_POLICY", "learned")
    monkeypatch.setenv("SEMSCHED_FALLBACK_POLICY", "best-fit")
    settings = Settings()
    assert settings.fallback_policy == "best-fit"
    policy = build_policy(settings)
    assert isinstance(policy, LearnedPolicy) and policy.fallback_name == "best-fit"
    assert policy.fallback.name == "best-fit"
    best_fit, fgd = placements(get_policy("best-fit")), placements(get_policy("fgd"))
    assert best_fit != fgd  # (so the decisions below tell the two apart)
    assert placements(policy) == best_fit
    assert policy.fell_back and "no model directory at" in (policy.fallback_reason or "")
    assert "fallback best-fit" in repr(policy)


def test_the_fallback_is_fgd_by_default_and_reaches_a_composed_learned_policy(no_model, monkeypatch):
    monkeypatch.delenv("SEMSCHED_FALLBACK_POLICY", raising=False)
    assert Settings().fallback_policy == "fgd"
    assert build_policy(Settings(policy="learned")).fallback_name == "fgd"  # type: ignore[attr-defined]
    composed = build_policy(Settings(policy="las+learned", fallback_policy="gpu-packing"))
    assert composed.placement.fallback_name == "gpu-packing"  # type: ignore[attr-defined]


def test_heuristic_workers_are_built_without_it(monkeypatch):
    monkeypatch.setenv("SEMSCHED_FALLBACK_POLICY", "best-fit")
    for name in ("fgd", "best-fit", "las+best-fit"):
        policy = build_policy(Settings(policy=name))
        assert not isinstance(getattr(policy, "placement", policy), LearnedPolicy)
        assert placements(policy) == placements(get_policy(name))


@pytest.mark.parametrize("name", ["best-fitt", "learned", "las+best-fit", ""])
def test_an_unknown_or_non_heuristic_fallback_is_refused_naming_the_choices(monkeypatch, name):
    monkeypatch.setenv("SEMSCHED_FALLBACK_POLICY", name)
    with pytest.raises(pydantic.ValidationError) as e:
        Settings()
    message = str(e.value)
    assert "SEMSCHED_FALLBACK_POLICY" in message and "fgd" in message and "best-fit" in message
    assert "learned" not in fallback_choices() and {"fgd", "best-fit", "random"} <= set(fallback_choices())


def test_reading_the_settings_does_not_import_torch() -> None:
    """(Found by review: checking the fallback's name imported inference, so torch, in every process that
    read its settings — the agents, a replay, `semsched sql` — 1.5 s and 800 MB each.)"""
    import subprocess
    import sys

    code = ("import sys; from streams.settings import Settings; s = Settings(); "
            "assert s.fallback_policy == 'fgd'; print('torch' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
