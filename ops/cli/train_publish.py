"""What ``semsched train`` does with the version it wrote: promote it, or record it.

Every written version goes into the archive's ``model_versions`` table (issue 4: "every model
version is recorded"). With promotion (the default) :func:`ops.cli.models.run_promote`
evaluates it beside the serving version and records both and the decision; with
``--no-promote`` :func:`publish` records it as a ``candidate`` without evaluation
(:func:`inference.training.promotion.record_candidate`), and ``semsched models promote DIR``
evaluates it later. Either way the archive must be writable, so :func:`check_archive` fails
before any training when it is not (in embedded mode a running worker owns the chdb directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ops.console import wide_console

console = wide_console()


def not_evaluated(directory: Path, out: Path) -> str:
    """The reason recorded for a version written with ``--no-promote``."""
    return f"not evaluated (trained with --no-promote): {promote_hint(directory, out)}"


def check_archive(archive: str | None, promote: bool) -> None:
    """Fail now, not after training, when the registry cannot be written."""
    from ops.cli.models import check_writable

    try:
        check_writable(archive)
    except typer.BadParameter as e:  # (its "or --no-promote" is no way out here: that records too)
        why = str(e).removesuffix(", or --no-promote")
        raise typer.BadParameter(f"{why} (every version semsched train writes is recorded there"
                                 + ("" if promote else ", --no-promote too") + ")") from None


def publish(directory: Path, out: Path, *, promote: bool, promotion_seeds: str, archive: str | None,
            pods: Path | None = None, nodes: Path | None = None) -> Any:  # fmt: skip
    """Promote ``directory`` (the PromotionResult) or record it as an unevaluated candidate
    (its :class:`~inference.training.registry.ModelVersion` row). Exits 1 when the candidate could
    not be evaluated; a candidate evaluated and not better is a result (exit 0)."""
    from ops.cli.models import archive_client, run_promote
    from ops.cli.options import seed_list

    if promote:
        root = promotion_root(out)
        if root.resolve() != out.resolve():
            console.print(f"{out} serves no version: judging {directory.name} in the root the worker serves from, "
                          f"{root} ({root / 'latest'})")  # fmt: skip
        result = run_promote(directory, root, seeds=seed_list(promotion_seeds), archive=archive, pods=pods, nodes=nodes)
        if not result.candidate.get("loaded"):  # not judged at all (it does not load, or fell back in the
            raise typer.Exit(1)  # replay: the reason is printed): a script must tell it from "not better"
        return result
    from inference.training.promotion import record_candidate
    from ops.model_registry import ArchiveRegistry

    try:
        row = record_candidate(directory, ArchiveRegistry(archive_client(archive, write=True)),
                               not_evaluated(directory, out))  # fmt: skip
    except FileExistsError as e:
        console.print(f"[red]{escape(str(e))}[/red]")
        raise typer.Exit(1) from None
    console.print(f"recorded {row.version} in model_versions as a candidate; not serving until promoted: "
                  f"{promote_hint(directory, out, archive)}")  # fmt: skip
    return row


#: the model root ``semsched models promote`` defaults to
DEFAULT_ROOT = Path("models")


def serving_root() -> Path | None:
    """The root whose ``latest`` the worker serves: ``$SEMSCHED_MODEL_DIR``'s parent when it names a
    ``latest`` link (default ``models/latest``); None when it names one version directly (promotion
    cannot change what such a worker serves)."""
    from inference.policy import default_model_dir

    served = default_model_dir()
    return served.parent if served.name == "latest" else None


def promotion_root(out: Path) -> Path:
    """Where a version written to ``out`` is judged and promoted: ``out`` when it serves a version, else
    the root the worker serves from (:func:`serving_root`: the version becomes its first, or is judged
    against its serving one), else ``out``. ``--out models/candidates`` keeps candidates beside
    ``models/latest``: promoted into their own root they beat nothing, and ``models/candidates/latest``
    served nothing the worker reads (found by review: only the ``--no-promote`` hint knew; then the root
    was ``./models`` whatever ``SEMSCHED_MODEL_DIR`` said, and only once it served)."""
    from inference.training.promotion import serving_dir

    if serving_dir(out) is not None:
        return out
    root = serving_root()
    return out if root is None else root


def promote_hint(directory: Path, out: Path, archive: str | None = None) -> str:
    """The command that judges ``directory`` against the serving version (:func:`promotion_root`),
    recording in ``archive`` when the candidate was recorded there."""
    root = promotion_root(out)
    models = "" if root.resolve() == DEFAULT_ROOT.resolve() else f" --models {root}"
    return f"semsched models promote {directory}{models}" + (f" --archive {archive}" if archive else "")
