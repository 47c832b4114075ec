from sched_builders import job, node, snap

from scheduling.filters import CapacityFilter, GpuShareFilter


def test_fractional_request_must_fit_one_physical_gpu():
    s = snap(node("two-600", gpus=2, gpu_alloc=(400, 400)), node("one-700", gpus=2, gpu_alloc=(300, 1000)))
    j = job(gpus=1, share=700)
    assert CapacityFilter().mask(j, s).tolist() == [True, True]  # 1200 free in aggregate
    assert GpuShareFilter().mask(j, s).tolist() == [False, True]
    assert GpuShareFilter().reason(j) == "no single GPU with 700m free"


def test_whole_gpus_need_fully_free_gpus():
    s = snap(node("a", gpus=4, gpu_alloc=(100, 100, 0, 0)), node("b", gpus=4, gpu_alloc=(0, 0, 0, 100)))
    j = job(gpus=3)
    assert GpuShareFilter().mask(j, s).tolist() == [False, True]
    assert GpuShareFilter().reason(j) == "fewer than 3 fully free GPU(s)"


def test_cpu_only_passes_everything():
    s = snap(node("a"), node("b", gpus=1, gpu_alloc=(1000,)))
    assert GpuShareFilter().mask(job(), s).all()


def test_share_mask_follows_reservations():
    s = snap(node("a", gpus=1))
    j = job(gpus=1, share=600)
    s.reserve(0, j, (0,))
    assert GpuShareFilter().mask(j, s).tolist() == [False]
    assert GpuShareFilter().mask(job(gpus=1, share=400), s).tolist() == [True]
    s.free(0, j, (0,))
    assert GpuShareFilter().mask(job(gpus=1), s).tolist() == [True]
