"""torch models, featurisation, training and the inference backends (issue 4).

Importing :mod:`inference` registers the ``learned`` placement policy
(:mod:`inference.policy`) and the ``sjf-learned`` ordering (:mod:`inference.duration.ordering`),
and imports torch with them (the model step); a process that needs neither (the agents, a replay)
does not import it.
"""

import contextlib

# chdb's native runtime must be loaded before torch's in a process that uses both: with torch
# loaded first, a chdb query that fails hangs or crashes the process (C++ exception
# unwinding). The worker archives to chdb and may score with torch, so load chdb first.
with contextlib.suppress(ImportError):
    import chdb  # noqa: F401

from inference import policy as _policy  # noqa: E402, F401  (registers "learned")
from inference.duration import ordering as _duration_ordering  # noqa: E402, F401  (registers "sjf-learned")
