import dataclasses

import numpy as np
import pytest
from sched_builders import Ticking, job, node, snap

from scheduling.assign import schedule_step, top_candidates
from scheduling.policies import get_policy

FF = get_policy("fifo-first-fit")
BF = get_policy("best-fit")


def _placed(result) -> dict[str, str]:
    return {p.job_id: p.node_id for p in result.placements}


def test_first_fit_takes_first_feasible_node():
    s = snap(node("a", gpus=1, gpu_alloc=(1000,)), node("b", gpus=8), node("c", gpus=2))
    r = schedule_step(s, [job("x", gpus=1)], FF, now=0)
    (p,) = r.placements
    assert (p.node_id, p.node_index, p.gpu_indices, p.feasible_nodes) == ("b", 1, (0,), 2)
    assert p.reason.startswith("fifo-first-fit: highest score") and "of 2 feasible node(s)" in p.reason
    assert r.unschedulable == [] and r.compute_ms > 0


def test_best_fit_takes_tightest_node_and_reports_candidates():
    s = snap(node("a", gpus=1, gpu_alloc=(1000,)), node("b", gpus=8), node("c", gpus=2), node("d", gpus=4))
    r = schedule_step(s, [job("x", gpus=1)], BF, now=0, top_k=2)
    (p,) = r.placements
    assert p.node_id == "c"
    assert [c[0] for c in p.candidates] == ["c", "d"]
    assert p.candidates[0][1] == p.score > p.candidates[1][1]


def test_conflict_free_within_a_step():
    # each job fits node a alone (8 cpu cores), not both; b is the only other choice
    s = snap(node("a", cpu=8000), node("b", cpu=8000))
    r = schedule_step(s, [job("x", cpu=6000, submit_time=1), job("y", cpu=6000, submit_time=2)], FF, now=0)
    assert _placed(r) == {"x": "a", "y": "b"}
    r = schedule_step(snap(node("a", cpu=8000)), [job("x", cpu=6000), job("y", cpu=6000, submit_time=1)], FF, now=0)
    assert _placed(r) == {"x": "a"}
    (u,) = r.unschedulable
    assert u.job_id == "y" and not u.permanent
    assert u.reason == "0/1 nodes are available: 1 insufficient cpu."


def test_fractional_gpus_share_one_gpu_best_fit():
    s = snap(node("a", gpus=2))
    jobs = [job(f"f{i}", cpu=0, mem=0, gpus=1, share=share, submit_time=i) for i, share in enumerate([500, 300, 600])]
    r = schedule_step(s, jobs, BF, now=0)
    assert [p.gpu_indices for p in r.placements] == [(0,), (0,), (1,)]


def test_input_snapshot_is_not_modified():
    s = snap(node("a", gpus=2))
    before = s.gpu_free.copy()
    schedule_step(s, [job("x", gpus=2)], FF, now=0)
    assert np.array_equal(s.gpu_free, before)


def test_max_instances_per_node_spreads_replicas():
    s = snap(node("a"), node("b"), node("c"))
    reps = [job(f"r{i}", app="web", max_instances_per_node=1, submit_time=i) for i in range(4)]
    r = schedule_step(s, reps, FF, now=0)
    assert _placed(r) == {"r0": "a", "r1": "b", "r2": "c"}
    (u,) = r.unschedulable
    assert u.job_id == "r3" and not u.permanent
    assert "3 node(s) already run 1 instance(s) of app web" in u.reason


def test_gang_all_or_nothing_rolls_back():
    s = snap(node("a", gpus=4), node("b", gpus=4, gpu_alloc=(1000, 1000, 0, 0)))  # the gang fits when b frees up
    gang = [job(f"g{i}", gpus=4, gang_id="g", gang_size=2, submit_time=0) for i in range(2)]
    later = job("small", gpus=2, submit_time=1)
    r = schedule_step(s, [*gang, later], FF, now=0)
    # g0 fits a, g1 fits nowhere → g0's reservation rolled back, so "small" takes a (index order)
    assert _placed(r) == {"small": "a"}
    assert {u.job_id for u in r.unschedulable} == {"g0", "g1"}
    assert all("gang g: member g1 cannot be placed" in u.reason for u in r.unschedulable)
    assert not any(u.permanent for u in r.unschedulable)


