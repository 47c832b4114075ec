"""Where a job shape fits: the health, capacity, GPU-share and GPU-model filters' verdict,
vectorised over shapes, so it holds every node the default filter chain accepts."""

from __future__ import annotations

import numpy as np
from inference_helpers import job, pod_mix, small_snapshot

from inference.features.fits import shape_fits
from inference.features.spec import FeatureSpec
from inference.model.step import step_shapes
from scheduling.filters.capacity import CapacityFilter
from scheduling.filters.framework import run_filters
from scheduling.filters.gpu_model import GpuModelFilter
from scheduling.filters.gpu_share import GpuShareFilter
from scheduling.filters.health import HealthFilter
from scheduling.gpu_select import select_gpus
from scheduling.metrics.fragmentation import Workload

LEAN = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16")
FRAG = FeatureSpec(gpu_models=("A10", "T4"), text_dim=16, encoder="hashed-ngram-16", cluster=True,
                   workload=FeatureSpec.workload_rows(Workload.from_jobs(pod_mix(200, seed=3))))  # fmt: skip
RESOURCES = (HealthFilter(), CapacityFilter(), GpuShareFilter())


def test_shape_fits_is_the_resource_filters_verdict_on_busy_states():
    rng = np.random.default_rng(0)
    snap = small_snapshot()
    pool = [*pod_mix(80, seed=1), job("m", gpus=1, per=1000, gpu_models=frozenset({"T4"})),
            job("w", gpus=2, per=1000), job("c", gpus=0, cpu=2000)]  # fmt: skip
    checked = 0
    for _ in range(12):  # fill the cluster step by step, with a node now and then unhealthy
        for p in rng.choice(len(pool), size=6, replace=False):
            pod = pool[int(p)]
            feasible = run_filters(pod, snap, explain=False).feasible_mask
            if feasible.any():
                i = int(rng.choice(np.flatnonzero(feasible)))
                snap.reserve(i, pod, select_gpus(snap, i, pod))
        snap.healthy[:] = rng.random(snap.num_nodes) > 0.15
        for spec in (LEAN, FRAG):
            shapes, which = step_shapes(pool, spec)
            fits = shape_fits(shapes, snap, spec)
            for shape, row in zip(shapes, fits, strict=True):
                want = np.logical_and.reduce([f.mask(shape, snap) for f in RESOURCES])
                if spec.workload:  # the pair rows tell GPU models apart: the model filter counts
                    want &= GpuModelFilter().mask(shape, snap)
                np.testing.assert_array_equal(row, want)
            for pod, s in zip(pool, which, strict=True):  # every node the default chain accepts fits
                feasible = run_filters(pod, snap, explain=False).feasible_mask
                assert not (feasible & ~fits[s]).any()
                checked += int(feasible.sum())
            assert fits.any() and not fits.all()
    assert checked > 100
