import pytest

from scheduling.resources import FULL_GPU_MILLI, Resources, format_resources, normalise_per_gpu_milli


def test_normalise_per_gpu_milli():
    assert normalise_per_gpu_milli(0, 500) == 0
    assert normalise_per_gpu_milli(2, 0) == FULL_GPU_MILLI
    assert normalise_per_gpu_milli(1, 460) == 460


def test_resources_vector():
    r = Resources(cpu_milli=6000, memory_mib=12288, num_gpu=1, per_gpu_milli=460)
    assert r.gpu_milli == 460 and r.is_fractional
    whole = Resources(num_gpu=4)
    assert whole.per_gpu_milli == 1000 and whole.gpu_milli == 4000 and not whole.is_fractional
    assert str(r) == "cpu=6000m mem=12288Mi gpu=1x460m"
    assert format_resources(1000, 10) == "cpu=1000m mem=10Mi"


def test_dominant_share():
    cap = Resources(cpu_milli=64_000, memory_mib=262_144, num_gpu=8)
    assert Resources(cpu_milli=32_000, num_gpu=2).dominant_share(cap) == pytest.approx(0.5)
    assert Resources(num_gpu=1, per_gpu_milli=500).dominant_share(cap) == pytest.approx(500 / 8000)


def test_rejects_negative_and_oversized():
    with pytest.raises(ValueError):
        Resources(cpu_milli=-1)
    with pytest.raises(ValueError):
        Resources(num_gpu=1, per_gpu_milli=1001)
