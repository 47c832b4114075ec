"""The three models of one server swap to a new version together, or none does
(``inference/serving/version_agreement.py``): each model's stub has a host of its own, as inside
tritonserver. Found by review: the policy model refused a version whose outputs changed while the job
encoder swapped to it with another text encoder, and every worker step with a new job text fell back
until ``semsched serve`` was restarted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from serving_helpers import SPEC, publish

from inference.serving.host import ModelHost
from inference.serving.models import JobEncoderModel, PolicyModel
from inference.serving.repository import MODEL_NAMES
from inference.serving.version_agreement import READY, REFUSED, WAITING, VersionAgreement


class Encoder:
    def __init__(self, name: str) -> None:
        self.name, self.dim = name, SPEC.text_dim

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), self.dim), np.float32)


def hosts(latest: Path, agreed: Path) -> dict[str, ModelHost]:
    """One host per model of the server, as each stub has (checked on every ``current()``)."""
    return {kind: ModelHost(latest, watch_s=0.0, agreement=VersionAgreement(agreed, kind, MODEL_NAMES))
            for kind in MODEL_NAMES}  # fmt: skip


def versions(of: dict[str, ModelHost]) -> dict[str, str]:
    return {kind: host.current().version for kind, host in of.items()}


def test_the_models_swap_once_every_one_is_ready(tmp_path: Path) -> None:
    latest = publish(tmp_path / "models", "v1", seed=0)
    served = hosts(latest, tmp_path / "agreed")
    publish(tmp_path / "models", "v2", seed=1)
    assert served["policy"].current().version == "v1"  # ready here; the others not heard from
    assert "waiting for the job_encoder, predictor model(s)" in (served["policy"].reload_error or "")
    assert served["job_encoder"].current().version == "v1"
    assert served["predictor"].current().version == "v2"  # the last to be ready: every verdict is in
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v2")
    assert all(host.reload_error is None for host in served.values())


def test_a_version_one_model_refuses_is_served_by_none(tmp_path: Path) -> None:
    """The review's case: v2 has a cost head (the policy's Triton outputs cannot change without a restart)
    and another text encoder. The job encoder prepares v2's encoder, then lets it go."""
    latest = publish(tmp_path / "models", "v1", seed=0)
    served = hosts(latest, tmp_path / "agreed")
    built: list[str] = []

    def factory(name: str, device: str) -> Encoder:
        built.append(name)
        return Encoder(name)

    policy = PolicyModel(served["policy"])
    encoder = JobEncoderModel(served["job_encoder"], encoder_factory=factory)
    publish(tmp_path / "models", "v2", seed=1, spec=replace(SPEC, encoder="hashed-ngram-16-other"), cost_dim=1)
    assert versions({"job_encoder": served["job_encoder"]}) == {"job_encoder": "v1"}  # ready, waiting
    assert versions({"policy": served["policy"]}) == {"policy": "v1"}  # refused: its outputs differ
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v1")  # ... and so by every model
    for kind in ("job_encoder", "predictor"):
        assert "the policy model refused it" in (served[kind].reload_error or ""), served[kind].reload_error
    assert built == [SPEC.encoder, "hashed-ngram-16-other"] and list(encoder._encoders) == [SPEC.encoder]
    answer = encoder([{"TEXT": np.array([[b"train resnet"]], dtype=object)}])[0]
    assert answer["VERSION"].reshape(-1)[0] in (b"v1", "v1")
    assert policy.host.version == "v1"
    publish(tmp_path / "models", "v3", seed=2)  # a version every model can serve: taken by all
    assert versions(served) == {"policy": "v1", "job_encoder": "v1", "predictor": "v3"}  # the last saw all ready
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v3")


def test_a_version_whose_parts_fail_to_build_in_one_model_is_refused_by_all(tmp_path: Path) -> None:
    """The other way round: the job encoder cannot build v2's encoder (MiniLM on a full GPU, say)."""
    latest = publish(tmp_path / "models", "v1", seed=0)
    served = hosts(latest, tmp_path / "agreed")

    def factory(name: str, device: str) -> Any:
        if name != SPEC.encoder:
            raise RuntimeError("CUDA out of memory")
        return Encoder(name)

    JobEncoderModel(served["job_encoder"], encoder_factory=factory)
    publish(tmp_path / "models", "v2", seed=1, spec=replace(SPEC, encoder="minilm"))
    assert versions({"policy": served["policy"]}) == {"policy": "v1"}  # ready first, then waiting
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v1")
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v1")
    assert "the job_encoder model refused it: RuntimeError: CUDA out of memory" in (served["policy"].reload_error or "")