def test_gang_places_all_members():
    s = snap(node("a", gpus=4), node("b", gpus=4))
    gang = [job(f"g{i}", gpus=4, gang_id="g", gang_size=2) for i in range(2)]
    r = schedule_step(s, gang, FF, now=0)
    assert _placed(r) == {"g0": "a", "g1": "b"}
    assert all("(gang g, member" in p.reason for p in r.placements)


@pytest.mark.parametrize("policy", ["fgd", "fifo-first-fit", "least-allocated", "best-fit"])
def test_a_gang_that_fits_an_idle_cluster_is_placed_whatever_its_members_order(policy):
    """Found by review: members went in the step's order only, the 1-GPU launcher took the 4-GPU node and
    the worker fit nowhere: rolled back and tried the same way at every step, the gang never ran."""
    s = snap(node("n4", gpus=4), node("n2", gpus=2))
    gang = [job("launcher", gpus=1, gang_id="g", gang_size=2, submit_time=0),
            job("worker", gpus=4, gang_id="g", gang_size=2, submit_time=1)]  # fmt: skip
    r = schedule_step(s, gang, get_policy(policy), now=0)
    assert _placed(r) == {"launcher": "n2", "worker": "n4"} and r.unschedulable == []
    assert [p.reason.endswith(f"(gang g, member {i}/2)") for i, p in enumerate(r.placements, start=1)] == [True, True]


@pytest.mark.parametrize("policy", ["best-fit", "fgd", "least-allocated", "fifo-first-fit"])
def test_a_gang_whose_member_can_use_one_node_only_is_placed_whatever_its_peers_take(policy):
    """Found by review: m1 (1 GPU, any model) took the one A10 node its A10-only peer m2 needed; largest first
    is the same order, so the gang failed at every step though it fits the idle cluster."""
    s = snap(node("a10", gpus=1, model="A10"), node("t4", gpus=1, model="T4"))
    gang = [job("m1", gpus=1, gang_id="g", gang_size=2, submit_time=0),
            job("m2", gpus=1, gpu_models=("A10",), gang_id="g", gang_size=2, submit_time=0)]  # fmt: skip
    r = schedule_step(s, gang, get_policy(policy), now=0)
    assert _placed(r) == {"m1": "t4", "m2": "a10"} and r.unschedulable == []


def test_a_gang_that_fits_in_no_order_says_how_many_members_were_placed_before_the_one_that_did_not():
    s = snap(node("a", gpus=4, gpu_alloc=(1000, 1000, 0, 0)), node("b", gpus=2))  # g1 fits once a frees up
    gang = [job("g0", gpus=1, gang_id="g", gang_size=2, submit_time=0), job("g1", gpus=4, gang_id="g", gang_size=2)]
    r = schedule_step(s, gang, FF, now=0)
    assert r.placements == [] and all(not u.permanent for u in r.unschedulable)
    assert "gang g: member g1 cannot be placed (with 1 of its members placed first): " in r.unschedulable[0].reason


def test_a_gang_with_a_member_that_never_fits_is_refused_for_good_though_another_waits_first():
    """s has no room now, L (8 GPUs) fits no node of 4 ever: the largest-first try finds that, and it is the
    reason (found by review of the retry: s's passing shortage was reported, and the gang waited)."""
    s = snap(node("a", gpus=4, gpu_alloc=(1000,) * 4), node("b", gpus=4, gpu_alloc=(1000,) * 4),
             node("c", gpus=4, gpu_alloc=(1000, 1000, 1000, 0)))  # fmt: skip
    gang = [job("s", gpus=2, gang_id="g", gang_size=2, submit_time=0), job("L", gpus=8, gang_id="g", gang_size=2, submit_time=1)]
    r = schedule_step(s, gang, FF, now=0)
    assert [u.permanent for u in r.unschedulable] == [True, True]
    assert r.unschedulable[0].reason.startswith("gang g: member L cannot be placed")


def test_incomplete_gang_waits():
    s = snap(node("a", gpus=8))
    r = schedule_step(s, [job("g0", gpus=1, gang_id="g", gang_size=3), job("g1", gpus=1, gang_id="g", gang_size=3)],
                      FF, now=0)  # fmt: skip
    assert r.placements == []
    assert [(u.job_id, u.permanent) for u in r.unschedulable] == [("g0", False), ("g1", False)]
    assert "waiting for 1 more member(s) (2/3 pending)" in r.unschedulable[0].reason


