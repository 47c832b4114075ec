"""Session fixtures shared by the whole suite: the real Kafka broker (tests/conftest_kafka.py).

chdb is imported first, before any test module imports torch: with torch's native runtime
loaded first, a failing chdb query hangs or crashes the process (see inference/__init__.py).
"""

import chdb  # noqa: F401  (load order; see the docstring)

pytest_plugins = ["tests.conftest_kafka"]