def test_verdicts_are_per_version_and_written_whole(tmp_path: Path) -> None:
    mark = (tmp_path / "v2", 123)
    policy, encoder = (VersionAgreement(tmp_path / "agreed", k, ("policy", "job_encoder")) for k in ("policy", "job_encoder"))
    assert policy.verdict(mark) == (WAITING, "policy, job_encoder")
    policy.say(mark, READY)
    assert encoder.verdict(mark) == (WAITING, "job_encoder")
    encoder.say(mark, READY)
    assert policy.verdict(mark) == (READY, "")
    assert policy.verdict((tmp_path / "v2", 124)) == (WAITING, "policy, job_encoder")  # the same name written again
    encoder.say((tmp_path / "v3", 1), REFUSED, "no")
    assert policy.verdict((tmp_path / "v3", 1)) == (REFUSED, "the job_encoder model refused it: no")
    assert not list((tmp_path / "agreed").rglob(".*.tmp"))


def test_latest_moved_on_and_back_before_one_model_swapped(tmp_path: Path) -> None:
    """Found by the served test: two models swapped to v2, and latest went back to v1 before the third swapped;
    the two waited for ever for the third's verdict on v1, which it had never left."""
    from inference.model import point_latest

    latest = publish(tmp_path / "models", "v1", seed=0)
    served = hosts(latest, tmp_path / "agreed")
    publish(tmp_path / "models", "v2", seed=1)
    for kind in ("predictor", "policy", "job_encoder", "policy"):
        served[kind].current()  # the predictor said ready first, and swaps at its next look ...
    assert {kind: host.version for kind, host in served.items()} == {"policy": "v2", "job_encoder": "v2", "predictor": "v1"}
    point_latest(tmp_path / "models", "v1")  # ... which comes after latest went back
    versions(served)
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v1")


def test_a_model_that_finished_preparing_a_version_latest_left_does_not_swap_to_it(tmp_path: Path) -> None:
    """Found by review: the job encoder was still building v2's parts when latest moved on to v3; the other two
    had said ready for v2 and dropped it, but their verdicts stood, so the job encoder swapped to v2 alone
    and answered with a version no other model served."""
    from inference.model import point_latest

    models = tmp_path / "models"
    for i, v in enumerate(("v3", "v2", "v1")):
        latest = publish(models, v, seed=i)  # latest -> v1
    served = hosts(latest, tmp_path / "agreed")
    point_latest(models, "v2")
    served["policy"].current(), served["predictor"].current()  # ready for v2, waiting for the job encoder

    def slow_parts(loaded: Any) -> None:  # the job encoder builds v2's parts (MiniLM: about 10 s) ...
        if loaded.version == "v2":
            point_latest(models, "v3")  # ... and latest moves on meanwhile
            served["policy"].current(), served["predictor"].current()  # the others drop v2

    served["job_encoder"].on_swap(slow_parts)
    served["job_encoder"].current()
    assert {kind: host.version for kind, host in served.items()} == dict.fromkeys(MODEL_NAMES, "v1")
    for _ in range(3):
        versions(served)
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v3")


def test_a_version_every_model_was_ready_for_is_taken_by_all_even_once_latest_moved_on(tmp_path: Path) -> None:
    """Found by review: the job encoder, ready last, swapped to v2; latest moved to v3 (which the policy refuses)
    before the other two looked again, and they let v2 go: the server answered with two versions until one
    all three accepted came."""
    from inference.model import point_latest

    models = tmp_path / "models"
    for i, v in enumerate(("v3", "v2", "v1")):
        latest = publish(models, v, seed=i)  # latest -> v1
    served = hosts(latest, tmp_path / "agreed")
    served["policy"].guard(lambda loaded: "v3 refused" if loaded.version == "v3" else None)
    point_latest(models, "v2")
    served["policy"].current(), served["predictor"].current()  # ready for v2, waiting
    assert served["job_encoder"].current().version == "v2"  # ready last: every verdict is in
    point_latest(models, "v3")  # before the other two look again
    for _ in range(4):
        versions(served)
    assert versions(served) == dict.fromkeys(MODEL_NAMES, "v2")