def test_gang_that_can_never_fit_is_permanent():
    s = snap(node("a", gpus=2))
    gang = [job(f"g{i}", gpus=4, gang_id="g", gang_size=2) for i in range(2)]
    r = schedule_step(s, gang, FF, now=0)
    assert [u.permanent for u in r.unschedulable] == [True, True]


def test_a_gang_whose_members_of_one_shape_never_fit_is_permanent_beside_a_member_of_another():
    """Found by review: a T4 member's node joined the pooled total, and the two A100 members that one
    1-GPU A100 node can never hold together waited for ever (alone, the same pair was refused)."""
    s = snap(node("a100", gpus=1, model="A100"), node("t4", gpus=8, model="T4"))
    gang = [job(f"a{i}", gpus=1, gang_id="g", gang_size=3, gpu_models=frozenset({"A100"}), submit_time=i)
            for i in range(2)] + [job("t", gpus=1, gang_id="g", gang_size=3, gpu_models=frozenset({"T4"}), submit_time=2)]
    r = schedule_step(s, gang, BF, now=0)
    assert [u.permanent for u in r.unschedulable] == [True, True, True]
    assert r.unschedulable[0].reason == ("gang g never fits this cluster: its 2 members of one shape need 2 whole GPUs "
                                         "against 1 on the 1 node(s) they could use, even when empty")  # fmt: skip


def test_a_gang_with_more_members_of_an_app_than_its_instance_limit_allows_is_permanent():
    """Found by review: three members of an app limited to one per node, on two nodes, waited for ever, told
    that the nodes already ran an instance (their own rolled-back members)."""
    s = snap(node("a", gpus=2), node("b", gpus=2))
    gang = [job(f"w{i}", gpus=1, app="trainer", max_instances_per_node=1, gang_id="g", gang_size=3, submit_time=i)
            for i in range(3)]  # fmt: skip
    r = schedule_step(s, gang, BF, now=0)
    assert [u.permanent for u in r.unschedulable] == [True, True, True]
    assert r.unschedulable[0].reason == ("gang g never fits this cluster: its 3 members of app trainer may run at most "
                                         "2 at once on the 2 node(s) they could use (max_instances_per_node)")  # fmt: skip
    two = schedule_step(snap(node("a", gpus=2), node("b", gpus=2)),
                        [dataclasses.replace(j, gang_size=2) for j in gang[:2]], BF, now=0)  # fmt: skip
    assert len(two.placements) == 2  # (two of them fit: the limit is not a false refusal)


def test_a_gang_larger_than_the_cluster_is_permanent_though_each_member_fits():
    """Each member fits an empty node, the gang together never does (found by the scheduling review:
    it waited for ever, while a single job of its size was rejected)."""
    gang = [job(f"g{i}", gpus=8, gang_id="g", gang_size=3, gpu_models=frozenset({"A100"})) for i in range(3)]
    s = snap(node("a", gpus=8, model="A100"), node("b", gpus=8, model="A100"), node("t4", gpus=8, model="T4"))
    r = schedule_step(s, gang, FF, now=0)
    assert [u.permanent for u in r.unschedulable] == [True, True, True]
    assert r.unschedulable[0].reason == ("gang g never fits this cluster: its 3 members together need 24 whole GPUs "
                                         "against 16 on the 2 node(s) they could use, even when empty")  # fmt: skip
    other = [dataclasses.replace(j, job_id=f"o{i}", gang_id="other") for i, j in enumerate(gang)]
    again = schedule_step(s, other, FF, now=0)  # the same shapes: its own name (found by review: the first's)
    assert again.unschedulable[0].reason.startswith("gang other never fits this cluster: its 3 members")
    two = schedule_step(s, gang[:2], FF, now=0)  # (gang_size 3: waiting for the third)
    assert not any(u.permanent for u in two.unschedulable)
    busy = snap(node("a", gpus=8, model="A100", gpu_alloc=(1000,) * 8), node("b", gpus=8, model="A100"))
    fits_later = [job(f"h{i}", gpus=8, gang_id="h", gang_size=2) for i in range(2)]
    r = schedule_step(busy, fits_later, FF, now=0)  # 16 GPUs: only busy now
    assert [u.permanent for u in r.unschedulable] == [False, False]


