"""NodeLedger: the agent's own capacity check, on hand-made nodes and commands."""

from __future__ import annotations

import json

import pytest

from ops.agents.node_ledger import NodeLedger
from scheduling.events import NodeTelemetry, PlacementCommand, decode


def node(num_gpu: int = 2, **kw: object) -> NodeLedger:
    inv = NodeTelemetry(node_id="n1", cluster="c1", source="inventory", cpu_milli=8000, memory_mib=32_768,
                        num_gpu=num_gpu, gpu_model="A100" if num_gpu else None,
                        topology={"rack": "r1"}, **kw)  # fmt: skip
    return NodeLedger.from_inventory(inv)


def cmd(job_id: str = "j1", *, cpu: int = 1000, mem: int = 1024, gpus: tuple[int, ...] = (),
        per_gpu: int = 0) -> PlacementCommand:  # fmt: skip
    return PlacementCommand(decision_id=f"d-{job_id}", job_id=job_id, cluster="c1", node_id="n1",
                            gpu_indices=list(gpus), cpu_milli=cpu, memory_mib=mem, gpu_milli_per_gpu=per_gpu,
                            policy="best-fit")  # fmt: skip


def test_from_inventory() -> None:
    n = node(num_gpu=4)
    assert (n.node_id, n.cluster, n.cpu_milli, n.memory_mib, n.gpu_model) == ("n1", "c1", 8000, 32_768, "A100")
    assert n.gpu_alloc == [0, 0, 0, 0] and n.cpu_alloc == 0 and n.mem_alloc == 0 and n.jobs == {}
    assert n.topology == {"rack": "r1"} and n.healthy


def test_a_fitting_command_is_not_refused() -> None:
    n = node()
    assert n.refuse(cmd(cpu=8000, mem=32_768, gpus=(0, 1), per_gpu=1000)) is None  # exactly full


def test_cpu_overcommit_is_refused() -> None:
    n = node()
    n.allocate(cmd("a", cpu=6000))
    reason = n.refuse(cmd("b", cpu=2001))
    assert reason == "cpu over-commit on n1: 6000+2001 > 8000 milli"
    assert n.refuse(cmd("b", cpu=2000)) is None


def test_memory_overcommit_is_refused() -> None:
    n = node()
    n.allocate(cmd("a", mem=30_000))
    reason = n.refuse(cmd("b", mem=2769))
    assert reason is not None and reason.startswith("memory over-commit on n1") and "MiB" in reason
    assert n.refuse(cmd("b", mem=2768)) is None


def test_gpu_overcommit_is_refused() -> None:
    n = node()
    n.allocate(cmd("a", cpu=0, mem=0, gpus=(1,), per_gpu=1000))
    reason = n.refuse(cmd("b", cpu=0, mem=0, gpus=(0, 1), per_gpu=1000))
    assert reason == "GPU 1 over-commit on n1: 1000+1000 > 1000 milli"
    assert n.refuse(cmd("b", cpu=0, mem=0, gpus=(0,), per_gpu=1000)) is None


def test_unknown_gpu_index_is_refused() -> None:
    n = node(num_gpu=2)
    assert n.refuse(cmd(gpus=(2,), per_gpu=1000)) == "node n1 has no GPU 2 (it has 2)"
    with pytest.raises(ValueError, match="greater than or equal to 0"):  # refused by the contract itself
        cmd(gpus=(-1,), per_gpu=1000)
    assert node(num_gpu=0).refuse(cmd(gpus=(0,), per_gpu=1000)) == "node n1 has no GPU 0 (it has 0)"


def test_repeated_gpu_indices_are_refused() -> None:
    # 2 x 400 on the same GPU would fit by arithmetic; repeating an index is still wrong
    reason = node().refuse(cmd(gpus=(0, 0), per_gpu=400))
    assert reason == "GPU indices repeat: [0, 0]"


def test_gpu_share_without_an_index_is_refused() -> None:
    assert node().refuse(cmd(per_gpu=500)) == "GPU share requested but no GPU index given"


