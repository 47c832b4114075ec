from __future__ import annotations

import json

import pytest
import torch

import inference.dag  # noqa: F401 - registers the schedulers
from inference.dag.features import PROC_DIM, TASK_DIM
from inference.dag.model import DagModelError, DagPolicyNet, NetConfig, load_model, save_model
from inference.dag.policy import MODEL_ENV, LearnedDagScheduler, schedule_with
from scheduling.dag import check_schedule
from scheduling.dag.schedulers import available_dag_schedulers, get_dag_scheduler


def test_schedules_are_valid_greedy_and_sampled(small_dags, topcuoglu):
    net = DagPolicyNet(NetConfig(hidden=16))
    gen = torch.Generator().manual_seed(3)
    for problem in [*small_dags, topcuoglu]:
        for schedule in (schedule_with(net, problem), schedule_with(net, problem, generator=gen)):
            assert check_schedule(problem, schedule) == []


def test_masked_tasks_and_processors_are_never_chosen():
    net = DagPolicyNet(NetConfig(hidden=8))
    x = torch.zeros(2, 5, TASK_DIM)
    x[:, 3:] = 9.0  # the padded rows look very different; the mask must still exclude them
    mask = torch.tensor([[True, True, True, False, False], [True, False, False, False, False]])
    logits, _ = net.task_logits(x, mask)
    assert torch.isinf(logits[~mask]).all() and torch.isfinite(logits[mask]).all()
    probs = torch.softmax(logits, dim=-1)
    assert torch.all(probs[~mask] == 0)
    draws = torch.multinomial(probs, 200, replacement=True, generator=torch.Generator().manual_seed(0))
    assert draws[0].max() <= 2 and torch.all(draws[1] == 0)
    pmask = torch.tensor([[True, False, True], [False, False, True]])
    plogits = net.proc_logits(torch.randn(2, 3, PROC_DIM), torch.randn(2, 8), pmask)
    assert torch.isinf(plogits[~pmask]).all() and torch.argmax(plogits[1]) == 2


def test_save_load_round_trip(tmp_path, small_dags):
    net = DagPolicyNet(NetConfig(hidden=12))
    save_model(net, tmp_path / "v001", {"note": "test"})
    back = load_model(tmp_path / "v001")
    assert back.config == net.config
    x, mask = torch.randn(1, 4, TASK_DIM), torch.ones(1, 4, dtype=torch.bool)
    torch.testing.assert_close(back.task_logits(x, mask)[0], net.task_logits(x, mask)[0])
    assert schedule_with(back, small_dags[0]).makespan == schedule_with(net, small_dags[0]).makespan


def test_learned_scheduler_loads_from_the_env_var(tmp_path, monkeypatch, small_dags):
    net = DagPolicyNet(NetConfig(hidden=12))
    save_model(net, tmp_path / "m")
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "m"))
    assert "learned" in available_dag_schedulers() and "learned-sample" in available_dag_schedulers()
    scheduler = get_dag_scheduler("learned")
    assert scheduler.fallback is None and scheduler.model_dir == tmp_path / "m"
    assert scheduler.schedule(small_dags[1]).makespan == schedule_with(net, small_dags[1]).makespan
    best = get_dag_scheduler("learned-sample", samples=4).schedule(small_dags[1])
    assert check_schedule(small_dags[1], best) == [] and best.makespan <= schedule_with(net, small_dags[1]).makespan


def test_without_a_model_it_falls_back_to_heft_and_says_so(tmp_path, small_dags):
    with pytest.warns(RuntimeWarning, match="HEFT"):
        scheduler = LearnedDagScheduler(tmp_path / "missing")
    assert scheduler.net is None and "missing" in scheduler.fallback
    heft = get_dag_scheduler("heft")
    for problem in small_dags:
        assert scheduler.schedule(problem).makespan == heft.schedule(problem).makespan
    with pytest.raises(FileNotFoundError, match="no DAG policy model"):
        LearnedDagScheduler(tmp_path / "missing", strict=True)


def _widened(tmp_path):
    """A model directory whose config says another width than its weights have."""
    save_model(DagPolicyNet(NetConfig(hidden=8)), tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["net"]["hidden"] = 16
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    return tmp_path / "m"


@pytest.mark.parametrize("damage", ["width", "config", "weights"])
def test_a_model_that_does_not_load_is_one_line_and_a_fallback(tmp_path, small_dags, damage):
    """Weights of another width, an unreadable config, or weights that are not a state dict: one
    line naming the directory (it was a torch/JSON traceback), and HEFT with a warning."""
    directory = _widened(tmp_path)
    if damage == "config":
        (directory / "config.json").write_text("{")
    elif damage == "weights":
        (directory / "policy.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(DagModelError, match=f"the DAG model in {directory} does not load") as e:
        load_model(directory)
    assert "\n" not in str(e.value)
    if damage == "width":
        assert "size mismatch" in str(e.value) and "more)" in str(e.value)
    with pytest.warns(RuntimeWarning, match="does not load"):
        scheduler = LearnedDagScheduler(directory)
    assert scheduler.schedule(small_dags[0]).makespan == get_dag_scheduler("heft").schedule(small_dags[0]).makespan
    with pytest.raises(DagModelError):
        LearnedDagScheduler(directory, strict=True)


def test_evaluate_problems_reports_every_scheduler_on_every_problem(tmp_path, small_dags):
    from inference.dag.evaluate import evaluate_problems

    save_model(DagPolicyNet(NetConfig(hidden=8)), tmp_path / "m")
    result = evaluate_problems("small", small_dags[:2], ("heft", "learned"), tmp_path / "m", show=False)
    for name in ("heft", "learned"):
        assert all(len(v) == 2 for v in result.metrics[name].values())
        assert result.mean(name, "slr") >= 1.0


def test_evaluate_problems_refuses_a_learned_scheduler_without_its_model(tmp_path, small_dags):
    """Found by review: it reported HEFT's numbers under the name "learned" (only a RuntimeWarning said so)."""
    from inference.dag.evaluate import evaluate_problems

    with pytest.raises(ValueError, match="learned would fall back"):
        evaluate_problems("small", small_dags[:1], ("heft", "learned"), tmp_path / "nothing", show=False)


def test_a_recorded_log_prob_is_of_the_distribution_sampled_from():
    """Found by review: sampling used softmax(logits / T) but the recorded log π was log_softmax(logits):
    a policy gradient with T != 1 would have used the wrong probabilities."""
    from inference.dag.policy import NetPolicy

    policy = NetPolicy(DagPolicyNet(NetConfig(hidden=8)), None, generator=torch.Generator().manual_seed(0),  # type: ignore[arg-type]
                       record=True, temperature=2.5)  # fmt: skip
    logits = torch.tensor([0.5, 2.0, -1.0])
    choice = policy._choose(logits)
    assert float(policy.log_probs[-1]) == pytest.approx(float(torch.log_softmax(logits / 2.5, dim=-1)[choice]))
