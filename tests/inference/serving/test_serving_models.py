"""The Triton models' callables, called directly (no server): wire encoding, policy, job encoder, host."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from inference_helpers import pod_mix, small_snapshot
from serving_helpers import FRAG_SPEC, SPEC, publish

from inference.encoders import get_encoder
from inference.model import load_model
from inference.model.step import build_inputs, run_policy
from inference.serving.host import ModelHost
from inference.serving.models import COMPACT, JobEncoderModel, PolicyModel, from_wire, to_wire, unpack_scores
from inference.serving.pairs import ServedPairs


def inputs_for(jobs: int, spec=SPEC):
    return build_inputs(small_snapshot(), pod_mix(jobs), 1.0, spec, get_encoder(spec.encoder))


def assert_same_inputs(back, x) -> None:
    for name, value in x.arrays().items():
        got = getattr(back, name)
        assert got.shape == value.shape and got.dtype == value.dtype, name
        np.testing.assert_array_equal(got, value)


def test_wire_round_trip_keeps_every_array_and_encodes_empty_dimensions():
    served = ServedPairs()
    for spec in (SPEC, FRAG_SPEC):
        for jobs in (0, 3):
            x = inputs_for(jobs, spec)
            wire = to_wire(x)
            assert all(v.size > 0 for v in wire.values())  # PyTriton cannot carry zero-size tensors
            # the compact arrays (with FGD's columns: GPU models and health too), the server computes the same pairs
            assert "PAIRS" not in wire and "SHAPES" in wire and ("HEALTHY" in wire) == bool(spec.workload)
            assert_same_inputs(from_wire(wire, lambda source, spec=spec: served(source, spec)), x)
    labels = inputs_for(2, FRAG_SPEC)
    labels = type(labels)(**{**labels.arrays(), "neighbours": np.zeros((12, 0), np.int64),
                             "groups": np.arange(12, dtype=np.int64) % 3})  # fmt: skip
    back = from_wire(to_wire(labels))
    assert back.neighbours.shape == (12, 0) and back.topology().kind == "labels"


def test_the_compact_arrays_are_smaller_than_the_pairs_and_refused_when_incomplete():
    x = inputs_for(40)
    compact, full = to_wire(x), to_wire(replace(x, source=None))
    assert x.pairs.shape[0] >= 5 and "PAIRS" in full and set(full) - set(compact) == {"PAIRS"}
    assert sum(compact[k].nbytes for k in COMPACT) < 0.3 * full["PAIRS"].nbytes  # 7 shapes x 12 nodes here
    with pytest.raises(ValueError, match="pairs_for"):
        from_wire(compact)
    with pytest.raises(ValueError, match="missing GPU_FREE"):
        from_wire({k: v for k, v in compact.items() if k != "GPU_FREE"}, lambda source: x.pairs)
    with pytest.raises(ValueError, match="workload"):  # a lean request to a version with FGD's columns
        ServedPairs()(x.source, FRAG_SPEC)
    frag = to_wire(inputs_for(4, FRAG_SPEC))
    with pytest.raises(ValueError, match="come together"):
        from_wire({k: v for k, v in frag.items() if k != "HEALTHY"}, lambda source: x.pairs)


def test_policy_model_answers_run_policy_per_batch_row_with_its_version(tmp_path):
    publish(tmp_path, "v1", seed=3)
    host = ModelHost(tmp_path / "latest")
    model = PolicyModel(host)
    assert {"SCORES", "NODE_PART"} <= set(model.outputs)
    a, empty = inputs_for(4), inputs_for(0)
    request = {k: v[None] for k, v in to_wire(a).items()}
    answers = model([request, {k: v[None] for k, v in to_wire(empty).items()}])
    want = run_policy(host.loaded.model, a)
    # the scores travel for the fitting (job, node) pairs only; the client puts them back in place
    fit = a.fits[a.which]
    assert 0 < fit.sum() < fit.size and answers[0]["SCORES_FIT"].shape == (1, fit.sum())
    got = unpack_scores({"scores_fit": answers[0]["SCORES_FIT"][0]}, a)["scores"]
    np.testing.assert_array_equal(got, want["scores"])
    assert np.isneginf(got[~fit]).all() and np.isfinite(got[fit]).all()
    np.testing.assert_array_equal(answers[0]["NODE_PART"][0], want["node_part"])
    assert answers[0]["VERSION"].tolist() == [[b"v1"]]
    assert answers[1]["SCORES"].shape == (1, 1, 1) and answers[1]["SCORES_FIT"].shape == (1, 1)  # dummies
    # a request without FITS gets every pair's score
    whole = model([{k: v[None] for k, v in to_wire(replace(a, fits=None)).items()}])[0]
    np.testing.assert_array_equal(whole["SCORES"][0][fit], want["scores"][fit])
    assert np.isfinite(whole["SCORES"][0]).all()


def test_host_swaps_to_the_new_latest_and_keeps_serving_on_a_broken_one(tmp_path):
    publish(tmp_path, "v1", seed=1)
    host = ModelHost(tmp_path / "latest", watch_s=0.0)
    seen = []
    host.on_swap(lambda loaded: seen.append(loaded.version))
    publish(tmp_path, "v2", seed=2)
    assert host.current().version == "v2" and seen == ["v2"]
    (tmp_path / "broken").mkdir()
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").symlink_to("broken")
    assert host.current().version == "v2" and "broken" in (host.reload_error or "")


@pytest.mark.parametrize(("hook", "error", "why"), [
    ("on_swap", "cannot build its encoder", "RuntimeError: cannot build its encoder"),
    ("guard", "CUDA out of memory", "its check failed: RuntimeError: CUDA out of memory"),
])  # fmt: skip
def test_a_version_a_listener_or_a_check_refuses_by_raising_is_not_loaded_again(tmp_path, monkeypatch, hook, error, why):
    """Found by review: (a listener) the version was swapped in before the listener ran; when it raised, the
    job encoder kept the old encoder and answered under the new version's name, and it was never tried again;
    (a check: a CUDA OOM on the policy model's test batch, say) it came out of ``current()``, every request
    failed, reloading the new version each time. The current version serves; a refused or broken version is
    not loaded again at every check, until it changes or latest moves."""
    import inference.model.io as model_io

    publish(tmp_path, "v1", seed=1)
    host = ModelHost(tmp_path / "latest", watch_s=0.0)
    getattr(host, hook)(lambda loaded: (_ for _ in ()).throw(RuntimeError(error)))
    loads = []
    real = model_io.load_model
    monkeypatch.setattr(model_io, "load_model", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    publish(tmp_path, "v2", seed=2)
    for _ in range(3):
        assert host.current().version == "v1"
    assert why in (host.reload_error or "") and len(loads) == 1 and host.swaps == 0
    publish(tmp_path, "v3", seed=3)  # another version: tried
    host.current()
    assert len(loads) == 2


def test_a_policy_stub_whose_version_has_other_outputs_than_triton_was_configured_with_does_not_start(tmp_path):
    """Found by review: the repository was written from the version latest named then; the stub loads latest
    again seconds later, and a promotion in between (heads added or removed) served outputs Triton was not
    configured with, its guard comparing new versions with the wrong list."""
    from inference.serving.models import PolicyModel, policy_output_ranks

    publish(tmp_path, "v1", seed=1)
    host = ModelHost(tmp_path / "latest")
    names = [*policy_output_ranks(host.loaded), "VERSION"]
    assert PolicyModel(host, names).outputs.keys() == set(names) - {"VERSION"}
    with pytest.raises(RuntimeError, match="Triton was configured with .* start it again"):
        PolicyModel(host, [*names, "COST"])


def test_job_encoder_model_batches_all_requests_in_one_encode(tmp_path):
    publish(tmp_path, "v1", seed=0)
    calls = []

    class Counting:
        def __init__(self, name):
            self.inner, self.name, self.dim = get_encoder(name), name, get_encoder(name).dim

        def encode(self, texts):
            calls.append(len(texts))
            return self.inner.encode(texts)

    model = JobEncoderModel(ModelHost(tmp_path / "latest"), encoder_factory=lambda name, device: Counting(name))
    r1 = {"TEXT": np.array([[b"a b c"], ["d é".encode()]], dtype=np.object_)}
    r2 = {"TEXT": np.array([[b""]], dtype=np.object_)}
    out = model([r1, r2])
    assert calls == [3]
    want = get_encoder(SPEC.encoder).encode(["a b c", "d é", ""])
    np.testing.assert_array_equal(np.concatenate([out[0]["EMBEDDING"], out[1]["EMBEDDING"]]), want)
    assert out[1]["VERSION"].tolist() == [[b"v1"]]
    assert load_model(tmp_path / "latest").config.spec.encoder == model.encoder_name


def test_a_watching_host_loads_a_new_version_beside_the_serving_one(tmp_path):
    """Found by review: ``current()`` loaded a new version and built its parts on a request's path (a MiniLM
    encoder, ~10 s): every request waited, and the worker's steps fell back. With ``watch()`` a thread does it;
    requests are answered by the serving version until the new one is ready, then by the new one."""
    import threading

    publish(tmp_path, "v1", seed=1)
    host = ModelHost(tmp_path / "latest", watch_s=0.01)
    building, release = threading.Event(), threading.Event()
    host.on_swap(lambda loaded: (building.set(), release.wait(30)))
    host.watch()
    try:
        publish(tmp_path, "v2", seed=2)
        assert building.wait(10)
        answered: list[str] = []
        request = threading.Thread(target=lambda: answered.append(host.current().version))
        request.start()
        request.join(2)
        assert answered == ["v1"]  # at once, while v2's parts are being built
        release.set()
        for _ in range(500):
            if host.current().version == "v2":
                break
            threading.Event().wait(0.01)
        assert host.current().version == "v2" and host.swaps == 1
    finally:
        release.set()
        host.stop_watching()


def test_job_encoder_answers_each_version_with_its_own_encoder_across_a_swap(tmp_path):
    """Once a new version's encoder is built (the host's watch thread), until the version serves, requests get the serving
    version's name *and* vectors; found by review: the listener replaced the encoder first, and requests
    in between answered the old name with the new encoder's vectors."""
    import threading

    publish(tmp_path, "v1", seed=1)
    host = ModelHost(tmp_path / "latest", watch_s=0.01)
    built, release = threading.Event(), threading.Event()
    model = JobEncoderModel(host)
    host.on_swap(lambda loaded: (built.set(), release.wait(30)))  # after the model's own: its encoder is built
    host.watch()
    request = {"TEXT": np.array([[b"train resnet"]], dtype=np.object_)}
    try:
        publish(tmp_path, "v2", seed=2, spec=replace(SPEC, text_dim=8, encoder="hashed-ngram-8"))
        assert built.wait(10)
        out = model([request])[0]
        assert out["VERSION"].tolist() == [[b"v1"]] and out["EMBEDDING"].shape == (1, 16)
        release.set()
        for _ in range(500):
            if host.version == "v2":
                break
            threading.Event().wait(0.01)
        out = model([request])[0]
        assert out["VERSION"].tolist() == [[b"v2"]] and out["EMBEDDING"].shape == (1, 8)
        np.testing.assert_array_equal(out["EMBEDDING"], get_encoder("hashed-ngram-8").encode(["train resnet"]))
        assert model.encoder_name == "hashed-ngram-8"
        assert list(model._encoders) == ["hashed-ngram-8"]  # v2 answered: v1's encoder is let go (review)
    finally:
        release.set()
        host.stop_watching()


def test_batch_rows_of_packed_scores_with_different_lengths_are_padded():
    from inference.serving.models import stack_rows

    out = stack_rows([np.arange(3, dtype=np.float32), np.ones(1, np.float32)])
    assert out.shape == (2, 3) and out[0].tolist() == [0, 1, 2] and out[1, 0] == 1 and np.isnan(out[1, 1:]).all()
    assert stack_rows([np.ones((2, 2)), np.zeros((2, 2))]).shape == (2, 2, 2)


def test_a_watch_thread_outlives_a_check_that_raises_and_stops_when_told():
    """(Found by review: the duration host's thread had no guard, one exception ended its checks for good;
    ``--watch 0`` made both threads spin every 10 ms.)"""
    import threading

    from inference.serving.watcher import MIN_INTERVAL_S, Watcher

    calls, again = [], threading.Event()

    def check():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("latest moved under us")
        again.set()

    watcher = Watcher(check, 0.0, "test-watch")
    assert watcher.interval_s == MIN_INTERVAL_S
    assert again.wait(10)
    watcher.stop()
    seen = len(calls)
    threading.Event().wait(3 * MIN_INTERVAL_S)
    assert len(calls) == seen and not watcher._thread.is_alive()