def test_unhealthy_node_refuses_everything() -> None:
    n = node(healthy=False)
    assert n.refuse(cmd(cpu=1, mem=1)) == "node n1 is not healthy"


def test_fractional_gpu_sharing() -> None:
    n = node(num_gpu=1)
    a, b, c = (cmd(j, cpu=100, mem=100, gpus=(0,), per_gpu=500) for j in ("a", "b", "c"))
    assert n.refuse(a) is None
    n.allocate(a)
    assert n.refuse(b) is None
    n.allocate(b)
    assert n.gpu_alloc == [1000]
    assert n.refuse(c) == "GPU 0 over-commit on n1: 1000+500 > 1000 milli"
    assert n.refuse(cmd("d", cpu=100, mem=100, gpus=(0,), per_gpu=1)) is not None
    n.release("d-a")
    assert n.refuse(c) is None


def test_allocate_release_round_trip() -> None:
    n = node(num_gpu=4)
    a = cmd("a", cpu=1500, mem=2048, gpus=(0, 2), per_gpu=1000)
    b = cmd("b", cpu=500, mem=512, gpus=(3,), per_gpu=250)
    n.allocate(a)
    n.allocate(b)
    assert (n.cpu_alloc, n.mem_alloc, n.gpu_alloc) == (2000, 2560, [1000, 0, 1000, 250])
    assert set(n.jobs) == {"d-a", "d-b"}  # holdings are keyed by decision id
    assert n.release("d-a") == a
    assert (n.cpu_alloc, n.mem_alloc, n.gpu_alloc) == (500, 512, [0, 0, 0, 250])
    assert n.release("d-a") is None  # releasing twice changes nothing
    assert (n.cpu_alloc, n.mem_alloc, n.gpu_alloc) == (500, 512, [0, 0, 0, 250])
    assert n.release("d-b") == b
    assert (n.cpu_alloc, n.mem_alloc, n.gpu_alloc, n.jobs) == (0, 0, [0, 0, 0, 0], {})
    assert n.release("never") is None


def test_telemetry_reports_allocation_and_utilisation() -> None:
    n = node(num_gpu=4)
    n.allocate(cmd("a", cpu=2000, mem=8192, gpus=(0, 1), per_gpu=1000))
    n.allocate(cmd("b", cpu=0, mem=0, gpus=(3,), per_gpu=500))
    t = n.telemetry()
    assert isinstance(t, NodeTelemetry)
    assert (t.node_id, t.cluster, t.source, t.gpu_model, t.num_gpu) == ("n1", "c1", "agent", "A100", 4)
    assert (t.cpu_milli, t.memory_mib) == (8000, 32_768)
    assert (t.cpu_alloc_milli, t.memory_alloc_mib, t.gpu_alloc_milli) == (2000, 8192, [1000, 1000, 0, 500])
    assert t.cpu_util == pytest.approx(0.25)
    assert t.gpu_util == pytest.approx(2500 / 4000)
    assert t.healthy and t.topology == {"rack": "r1"}
    # it is a valid wire event
    assert decode("nodes.telemetry", t.to_bytes()) == t


def test_telemetry_of_a_cpu_only_node() -> None:
    t = node(num_gpu=0).telemetry()
    assert t.num_gpu == 0 and t.gpu_util == 0.0 and t.gpu_alloc_milli == [] and t.gpu_model is None


@pytest.mark.parametrize(("field", "gpus"), [("cpu_milli", []), ("memory_mib", []), ("gpu_milli_per_gpu", [0])])
def test_negative_requests_are_refused_at_the_wire_before_any_ledger(field: str, gpus: list[int]) -> None:
    """A negative request would open room on a node for an over-commit; the command never reaches a
    ledger (the agents dead-letter what does not decode)."""
    raw = json.loads(cmd("neg", cpu=0, mem=0).to_bytes())
    raw.update({field: -5000, "gpu_indices": gpus})
    with pytest.raises(ValueError, match=field):
        decode("actions", json.dumps(raw).encode())