def test_a_gang_whose_members_differ_in_optional_fields_is_judged_not_crashed():
    """The never-fits check keyed a gang by its members' sorted shapes, and a shape holding None
    (no app) beside one holding a value cannot be sorted: every step of the cluster raised (found by
    the review of the change)."""
    s = snap(node("a", gpus=2))
    gang = [job("m0", gpus=2, gang_id="g", gang_size=2, app="web", max_instances_per_node=1),
            job("m1", gpus=2, gang_id="g", gang_size=2)]  # fmt: skip
    r = schedule_step(s, [*gang, job("solo", cpu=500)], FF, now=0)
    assert _placed(r) == {"solo": "a"}
    assert [u.permanent for u in r.unschedulable] == [True, True]  # 4 whole GPUs against 2


def test_a_member_giving_another_gang_size_is_one_of_the_gang():
    """A job with the gang's id and ``gang_size`` 1 was placed alone, its gang left waiting for it for ever
    (found by the scheduling review): the disagreement is said, and permanent."""
    s = snap(node("a", gpus=8))
    gang = [job("m0", gpus=1, gang_id="g", gang_size=1), *(job(f"m{i}", gpus=1, gang_id="g", gang_size=3)
                                                          for i in (1, 2))]  # fmt: skip
    r = schedule_step(s, gang, FF, now=0)
    assert r.placements == []
    assert [(u.job_id, u.permanent) for u in r.unschedulable] == [("m0", True), ("m1", True), ("m2", True)]
    assert "members disagree on gang_size ([1, 3])" in r.unschedulable[0].reason
    alone = schedule_step(s, [job("solo", gpus=1, gang_id="s", gang_size=1)], FF, now=0)  # a gang of one: a job
    assert _placed(alone) == {"solo": "a"}


def test_a_custom_filter_decides_each_job_not_the_first_of_its_shape():
    """The step's 'no node fits this shape' shortcut holds for the default filters only: a custom filter
    may read more of the job (found by the scheduling review: a gold job got the bronze one's
    permanent rejection)."""
    from scheduling.filters import DEFAULT_FILTERS
    from scheduling.filters.base import BaseFilter

    class GoldOnly(BaseFilter):
        name = "gold-only"

        def mask(self, job, snapshot):  # type: ignore[no-untyped-def]
            return np.full(snapshot.num_nodes, job.tenant == "gold")

        def reason(self, job):  # type: ignore[no-untyped-def]
            return f"tenant {job.tenant} not allowed"

    s = snap(node("a"))
    jobs = [job("bronze", tenant="bronze", submit_time=0), job("gold", tenant="gold", submit_time=1)]
    r = schedule_step(s, jobs, FF, now=0, filters=(*DEFAULT_FILTERS, GoldOnly()))
    assert _placed(r) == {"gold": "a"} and [u.job_id for u in r.unschedulable] == ["bronze"]


def test_never_fits_is_permanent_with_reason():
    s = snap(node("a", gpus=2, model="T4"), node("b", gpus=2, model="T4"))
    r = schedule_step(s, [job("x", gpus=1, gpu_models=frozenset({"A10"})), job("y", gpus=4)], FF, now=0)
    reasons = {u.job_id: u for u in r.unschedulable}
    assert reasons["x"].permanent and "2 GPU model not in [A10]" in reasons["x"].reason
    assert reasons["y"].permanent and "2 insufficient GPU" in reasons["y"].reason


def test_max_placements_defers_the_rest_in_order():
    s = snap(node("a"), node("b"), node("c"))
    jobs = [job(f"j{i}", submit_time=i) for i in range(5)]
    r = schedule_step(s, jobs, FF, now=0, max_placements=2)
    assert [p.job_id for p in r.placements] == ["j0", "j1"]
    assert r.deferred == ["j2", "j3", "j4"]


