"""The step's backend call: a backend that computes the pair features itself gets the request
before this process has computed its own copy, and the two overlap; the copy is the same as
computing it first; a failure while computing it cancels the call. The backend embeds the
step's new texts only for an encoder served remotely (MiniLM), once per text."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from inference_helpers import pod_mix, small_snapshot

from inference.encoders import EncoderCache, get_encoder
from inference.features.pair_cache import PairCache
from inference.features.spec import FeatureSpec
from inference.model.step import build_inputs
from inference.step_call import StepCaller
from scheduling.metrics.fragmentation import Workload

FRAG = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16", cluster=True,
                   workload=FeatureSpec.workload_rows(Workload.from_jobs(pod_mix(200, seed=3))))  # fmt: skip


class Backend:
    """Answers once ``release`` is set (or at once); records what each request carried."""

    def __init__(self, computes_pairs: bool, release: asyncio.Event | None = None) -> None:
        self.computes_pairs, self.release = computes_pairs, release
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.seen: list[bool] = []  # per call: did the request carry the pairs
        self.cancelled = False

    async def policy_async(self, inputs):
        self.seen.append(inputs.pairs is not None)
        self.loop = asyncio.get_running_loop()
        self.started.set()
        try:
            if self.release is not None:
                await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return {"scores": np.zeros((len(inputs.jobs), len(inputs.nodes)), np.float32)}


class WaitingCache(PairCache):
    """A pair cache that computes only once the backend call has started (or fails instead), and
    then lets the backend answer: only a call in flight while the pairs are computed completes."""

    def __init__(self, backend: Backend, fail: bool = False) -> None:
        super().__init__()
        self.backend, self.fail = backend, fail

    def pairs_and_room(self, jobs, snapshot, spec):
        if not self.backend.started.wait(10):  # never started: the call did not overlap
            raise AssertionError("the backend call had not started while the pair features were computed")
        if self.fail:
            raise RuntimeError("pair features failed")
        out = super().pairs_and_room(jobs, snapshot, spec)
        if self.backend.release is not None:
            self.backend.loop.call_soon_threadsafe(self.backend.release.set)
        return out


def _call(backend, cache, spec=FRAG):
    snap, jobs = small_snapshot(), pod_mix(40, seed=5)
    caller = StepCaller()

    async def call():
        if backend.release is None:
            backend.release = asyncio.Event()  # (made on the running loop)
        return await asyncio.wait_for(caller(backend, snap, jobs, 3.0, spec, EncoderCache(get_encoder(spec.encoder)),
                                             pair_cache=cache), 20)  # fmt: skip

    try:
        inputs, out = asyncio.run(call())
    finally:
        caller.close()
    want = build_inputs(snap, jobs, 3.0, spec, EncoderCache(get_encoder(spec.encoder)))
    return inputs, out, want


def test_a_backend_that_computes_the_pairs_gets_the_request_while_they_are_computed_here():
    backend = Backend(computes_pairs=True)
    inputs, out, want = _call(backend, WaitingCache(backend))
    assert backend.seen == [False] and inputs.source is not None  # the request went without them
    np.testing.assert_array_equal(inputs.pairs, want.pairs)  # the copy is what computing them first gives
    np.testing.assert_array_equal(inputs.which, want.which)
    assert out["scores"].shape == (40, 12)


def test_an_in_process_backend_gets_the_pairs_in_the_request():
    backend = Backend(computes_pairs=False)
    backend.release = None  # answers at once
    inputs, _, want = _call_at_once(backend)
    assert backend.seen == [True]
    np.testing.assert_array_equal(inputs.pairs, want.pairs)


def _call_at_once(backend, encoder=None, jobs=None):
    snap, jobs = small_snapshot(), jobs or pod_mix(40, seed=5)
    caller = StepCaller()
    try:
        inputs, out = asyncio.run(caller(backend, snap, jobs, 3.0, FRAG, encoder or EncoderCache(get_encoder(FRAG.encoder)),
                                         pair_cache=PairCache()))  # fmt: skip
    finally:
        caller.close()
    return inputs, out, build_inputs(snap, jobs, 3.0, FRAG, EncoderCache(get_encoder(FRAG.encoder)))


class ServedEncoder:
    """An encoder the backend embeds for, as for MiniLM (the hashed vectors, so the inputs compare)."""

    serve_remotely = True

    def __init__(self) -> None:
        self.name, self.dim = FRAG.encoder, FRAG.text_dim

    def encode(self, texts):
        raise AssertionError(f"{len(texts)} texts embedded in this process, not by the backend")


@pytest.mark.parametrize("served", [False, True])
def test_the_backend_embeds_the_new_texts_only_for_an_encoder_served_remotely(served):
    backend = Backend(computes_pairs=False)
    embedded: list[list[str]] = []

    async def encode_async(texts):
        embedded.append(list(texts))
        return get_encoder(FRAG.encoder).encode(texts)

    backend.encode_async = encode_async
    encoder = EncoderCache(ServedEncoder() if served else get_encoder(FRAG.encoder))
    jobs = pod_mix(40, seed=5)
    inputs, _, want = _call_at_once(backend, encoder, jobs)
    np.testing.assert_array_equal(inputs.jobs, want.jobs)
    texts = sorted({encoder._clean(j.text) for j in jobs})
    assert [sorted(call) for call in embedded] == ([texts] if served else [])
    _call_at_once(backend, encoder, jobs)  # the same texts again: none new
    assert len(embedded) == (1 if served else 0)


def test_a_failure_while_computing_the_pairs_cancels_the_call():
    async def run():
        backend = Backend(computes_pairs=True, release=asyncio.Event())  # never answers by itself
        caller = StepCaller()
        snap, jobs = small_snapshot(), pod_mix(10, seed=1)
        with pytest.raises(RuntimeError, match="pair features failed"):
            await asyncio.wait_for(caller(backend, snap, jobs, 0.0, FRAG, EncoderCache(get_encoder(FRAG.encoder)),
                                          pair_cache=WaitingCache(backend, fail=True)), 20)  # fmt: skip
        caller.close()
        return backend

    assert asyncio.run(run()).cancelled
