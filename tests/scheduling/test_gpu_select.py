from sched_builders import job, node, snap

from scheduling.gpu_select import select_gpus


def test_fractional_picks_least_free_gpu_that_fits():
    s = snap(node("a", gpus=4, gpu_alloc=(0, 500, 200, 600)))  # free 1000, 500, 800, 400
    assert select_gpus(s, 0, job(gpus=1, share=450)) == (1,)  # 500 is the tightest fit
    assert select_gpus(s, 0, job(gpus=1, share=400)) == (3,)
    assert select_gpus(s, 0, job(gpus=1, share=900)) == (0,)


def test_fractional_ties_go_to_lowest_index():
    s = snap(node("a", gpus=3, gpu_alloc=(500, 0, 500)))
    assert select_gpus(s, 0, job(gpus=1, share=300)) == (0,)


def test_whole_gpus_take_fully_free_lowest_indices():
    s = snap(node("a", gpus=4, gpu_alloc=(100, 0, 0, 0)))
    assert select_gpus(s, 0, job(gpus=2)) == (1, 2)
    assert select_gpus(s, 0, job(gpus=3)) == (1, 2, 3)
    assert select_gpus(s, 0, job(gpus=4)) is None


def test_no_gpu_job_and_no_fit():
    s = snap(node("a", gpus=2, gpu_alloc=(400, 400)))
    assert select_gpus(s, 0, job(gpus=0)) == ()
    assert select_gpus(s, 0, job(gpus=1, share=700)) is None  # 2 x 600 free cannot hold 700