def test_a_step_past_its_hold_defers_the_rest_in_order_and_never_splits_a_gang(monkeypatch):
    """A worker's step runs on its event loop: past ``hold_s`` the jobs not considered yet wait for the next
    step (found by ``semsched bench triton --burst``: 2,000 placements held the loop ~2.7 s)."""
    import scheduling.assign as assign

    s = snap(*[node(f"n{i}", gpus=8) for i in range(4)])
    jobs = [job(f"j{i}", gpus=1, submit_time=i) for i in range(3)]
    jobs += [job(f"g{i}", gpus=1, submit_time=3, gang_id="g", gang_size=2) for i in range(2)]
    jobs += [job(f"k{i}", gpus=1, submit_time=4 + i) for i in range(2)]
    monkeypatch.setattr(assign, "_now", Ticking())  # the step starts at 0; looks at 0.1, 0.2, 0.3 ...
    r = schedule_step(s, jobs, BF, now=10, hold_s=0.25)
    assert [p.job_id for p in r.placements] == ["j0", "j1", "j2"]  # looked at 0.1 and 0.2 before j1 and j2
    assert r.deferred == ["g0", "g1", "k0", "k1"]  # the gang whole, then the rest
    monkeypatch.setattr(assign, "_now", Ticking())
    r = schedule_step(s, jobs[3:], BF, now=10, hold_s=0.05)  # a gang first: placed whole, whatever the hold
    assert [p.job_id for p in r.placements] == ["g0", "g1"] and r.deferred == ["k0", "k1"]
    monkeypatch.setattr(assign, "_now", Ticking())
    r = schedule_step(s, jobs, BF, now=10, hold_s=0.0)  # at least one job is considered
    assert [p.job_id for p in r.placements] == ["j0"] and len(r.deferred) == 6
    assert len(schedule_step(s, jobs, BF, now=10).placements) == 7  # no hold: all of them


def test_a_costly_head_that_does_not_fit_does_not_count_against_the_hold(monkeypatch):
    """Found by review: the hold counted the whole step, so a head of the queue that fits nowhere and costs more
    than the hold to decide (a large gang, say) cut every step at the same point: it stays pending and is
    decided again each step, and the jobs that fit behind it were deferred for ever. Only placements count."""
    import scheduling.assign as assign

    clock = Ticking()

    class SlowForGangs(type(BF)):  # deciding each gang member costs 10 s of the step's clock
        def score(self, job, snapshot, feasible):  # noqa: ANN001, ANN202
            if job.gang_id:
                clock.t += 10.0
            return super().score(job, snapshot, feasible)

    s = snap(node("a", gpus=8), node("b", gpus=8))
    head = [job(f"g{i}", gpus=8, submit_time=0, gang_id="g", gang_size=3) for i in range(3)]  # 2 of 3 fit: rolled back
    small = [job(f"s{i}", gpus=1, submit_time=1 + i) for i in range(3)]
    monkeypatch.setattr(assign, "_now", clock)
    r = schedule_step(s, head + small, SlowForGangs(), now=10, hold_s=0.15)
    assert {u.job_id for u in r.unschedulable} == {"g0", "g1", "g2"}
    assert [p.job_id for p in r.placements] == ["s0", "s1"] and r.deferred == ["s2"]  # 0.1 s a placement


def test_order_respected_when_capacity_is_scarce():
    s = snap(node("a", gpus=1))
    r = schedule_step(s, [job("late", gpus=1, submit_time=5), job("early", gpus=1, submit_time=1)], BF, now=10)
    assert _placed(r) == {"early": "a"}


def test_deterministic_and_duplicate_ids_ignored():
    s = snap(*[node(f"n{i}", gpus=2) for i in range(5)])
    unique = [job(f"j{i}", gpus=1, share=250 * (1 + i % 4), submit_time=i % 3) for i in range(7)]
    jobs = unique + unique[:5]  # the same submissions seen twice
    a = schedule_step(s, jobs, BF, now=0)
    b = schedule_step(s, list(reversed(jobs)), BF, now=0)
    assert len(a.placements) == 7
    assert [(p.job_id, p.node_id, p.gpu_indices) for p in a.placements] == \
        [(p.job_id, p.node_id, p.gpu_indices) for p in b.placements]  # fmt: skip


def test_top_candidates_ties_lowest_index_and_excludes_vetoed():
    masked = np.array([0.5, 0.9, 0.5, -np.inf, 0.9])
    ids = np.array(["a", "b", "c", "d", "e"], dtype=object)
    assert top_candidates(masked, ids, 3) == [("b", 0.9), ("e", 0.9), ("a", 0.5)]
    assert top_candidates(masked, ids, 10) == [("b", 0.9), ("e", 0.9), ("a", 0.5), ("c", 0.5)]
    assert masked.tolist()[1] == 0.9  # caller's array restored


