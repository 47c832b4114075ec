"""torch models, featurisation, training and the inference backends (issue 4).

Importing :mod:`inference` registers the ``learned`` placement policy
(:mod:`inference.policy`; torch is imported only when a model is loaded).
"""

from inference import policy as _policy  # noqa: F401  (registers "learned")
