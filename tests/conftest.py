"""Session fixtures shared by the whole suite: the real Kafka broker (tests/conftest_kafka.py)."""

pytest_plugins = ["tests.conftest_kafka"]
