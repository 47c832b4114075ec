"""``streams/table_views.py``: what the scheduling loop reads from the worker's tables."""

from __future__ import annotations

from types import SimpleNamespace

from scheduling.events import NodeTelemetry, partition_for
from streams.table_views import TableViews


def _node(node_id: str, cluster: str = "default") -> dict:
    return NodeTelemetry(event_id=f"t-{node_id}", node_id=node_id, cluster=cluster, cpu_milli=4000,
                         memory_mib=4096).model_dump(mode="json")  # fmt: skip


def test_each_clusters_nodes_come_in_node_id_order_whatever_order_the_table_holds_them_in() -> None:
    """Found by review: the views came in the table's insertion order, which a changelog restore replays in
    another order, while the archive's replays (training) rebuild them by node id. Features read the order
    (FGD's first tie, the lowest-index tie-break), so training and serving saw different states."""
    ids = ["n2", "n10", "n1", "b3", "n0"]
    table = {i: _node(i) for i in ids} | {"x1": _node("x1", "other"), "x0": _node("x0", "other")}
    w = SimpleNamespace(nodes=table, settings=SimpleNamespace(partitions=1))
    owned = {partition_for("default", 1), partition_for("other", 1)}
    views = TableViews(w).nodes(owned)  # type: ignore[arg-type]
    assert [v.node_id for v in views["default"]] == sorted(ids) == ["b3", "n0", "n1", "n10", "n2"]
    assert [v.node_id for v in views["other"]] == ["x0", "x1"]
    restored = SimpleNamespace(nodes=dict(reversed(table.items())), settings=w.settings)  # another insertion order
    assert [v.node_id for v in TableViews(restored).nodes(owned)["default"]] == sorted(ids)  # type: ignore[arg-type]
