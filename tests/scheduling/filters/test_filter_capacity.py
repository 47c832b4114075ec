from sched_builders import job, node, snap

from scheduling.filters import CapacityFilter


def test_cpu_memory_and_aggregate_gpu():
    s = snap(node("small-cpu", cpu=1000, gpus=2),
             node("small-mem", mem=512, gpus=2),
             node("one-gpu", gpus=1),
             node("gpu-busy", gpus=2, gpu_alloc=(1000, 600)),  # 400 free in total
             node("ok", gpus=2))  # fmt: skip
    f = CapacityFilter()
    j = job(cpu=2000, mem=1024, gpus=2)
    assert f.mask(j, s).tolist() == [False, False, False, False, True]
    frac = job(cpu=2000, mem=1024, gpus=1, share=500)
    assert f.mask(frac, s).tolist() == [False, False, True, False, True]


def test_explain_charges_first_short_resource_gpu_cpu_memory():
    s = snap(node("a", cpu=1000, gpus=0), node("b", cpu=1000, gpus=4), node("c", mem=10, gpus=4), node("d", gpus=4))
    f = CapacityFilter()
    j = job(cpu=2000, mem=1024, gpus=1)
    rejected = ~f.mask(j, s)
    assert rejected.tolist() == [True, True, True, False]
    assert f.explain(j, s, rejected) == [("insufficient GPU", 1), ("insufficient cpu", 1), ("insufficient memory", 1)]
