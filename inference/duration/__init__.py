"""The learned duration predictor (issue 4 point 3): regression on a job's text embedding and
resources, blended with retrieval of the most similar finished jobs; it feeds ``sjf-learned``.

- :mod:`~inference.duration.features` — what is read of a job (text, resource shape);
- :mod:`~inference.duration.retrieval` — the k-nearest finished jobs, weighted median;
- :mod:`~inference.duration.regression` — the torch MLP on log run time;
- :mod:`~inference.duration.predictor` — :class:`LearnedDurationPredictor` (observe / predict);
- :mod:`~inference.duration.train` — training with a time-ordered validation split;
- :mod:`~inference.duration.evaluate` — held-out split and online replay, accuracy figures;
- :mod:`~inference.duration.io` — ``duration.pt`` + ``config.json``;
- :mod:`~inference.duration.archive` — training on the archive's finished jobs (``ops`` reads them
  with ``storage.queries.finished_jobs`` and passes them in);
- :mod:`~inference.duration.ordering` — the ``sjf-learned`` ordering (registers on import);
- :mod:`~inference.duration.gittins` — the ``gittins-learned`` ordering: the Gittins index over
  each job's predictive distribution (registers on import).

torch is imported only when a regression is trained, loaded or run.
"""

from inference.duration import gittins as _gittins  # noqa: F401  (registers "gittins-learned")
from inference.duration.config import DurationConfig
from inference.duration.predictor import Components, LearnedDurationPredictor

__all__ = ["Components", "DurationConfig", "LearnedDurationPredictor"]
