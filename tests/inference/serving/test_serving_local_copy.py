"""The Triton client's local copy of the serving version (inference/serving/local_copy.py), with
the server's answers stood in: which version answered is all the copy reads of them.

Found by review: an answer from another version than the one whose feature spec built the
request was used as it was (its scores on another model's inputs), and while the server served
an older version than ``models/latest`` named, every check of the pointer loaded the newer one
and the next answer loaded the older one back, each a model load on the worker's event loop."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from serving_helpers import SPEC, publish

from inference.backends import BackendError
from inference.model import point_latest
from inference.serving.client import TritonBackend

#: the same dimensions, another content (a reordered GPU-model vocabulary)
OTHER_SPEC = replace(SPEC, gpu_models=("T4", "A10", "V100M32"))


def answering(b: TritonBackend, versions: list[str | BaseException]) -> list[str]:
    """Stand the server in: each call answers the next of ``versions`` (or raises it)."""
    asked: list[str] = []

    async def run_async(flow):  # noqa: ANN001, ANN202
        flow.close()
        asked.append(b.version)  # the version whose spec built the request
        answer = versions.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return {"version": answer}

    b._run_async = run_async  # type: ignore[method-assign]
    return asked


def call(b: TritonBackend) -> dict:
    return asyncio.run(b.policy_async(None))  # type: ignore[arg-type]


def test_an_answer_to_another_specs_inputs_is_refused_and_the_copy_follows_the_server_not_the_pointer(tmp_path):
    publish(tmp_path, "v1", seed=0)
    latest = publish(tmp_path, "v2", seed=1, spec=OTHER_SPEC)  # promoted; the server still serves v1
    b = TritonBackend(latest, url="localhost:1", watch_s=0.0)
    answering(b, ["v1", "v1", "v1"])
    with pytest.raises(BackendError, match="inputs built for v2"):
        call(b)
    assert b.version == "v1" and b.refresh(force=True)  # it followed the server (reported once) ...
    assert not b.refresh(force=True) and b.version == "v1"  # ... and does not flip back to the pointer's v2
    assert call(b)["version"] == "v1" and b.version == "v1"
    publish(tmp_path, "v3", seed=2)  # the pointer moves again: followed
    assert b.refresh(force=True) and b.version == "v3"


def test_an_answer_of_a_model_with_another_node_graph_is_refused(tmp_path):
    """Found by review: only the feature spec was compared, and the step's inputs carry the node graph of its
    model's k nearest nodes: an answer computed on another k's graph was used."""
    publish(tmp_path, "v1", seed=0, knn=4)
    latest = publish(tmp_path, "v2", seed=1, knn=16)  # the same spec
    b = TritonBackend(latest, url="localhost:1", watch_s=0.0)
    answering(b, ["v1"])
    with pytest.raises(BackendError, match="inputs built for v2, whose feature spec or topology"):
        call(b)


def test_an_answer_from_another_version_with_the_same_spec_is_used_and_followed(tmp_path):
    latest = publish(tmp_path, "v1", seed=0)
    b = TritonBackend(latest, url="localhost:1", watch_s=3600.0)
    publish(tmp_path, "v2", seed=1)  # the server picked it up before this worker looked
    answering(b, ["v2"])
    assert call(b)["version"] == "v2" and b.version == "v2"


def test_after_a_failed_call_the_copy_follows_the_pointer_again(tmp_path):
    publish(tmp_path, "v1", seed=0)
    latest = publish(tmp_path, "v2", seed=1, spec=OTHER_SPEC)
    b = TritonBackend(latest, url="localhost:1", watch_s=0.0)
    asked = answering(b, ["v1", BackendError("triton policy: INVALID_ARGUMENT", answered=True), "v2"])
    with pytest.raises(BackendError, match="inputs built for v2"):
        call(b)
    b.refresh(force=True)
    assert b.version == "v1"
    with pytest.raises(BackendError, match="INVALID_ARGUMENT"):  # the server now serves v2, refusing v1's inputs
        call(b)
    assert b.refresh(force=True) and b.version == "v2"
    assert call(b)["version"] == "v2" and asked == ["v2", "v1", "v2"]


def test_a_missed_deadline_leaves_the_copy_on_the_version_the_server_answers(tmp_path):
    # found by review: any failed call, a missed deadline too, flipped the copy back to the pointer's
    # version; the server's next answer (the kept one) then refused that step's inputs
    publish(tmp_path, "v1", seed=0)
    latest = publish(tmp_path, "v2", seed=1, spec=OTHER_SPEC)  # promoted; the server refuses it until restarted
    b = TritonBackend(latest, url="localhost:1", watch_s=0.0)
    late = BackendError("triton policy at localhost:1: DEADLINE_EXCEEDED after 500 ms")
    asked = answering(b, ["v1", late, "v1"])
    with pytest.raises(BackendError, match="inputs built for v2"):
        call(b)
    b.refresh(force=True)
    with pytest.raises(BackendError, match="DEADLINE_EXCEEDED"):
        call(b)
    assert not b.refresh(force=True) and b.version == "v1"
    assert call(b)["version"] == "v1" and asked == ["v2", "v1", "v1"]


def test_only_a_call_the_server_refused_counts_as_answered():
    class Status(Exception):
        def __init__(self, status: str) -> None:
            super().__init__(status)
            self._status = status

        def status(self) -> str:
            return self._status

        def message(self) -> str:
            return "details"

    b = TritonBackend.__new__(TritonBackend)
    b.url = "localhost:1"
    answered = {s: b._error("policy", Status(s), 500.0).answered
                for s in ("StatusCode.INVALID_ARGUMENT", "StatusCode.INTERNAL", "StatusCode.DEADLINE_EXCEEDED",
                          "StatusCode.UNAVAILABLE", "StatusCode.CANCELLED")}  # fmt: skip
    assert answered == {"StatusCode.INVALID_ARGUMENT": True, "StatusCode.INTERNAL": True,
                        "StatusCode.DEADLINE_EXCEEDED": False, "StatusCode.UNAVAILABLE": False,
                        "StatusCode.CANCELLED": False}  # fmt: skip
    assert not b._error("policy", ConnectionError("refused"), 500.0).answered


def test_a_pointer_to_the_version_the_server_answers_clears_what_was_kept(tmp_path):
    publish(tmp_path, "v1", seed=0)
    latest = publish(tmp_path, "v2", seed=1, spec=OTHER_SPEC)
    b = TritonBackend(latest, url="localhost:1", watch_s=0.0)
    answering(b, ["v1", "v1"])
    with pytest.raises(BackendError):
        call(b)
    point_latest(tmp_path, "v1")  # promotion rolled back: pointer and server agree
    b.refresh(force=True)
    assert call(b)["version"] == "v1" and b.version == "v1"
    point_latest(tmp_path, "v2")  # and forward again: the copy follows the pointer
    assert b.refresh(force=True) and b.version == "v2"


def test_a_version_that_cannot_be_loaded_here_is_looked_for_again_only_after_the_watch(tmp_path, monkeypatch):
    """Found by review: every step the server answered with a version missing here loaded ``model_dir``'s
    model (and its sibling's) again, on the worker's event loop, only to refuse the answer again."""
    import inference.model.io as io

    latest = publish(tmp_path, "v1", seed=0)
    b = TritonBackend(latest, url="localhost:1", watch_s=3600.0)
    loads, load_model = [], io.load_model
    monkeypatch.setattr(io, "load_model", lambda path: loads.append(path) or load_model(path))
    answering(b, ["v9", "v9", "v9"])
    for _ in range(3):
        with pytest.raises(BackendError, match="version v9, which this worker cannot load locally"):
            call(b)
    assert [p.name for p in loads] == ["latest", "v9"]  # (model_dir, then its sibling v9) the first step only
    b.local.watch_s = 0.0  # the watch has passed: it looks again
    answering(b, ["v9"])
    with pytest.raises(BackendError, match="cannot load locally"):
        call(b)
    assert len(loads) == 4
