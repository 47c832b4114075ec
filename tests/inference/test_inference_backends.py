import dataclasses
import os

import pytest
import torch
from inference_helpers import pod_mix, small_snapshot
from test_inference_policy import SPEC

import inference.model.io as model_io
from inference.backends import InProcessBackend, get_backend
from inference.model import ModelConfig, Scorer, point_latest, save_model
from inference.model.step import PolicyInputs, build_inputs


def publish(root, version, seed):
    torch.manual_seed(seed)
    save_model(root / version, Scorer(ModelConfig(spec=SPEC, hidden=8, depth=2)), version)
    point_latest(root, version)


def test_a_new_version_is_picked_up_without_a_restart(tmp_path):
    publish(tmp_path, "v1", 0)
    backend = get_backend("in-process", tmp_path / "latest", watch_s=0.0)
    inputs = build_inputs(small_snapshot(), pod_mix(5), 0.0, SPEC, backend._encoder)
    first = backend.policy(inputs)
    assert first["version"] == "v1" and first["scores"].shape == (5, 12)
    assert not backend.refresh()  # nothing new
    publish(tmp_path, "v2", 1)
    assert backend.refresh()
    second = backend.policy(inputs)
    assert second["version"] == "v2" and not (second["scores"] == first["scores"]).all()


def test_a_broken_new_version_keeps_the_current_one_serving(tmp_path):
    publish(tmp_path, "v1", 0)
    backend = InProcessBackend(tmp_path / "latest", watch_s=0.0)
    os.makedirs(tmp_path / "v2")
    (tmp_path / "v2" / "config.json").write_text("{not json")
    point_latest(tmp_path, "v2")
    assert not backend.refresh()
    assert backend.version == "v1" and "v2" in backend.reload_error
    mark = model_io.version_mark(tmp_path / "v2")
    assert mark in backend._refused  # not read again at every step
    (tmp_path / "v2" / "config.json").write_text("{still not json")
    os.utime(tmp_path / "v2" / "config.json", ns=(mark[1] + 10**9, mark[1] + 10**9))
    assert not backend.refresh() and len(backend._refused) == 2  # written again: tried again


def test_a_new_version_whose_encoder_fails_is_not_swapped_in(tmp_path, monkeypatch):
    """(Found by review: the version was swapped in first, then building its encoder raised out of refresh.)"""
    import inference.backends.inprocess as inprocess

    publish(tmp_path, "v1", 0)
    backend = InProcessBackend(tmp_path / "latest", watch_s=0.0)
    monkeypatch.setattr(inprocess, "get_encoder", lambda name: (_ for _ in ()).throw(ValueError(f"no {name}")))
    other = dataclasses.replace(SPEC, encoder="hashed-ngram-8", text_dim=8)
    save_model(tmp_path / "v2", Scorer(ModelConfig(spec=other, hidden=8, depth=2)), "v2")
    point_latest(tmp_path, "v2")
    assert not backend.refresh() and backend.version == "v1" and "no hashed-ngram-8" in backend.reload_error


def test_inputs_survive_a_round_trip_through_named_arrays_and_are_checked(tmp_path):
    publish(tmp_path, "v1", 0)
    backend = InProcessBackend(tmp_path / "latest")
    inputs = build_inputs(small_snapshot(), pod_mix(7), 0.0, SPEC, backend._encoder)
    again = PolicyInputs.from_arrays(inputs.arrays())
    assert (backend.policy(again)["scores"] == backend.policy(inputs)["scores"]).all()
    bad = inputs.arrays()
    bad["which"] = bad["which"] + 100
    try:
        PolicyInputs.from_arrays(bad)
    except ValueError as e:
        assert "which" in str(e)
    else:
        raise AssertionError("an out-of-range 'which' was accepted")


def test_torch_threads_leave_a_core_to_the_rest_unless_told(monkeypatch):
    from inference.backends.inprocess import THREADS_ENV, torch_threads

    monkeypatch.delenv(THREADS_ENV, raising=False)
    for cores, want in ((1, 1), (2, 1), (3, 2), (16, 2)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, cores=cores: set(range(cores)))
        assert torch_threads() == want, cores
    monkeypatch.setenv(THREADS_ENV, "3")
    assert torch_threads() == 3
    monkeypatch.setenv(THREADS_ENV, "two")
    with pytest.raises(ValueError, match=THREADS_ENV):
        torch_threads()
