"""``semsched bench triton``: decision latency per scheduling step, via Triton beside in-process.

For each cluster size (the 1,213 openb GPU nodes loaded to ~70 % of their GPUs as
``semsched bench learned`` loads them; 5,000 nodes = that node list and its allocations
replicated) and each pending-queue size (openb pods), ``repeat`` consecutive steps after one
warm-up, with ``churn`` placements, arrivals and departures between two steps (:class:`inference.training.step_latency.Churn`:
with the same state again and again, the pair caches on both sides would recompute nothing):

- **features**: :func:`inference.model.step.build_inputs` with a pair cache, as the in-process
  backend's step needs them (node state, topology, job rows, pair features per distinct job shape);
- **in-process**: :class:`~inference.backends.InProcessBackend` ``policy`` (fusion encoder
  once, the head over pending × nodes);
- **triton**: :class:`~inference.serving.client.TritonBackend` ``policy_async`` alone (async
  gRPC, as the worker's loop awaits it): serialisation, the round trip (the large tensors
  through a shared-memory region when the server is on this host; tritonserver hands them to
  the model's Python-backend stub through its own), the pair features on the server (the request carries the compact node arrays
  instead, with the nodes' GPU models and health for FGD's columns, see
  :mod:`inference.serving.models`), the same ``run_policy`` on the server, the answer back;
  **payload** = request + answer bytes; **shared** = the part of it that went through the
  client's shared-memory region (:mod:`inference.serving.shared_memory`; 0 with
  ``SEMSCHED_TRITON_SHARED_MEMORY=off`` or a server on another host);
- **step in-process** = features + the in-process call; **step triton** = the worker's own call
  (:class:`inference.step_call.StepCaller`): the step's new job texts embedded by the server's
  ``job_encoder`` when the model's encoder is served there (MiniLM; the hashed encoder embeds
  them in this process, in the inputs), the inputs without the pair features, the request
  sent, and this process's copy of the pair features (which in-step re-scoring reads) computed
  while the answer travels. These are the issue's decision latency per step. Each side has its
  own pair and text caches, so both compute the same changes;
- **server's call** (with the server this run starts, not with ``--url``): what the server does
  for that request, timed in this process on a twin of the served ``policy`` model (:class:`inference.serving.models.PolicyModel`, its own pair cache
  fed the same requests): the compact arrays unpacked, the pair features computed, ``run_policy``,
  the answer packed; **triton - server's call**: the rest of the Triton call, step by step — the
  client's serialisation and parsing, gRPC, Triton's scheduling and its hand-over to the
  model's Python-backend stub and back (with the server's work done twice, on 2 shared cores, the two
  processes also wait for each other);
- **triton - in-process**: step triton − step in-process, step by step; **triton, pairs sent**:
  the same step once more with the pair features on the wire (what every request carried
  before the server computed them; the request is ~10× larger; it carries ``FITS`` and gets
  the packed answer like the compact one).

Every step's Triton scores are checked against in-process (to 1e-4), and the overlapped pair
features against the in-process step's (bit for bit).

The server runs on the same machine (2 shared cores here) unless ``--url`` points elsewhere;
the client's deadline is set high so that every call is timed, and the report counts the calls
that would have missed the worker's default deadline.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape

from ops.bench import environment, percentiles
from ops.console import wide_console

console = wide_console()


def replicated_cluster(snap: Any, nodes: list[Any], count: int) -> Any:
    """``count`` nodes: ``nodes`` (the openb list, in ``snap``'s order) repeated with their allocations in ``snap``."""
    from scheduling.node import NodeView
    from scheduling.snapshot import ClusterSnapshot

    out = []
    for i in range(count):
        b = i % len(nodes)
        nd = nodes[b]
        gpu_alloc = tuple(int(1000 - f) for f in snap.gpu_free[b, : nd.num_gpu])
        out.append(NodeView(node_id=f"{nd.node_id}-r{i // len(nodes)}", cpu_milli=nd.cpu_milli,
                            memory_mib=nd.memory_mib, num_gpu=nd.num_gpu, gpu_model=nd.gpu_model,
                            cpu_alloc_milli=int(snap.table.cpu_cap[b] - snap.cpu_free[b]),
                            memory_alloc_mib=int(snap.table.mem_cap[b] - snap.mem_free[b]),
                            gpu_alloc_milli=gpu_alloc if any(gpu_alloc) else ()))  # fmt: skip
    return ClusterSnapshot.from_nodes(out)


def clusters(sizes: list[int]) -> tuple[dict[int, Any], list[Any]]:
    from ops.bench.learned import loaded_cluster
    from ops.cli.train import openb_fill_inputs

    snap, pods = loaded_cluster()
    nodes = openb_fill_inputs()[0]
    assert [n.node_id for n in nodes] == list(snap.node_ids), "the openb node order changed"
    return {n: snap if n == len(nodes) else replicated_cluster(snap, nodes, n) for n in sizes}, pods


def time_sizes(local: Any, remote: Any, snaps: dict[int, Any], pods: list[Any], pending: list[int], repeat: int,
               deadline_ms: float, churn: int = 16, served: Any = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    from inference.encoders import EncoderCache, get_encoder
    from inference.features.jobs import JobRows
    from inference.features.pair_cache import PairCache
    from inference.model.step import build_inputs
    from inference.serving.models import to_wire
    from inference.step_call import StepCaller
    from inference.training.step_latency import Churn

    spec = local.loaded.config.spec
    rows: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    caller, timed = StepCaller(), _Timed(remote)
    try:
        for n_nodes, base in snaps.items():
            for n in pending:
                snap, jobs = base.copy(), [pods[i % len(pods)] for i in range(n)]
                between = Churn(snap, jobs, pods, churn)
                # each backend's own caches, so both compute the same changes
                caches = {side: (PairCache(), EncoderCache(get_encoder(spec.encoder)), JobRows())
                          for side in ("local", "remote")}  # fmt: skip
                samples: dict[str, list[float]] = {"features": [], "in-process": [], "triton": [], "step in-process": [],
                                                   "step triton": []}  # fmt: skip
                payload: list[float] = []
                shared: list[float] = []
                for r in range(repeat + 1):
                    cache, encoder, job_rows = caches["local"]
                    t0 = time.perf_counter()
                    inputs = build_inputs(snap, jobs, 0.0, spec, encoder, knn=local.loaded.config.knn, pair_cache=cache,
                                          job_rows=job_rows)  # fmt: skip
                    t1 = time.perf_counter()
                    want = local.policy(inputs)
                    t2 = time.perf_counter()
                    cache, encoder, job_rows = caches["remote"]
                    sent_inputs, got = loop.run_until_complete(caller(timed, snap, jobs, 0.0, spec, encoder,
                                                                      knn=local.loaded.config.knn, pair_cache=cache,
                                                                      job_rows=job_rows))  # fmt: skip
                    t3 = time.perf_counter()
                    assert sent_inputs.pairs is not None and np.array_equal(sent_inputs.pairs, inputs.pairs)
                    if inputs.source is not None:  # the same step with the pair features sent (as before)
                        t4 = time.perf_counter()
                        sent = loop.run_until_complete(remote.policy_async(replace(inputs, source=None)))
                        np.testing.assert_allclose(sent["scores"], want["scores"], atol=1e-4)
                        if r:
                            samples.setdefault("triton, pairs sent", []).append((time.perf_counter() - t4) * 1000.0)
                    # every step: the server's pair features (its own cache, when it computes them) agree
                    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-4)
                    wire = to_wire(sent_inputs)
                    payload.append(got["request_bytes"] + got["answer_bytes"] + got["shared_bytes"])
                    shared.append(got["shared_bytes"])
                    if served is not None:  # the server's own work for this request, on the twin
                        t5 = time.perf_counter()
                        served([{name: value[None] for name, value in wire.items()}])
                        if r:
                            samples.setdefault("server's call", []).append((time.perf_counter() - t5) * 1000.0)
                    between()
                    if r == 0:  # warm-up
                        continue
                    for key, dt in (("features", t1 - t0), ("in-process", t2 - t1), ("triton", timed.last_s),
                                    ("step in-process", t2 - t0), ("step triton", t3 - t2)):  # fmt: skip
                        samples[key].append(dt * 1000.0)
                samples["triton - in-process"] = [a - b for a, b in zip(samples["step triton"], samples["step in-process"],
                                                                        strict=True)]  # fmt: skip
                if "server's call" in samples:
                    samples["triton - server's call"] = [a - b for a, b in zip(samples["triton"], samples["server's call"],
                                                                               strict=True)]  # fmt: skip
                misses = sum(t > deadline_ms for t in samples["triton"])
                for what, values in samples.items():
                    stats = percentiles(values)
                    rows.append({"nodes": n_nodes, "pending": n, "what": what, "p50 ms": stats["p50"],
                                 "p99 ms": stats["p99"], "mean ms": stats["mean"], "n": stats["n"],
                                 "payload MB": float(np.median(payload)) / 1e6 if what == "triton" else None,
                                 "shared MB": float(np.median(shared)) / 1e6 if what == "triton" else None,
                                 f"> {deadline_ms:g} ms": misses if what == "triton" else None})  # fmt: skip
                raw[f"{n_nodes}x{n}"] = samples
                console.print(f"{n_nodes:,} nodes x {n:,} pending: in-process p50 {np.median(samples['in-process']):.1f} ms, "
                              f"triton p50 {np.median(samples['triton']):.1f} ms, "
                              f"{np.median(payload) / 1e6:.2f} MB moved, {np.median(shared) / 1e6:.2f} MB of it in shared memory")  # fmt: skip
    finally:
        caller.close()
        loop.close()
    return rows, raw


class _Timed:
    """A backend whose ``policy_async`` is timed on its own (``last_s``: the call, from sending the
    request to the parsed answer, while the pair features are computed beside it)."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.computes_pairs, self.last_s = backend, backend.computes_pairs, 0.0

    async def encode_async(self, texts: Any) -> Any:  # in the step, not in the call's column
        return await self.backend.encode_async(texts)

    async def policy_async(self, inputs: Any) -> dict[str, Any]:
        t = time.perf_counter()
        try:
            return await self.backend.policy_async(inputs)
        finally:
            self.last_s = time.perf_counter() - t


def run_triton_bench(*, model_dir: Path | None, url: str | None, pending: list[int], nodes: list[int], repeat: int,
                     deadline_ms: float | None, out_dir: Path, command: str, churn: int = 16, burst: int = 0) -> int:  # fmt: skip
    import torch

    from inference.backends import BackendError, InProcessBackend
    from inference.encoders import get_encoder
    from inference.policy import default_model_dir
    from inference.serving.client import DEADLINE_ENV, DEFAULT_DEADLINE_MS, TritonBackend
    from inference.serving.host import ModelHost
    from inference.serving.models import PolicyModel
    from inference.serving.shared_memory import SHM_ENV
    from inference.training.step_latency import frozen_heap
    from ops.reports import Report

    started = time.perf_counter()
    if deadline_ms is None:  # the worker's (TritonBackend's) deadline
        deadline_ms = float(os.environ.get(DEADLINE_ENV) or DEFAULT_DEADLINE_MS)
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
    if not (model_dir / "config.json").is_file():
        console.print(f"[red]no model in {model_dir}: run `semsched train` or pass --model[/red]")
        return 2
    try:
        local = InProcessBackend(model_dir)
    except (OSError, ValueError) as e:  # (found by review: a 90-line traceback)
        console.print(f"[red]no model at {model_dir}: {escape(str(e))}[/red]")
        return 2
    handle = None
    if url is None:
        from inference.serving.process import start_server

        console.print("starting a Triton server (PyTriton's tritonserver) ...")
        t0 = time.perf_counter()
        handle = start_server(model_dir, device="cpu")
        startup_s = time.perf_counter() - t0
        url = handle.url
    try:
        remote = TritonBackend(model_dir, url=url, deadline_ms=60_000)
        snaps, pods = clusters(nodes)
        # the server's work, timed here: only for a server this run started, on the CPU, with this model
        # (one at --url may serve another version or device)
        served = PolicyModel(ModelHost(model_dir, watch_s=3600.0, device="cpu")) if handle is not None else None
        try:
            with frozen_heap():  # as the worker runs (streams/heap.py)
                rows, raw = time_sizes(local, remote, snaps, pods, pending, repeat, deadline_ms, churn, served)
                bursts = _bursts(model_dir, url, snaps, pods, burst, repeat) if burst else []
        except BackendError as e:  # nothing at --url, or not a semsched server
            console.print(f"[red]the Triton server at {url} did not answer: {escape(str(e))}[/red]")
            return 1
        finally:
            lane_off = remote.lane.off
            remote.close()
    finally:
        if handle is not None:
            handle.stop()
    served_text = get_encoder(local.loaded.config.spec.encoder).serve_remotely
    shm_text = (f"off: {lane_off}" if lane_off else "the inputs, and the answer's scores, on this host; "
                f"{SHM_ENV}=off sends everything in the message")  # fmt: skip
    report = Report(out_dir, "bench-triton", "Decision latency per step: Triton (gRPC) beside in-process", command,
                    started=started, console=console)  # fmt: skip
    where = (f"a local Triton server started for the run (tritonserver of nvidia-pytriton {_version('nvidia-pytriton')}, CPU, ready in "
             f"{startup_s:.1f} s) on the same 2 shared cores as the client" if handle is not None else f"the server at {url}")  # fmt: skip
    report.text(f"Model {local.version} ({sum(p.numel() for p in local.loaded.model.parameters()):,} parameters, "
                f"torch {torch.__version__}, {torch.get_num_threads()} thread). Clusters: the 1,213 openb GPU nodes with "
                "~70 % of their GPUs allocated (best-fit on the fill sequence of seed 0), and 5,000 nodes = that node "
                "list with its allocations replicated. N pending openb pods; consecutive steps with "
                f"{churn} placements, {churn} arrivals and {churn} departures between two steps. 'features' = "
                "build_inputs with a pair cache; 'in-process' / 'triton' = the model call alone "
                f"(fusion encoder once + the head over N x nodes) in this process / via {where}, async gRPC "
                "(the request carries the compact node arrays, the server computes the pair features); "
                "'payload' = request + answer bytes, 'shared' = the part of it that went through a shared-memory region "
                f"instead of the gRPC message ({shm_text}); 'step in-process' = features + the call; 'step triton' = "
                "the worker's call: the new job texts embedded by the server's job_encoder if the model's encoder "
                f"is served there ({local.loaded.config.spec.encoder}: {'yes' if served_text else 'no'}), the inputs without the pair features, the request sent, and the client's "
                "own copy of the pair features computed while the answer travels (each side has its own "
                "caches); 'triton - in-process' = the difference of the steps, step by step; "
                "'server's call' = the server's work for the same request (compact arrays unpacked, pair features, "
                "run_policy, answer packed), timed in this process on a twin of the served model (only with a server this run started); 'triton - server's "
                "call' = the rest of the Triton call (serialisation, gRPC, Triton, its hand-over to the model's stub), step by step; "
                "'triton, pairs sent' = the same step sent once more with the pair "
                "features on the wire instead of the compact node arrays (how every request travelled before). "
                f"The last column counts Triton calls slower than the worker's default deadline ({deadline_ms:g} ms), "
                "which would have been decided by the fallback heuristic.")  # fmt: skip
    columns = ["nodes", "pending", "what", "p50 ms", "p99 ms", "mean ms", "n", "payload MB", "shared MB",
               f"> {deadline_ms:g} ms"]  # fmt: skip
    report.table("Per-step latency (ms)", rows, columns)
    if bursts:
        from ops.bench.triton_burst import BURST_COLUMNS, BURST_NOTE

        report.text(BURST_NOTE)
        report.table(f"A burst of {burst:,} pending jobs, one step (ms)", bursts, BURST_COLUMNS)
        report.data("bursts", bursts)
    for n_nodes in nodes:
        series = {}
        for what in ("step in-process", "step triton"):
            pts = [(r["pending"], r["p50 ms"]) for r in rows if r["nodes"] == n_nodes and r["what"] == what]
            series[f"{what} ({n_nodes:,} nodes)"] = ([p for p, _ in pts], [v for _, v in pts])
        report.line_plot(f"triton-p50-{n_nodes}", f"Step latency p50, {n_nodes:,} nodes", "pending jobs", "ms", series)
    report.data("rows", rows)
    report.data("samples", raw)
    report.data("model_version", local.version)
    report.data("url", url)
    report.data("churn", churn)
    report.data("environment", environment())
    for path in report.write():
        console.print(f"wrote {path}")
    return 0


def _bursts(model_dir: Path, url: str, snaps: dict[int, Any], pods: list[Any], burst: int, repeat: int) -> list[dict[str, Any]]:
    """:func:`ops.bench.triton_burst.burst_rows` on the openb cluster, with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ops.bench.triton_burst import burst_rows

    snap = snaps[1213] if 1213 in snaps else clusters([1213])[0][1213]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:  # fmt: skip
        task = bar.add_task(f"a burst of {burst:,} jobs", total=2 * (repeat + 1))
        rows = burst_rows(model_dir, url, snap, pods, burst, repeat, progress=lambda: bar.advance(task))
    for row in rows:
        console.print(f"burst of {burst:,}, step deadline {row['step deadline']}: blocking p50 {row['blocking p50 ms']:.0f} ms, "
                      f"max {row['blocking max ms']:.0f} ms, {row['windows']:.1f} windows, "
                      f"{row['by the fallback']:.0f} of {row['placed']:.0f} placed by the fallback")  # fmt: skip
    return rows


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"
