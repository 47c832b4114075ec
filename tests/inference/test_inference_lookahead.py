"""The lookahead teacher overrules its base policy only when the rollouts of the known future say so."""

from inference_helpers import job

from inference.training.lookahead import LookaheadTeacher
from scheduling.assign import place_one
from scheduling.node import NodeView
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot


def cluster() -> ClusterSnapshot:
    return ClusterSnapshot.from_nodes([NodeView(node_id="two", cpu_milli=32_000, memory_mib=65_536, num_gpu=2,
                                                gpu_model="A10"),
                                       NodeView(node_id="one", cpu_milli=32_000, memory_mib=65_536, num_gpu=1,
                                                gpu_model="A10")])  # fmt: skip


def test_the_teacher_keeps_room_for_the_next_pod():
    a, b = job("a", gpus=1), job("b", gpus=2)
    base = get_policy("fifo-first-fit")  # would put "a" on the first node, leaving no room for "b"
    assert place_one(cluster(), a, base, top_k=0).node_id == "two"
    teacher = LookaheadTeacher(base, [a, b], 3000, horizon=5, candidates=3, start=0.0)
    snap = cluster()
    assert place_one(snap, a, teacher, top_k=0).node_id == "one"
    assert place_one(snap, b, teacher, top_k=0).node_id == "two"
    assert teacher.decisions == 1 and teacher.deviations == 1  # "b" had one feasible node: no rollout


def test_before_start_or_for_unknown_pods_the_teacher_is_its_base():
    a, b = job("a", gpus=1), job("b", gpus=2)
    teacher = LookaheadTeacher(get_policy("fifo-first-fit"), [a, b], 3000, horizon=5, start=0.9)
    assert place_one(cluster(), a, teacher, top_k=0).node_id == "two"  # a third of the capacity arrived: < 0.9
    assert place_one(cluster(), job("stranger", gpus=1), teacher, top_k=0).node_id == "two"
    assert teacher.decisions == 0