def test_top_candidates_carry_no_score_json_cannot_hold():
    """Found by review: a ``+inf`` score went into the decision record, which JSON writes as null: every reader
    refused the record, and the placement was missing from the archive."""
    from scheduling.events import Candidate, DecisionRecord, decode

    masked = np.array([np.nan, np.inf, 0.5, -np.inf])
    ids = np.array(["a", "b", "c", "d"], dtype=object)
    top = top_candidates(masked, ids, 3)
    assert top == [("b", float(np.finfo(np.float64).max)), ("c", 0.5)]
    assert np.isnan(masked[0]) and masked[1] == np.inf  # caller's array restored
    rec = DecisionRecord(decision_id="d", job_id="j", outcome="placed", node_id="b", policy="p", latency_ms=0.0,
                         candidates=[Candidate(node_id=n, score=v) for n, v in top])  # fmt: skip
    assert decode("decisions", rec.to_bytes()) == rec


def test_same_shape_is_not_filtered_twice_but_gets_the_same_reason():
    s = snap(node("a", cpu=8000))
    jobs = [job("big1", cpu=9000), job("small", cpu=1000, submit_time=1), job("big2", cpu=9000, submit_time=2)]
    r = schedule_step(s, jobs, FF, now=0)
    assert r.order == ["big1", "small", "big2"]
    assert [p.job_id for p in r.placements] == ["small"]
    big1, big2 = r.unschedulable
    assert (big1.job_id, big2.job_id) == ("big1", "big2")
    assert big1.reason == big2.reason and "cpu" in big1.reason.lower()
    assert big1.permanent and big2.permanent and big2.filtered_out


def test_an_unschedulable_outcome_repeated_for_another_job_keeps_every_field() -> None:
    """for_job copies field by hand (dataclasses.replace is slow): a field added later and not
    copied fails here."""
    import dataclasses

    from scheduling.step_result import Unschedulable

    values = {"job_id": "a", "reason": "r", "permanent": True, "filtered_out": True}
    assert [f.name for f in dataclasses.fields(Unschedulable)] == list(values), "new field: copy it in for_job"
    u = Unschedulable(**values)
    assert u.for_job("b") == dataclasses.replace(u, job_id="b") and u.for_job("b").job_id == "b"


def test_a_policy_scoring_nan_everywhere_is_said_to_not_veto():
    """NaN is never picked; the reason says the policy answered NaN, not that it vetoed every node."""
    from scheduling.policies.base import BasePolicy

    class Broken(BasePolicy):
        name = "broken"

        def score(self, job, snapshot, feasible_mask):  # type: ignore[no-untyped-def]
            out = np.full(snapshot.num_nodes, np.nan)
            out[-1] = -np.inf
            return out

    r = schedule_step(snap(node("a"), node("b"), node("c")), [job("x")], Broken(), now=0)
    assert r.unschedulable[0].reason == "broken: all 3 feasible node(s) 2 scored NaN (a policy error), the rest -inf (vetoed)"


def test_a_step_given_its_order_keeps_it_and_tells_the_placement_the_step_began():
    """``in_order``: the worker ordered the queue once (``queue_order``); the step takes that order
    as it is, drops repeated ids as ever, and a placement with per-step state hears ``begin_step``."""

    class Stateful:
        name = "stateful"

        def __init__(self) -> None:
            self.began: list[list[str]] = []

        def order(self, jobs, now, context=None):
            raise AssertionError("ordered again")

        def begin_step(self, ordered, now):
            self.began.append([j.job_id for j in ordered])

        def score(self, job, snapshot, feasible_mask):
            return BF.score(job, snapshot, feasible_mask)

    s = snap(node("a", cpu=8000), node("b", cpu=8000))
    late, early = job("late", cpu=6000, submit_time=9), job("early", cpu=6000, submit_time=1)
    policy = Stateful()
    r = schedule_step(s, [late, early, late], policy, now=10, in_order=True)
    assert r.order == ["late", "early"] and policy.began == [["late", "early"]]
    assert [p.job_id for p in r.placements] == ["late", "early"]
    r = schedule_step(s, [late, early], get_policy("fifo-first-fit"), now=10)
    assert r.order == ["early", "late"]  # without it, the policy's own order
