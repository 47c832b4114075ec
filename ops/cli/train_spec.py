"""The feature spec and text encoder a new learned-scorer model is trained with (``semsched train``).

One way to name encoders: ``--encoder`` takes the names ``semsched train-duration --encoder``
takes (``hashed``, ``minilm``; :data:`ops.cli.train_duration.ENCODERS`),
:func:`inference.encoders.get_encoder` builds the encoder, and the spec records the encoder's
own ``name`` and ``dim`` (``hashed-ngram-<dim>`` / ``all-MiniLM-L6-v2``, 384), as the duration
predictor's config does: serving resolves the same name with the same ``get_encoder``.
"""

from __future__ import annotations

from typing import Any

import typer


def policy_spec(node_views: list[Any], pod_list: list[Any], *, encoder: str = "hashed", text_dim: int = 32,
                cluster: bool = True, frag: bool = False) -> tuple[Any, Any]:  # fmt: skip
    """``(FeatureSpec, EncoderCache)`` of a new model: the GPU models of ``node_views``, FGD's
    workload of ``pod_list`` when ``frag``, and the text encoder ``encoder`` (``hashed``:
    ``text_dim``-wide n-grams; ``minilm``: 384-d, ``text_dim`` unused) under its own name."""
    from inference.encoders import EncoderCache, get_encoder
    from inference.features.spec import FeatureSpec
    from ops.cli.train_duration import ENCODERS
    from scheduling.metrics.fragmentation import Workload

    if encoder not in ENCODERS:
        raise typer.BadParameter(f"--encoder must be one of {', '.join(ENCODERS)}, not {encoder!r}")
    text = EncoderCache(get_encoder(encoder, text_dim))
    spec = FeatureSpec(gpu_models=tuple(sorted({n.gpu_model for n in node_views if n.gpu_model})),
                       encoder=text.name, text_dim=text.dim, cluster=cluster,
                       workload=FeatureSpec.workload_rows(Workload.from_jobs(pod_list)) if frag else ())  # fmt: skip
    return spec, text
