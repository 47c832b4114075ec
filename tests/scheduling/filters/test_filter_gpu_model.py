from sched_builders import job, node, snap

from scheduling.filters import GpuModelFilter


def test_allowed_models_only():
    s = snap(node("a", gpus=1, model="A10"), node("b", gpus=1, model="T4"), node("c"))
    f = GpuModelFilter()
    j = job(gpus=1, gpu_models=frozenset({"A10"}))
    assert f.mask(j, s).tolist() == [True, False, False]
    assert f.reason(j) == "GPU model not in [A10]"
    two = job(gpus=1, gpu_models=frozenset({"T4", "A10"}))
    assert f.mask(two, s).tolist() == [True, True, False]
    assert f.reason(two) == "GPU model not in [A10, T4]"


def test_empty_set_or_no_gpu_means_any_node():
    s = snap(node("a", gpus=1, model="A10"), node("c"))
    f = GpuModelFilter()
    assert f.mask(job(gpus=1), s).all()
    assert f.mask(job(gpus=0, gpu_models=frozenset({"A10"})), s).all()
