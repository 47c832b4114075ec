"""Run one semsched worker: set telemetry up, migrate the archive, create the topics, then the
Faust app (ingest agents, tables, the scheduling loop, the archiver, the web views) until SIGTERM."""

from __future__ import annotations

import asyncio
import logging

from streams import telemetry
from streams.app import Worker, create_app
from streams.kafka_backoff import pace_failed_metadata_updates
from streams.kafka_logs import tame_kafka_client_logs, tell_untold_repeats
from streams.settings import Settings, no_broker
from streams.stop_deadline import StopDeadlineWorker
from streams.topics import TopicSetupError, ensure_topics
from streams.web_address import advertise, withdraw

log = logging.getLogger("semsched.worker")
UNTOLD_REPEATS_S = 5.0  # how often the held-back counts of client log lines that stopped repeating are told


def _attach_archiver(w: Worker) -> None:
    from storage.client import get_client
    from storage.migrate import migrate
    from streams.archiver import Archiver

    client = get_client(w.settings.clickhouse_dsn)
    applied = migrate(client)
    if applied:
        log.info("archive migrations applied: %s", applied)
    archiver = Archiver(w.settings, client=client)
    w.archiver = archiver  # type: ignore[attr-defined]
    _warm_up_durations(w, client)

    @w.app.task
    async def run_archiver() -> None:
        await archiver.start()
        try:
            await archiver.run()
        finally:
            await archiver.stop()


def _warm_up_durations(w: Worker, client: object) -> None:
    """The duration estimate learns the archive's latest finished jobs (streams/duration_warm_up.py);
    a failed read leaves it as it is and says so: the worker starts all the same."""
    from streams.duration_warm_up import warm_up_durations

    try:
        done = warm_up_durations(w.durations, client, w.settings.duration_warm_up)  # type: ignore[arg-type]
    except Exception as e:  # noqa: BLE001 - an estimate, not a reason to stay down
        log.warning("duration estimate not warmed from the archive: %s: %s", type(e).__name__, e)
        return
    w.durations_warmed = done.job_ids
    w.finished_log.add(done.rows)  # (taught again to a new duration model: streams/duration_reload.py)
    log.warning("duration estimate: %s", done.note)


def build_worker(settings: Settings, *, archive: bool = True) -> Worker:
    w = create_app(settings)
    asyncio.run(ensure_topics(settings, w.changelog_topics()))
    if archive:
        _attach_archiver(w)
    return w


def run_worker(settings: Settings, *, archive: bool = True, loglevel: str = "warning") -> None:
    from faust.worker import Worker as FaustWorker

    settings.state_dir.mkdir(parents=True, exist_ok=True)
    tame_kafka_client_logs()
    pace_failed_metadata_updates()
    # before Faust starts: its worker redirects stdout into logging, the console exporter
    # keeps the real stdout (the worker's log file under the local stack)
    try:
        log.warning(telemetry.configure(settings, "semsched-worker"))
    except telemetry.TelemetryConfigError as e:
        raise SystemExit(f"semsched worker: {e}") from None
    w = start_up(settings, archive)

    @w.app.timer(interval=UNTOLD_REPEATS_S)
    async def untold_repeats() -> None:  # the counts of aiokafka's lines that stopped repeating
        tell_untold_repeats()

    class StoppingWorker(StopDeadlineWorker, FaustWorker):
        """Faust's worker, gone within ``settings.stop_timeout_s`` once its stop starts."""

    worker = StoppingWorker(w.app, loglevel=loglevel, quiet=True)
    worker.stop_timeout_s = settings.stop_timeout_s
    worker.before_stop_exit = lambda: withdraw(settings.state_dir, settings.web_port)
    # no start-up spinner: to spin on every log message, Faust sets the root logger to DEBUG and
    # leaves it there, so every debug call of aiokafka and Faust builds a record for the worker's
    # whole life (5 % of its CPU under the demo's load)
    worker.spinner = None
    advertise(settings.state_dir, settings.web_port)  # for `semsched sql` / `explain` (streams/web_address.py)
    try:
        worker.execute_from_commandline()
    finally:
        close_policy(w)
        withdraw(settings.state_dir, settings.web_port)


def start_up(settings: Settings, archive: bool) -> Worker:
    """:func:`build_worker`, or the common reasons it cannot start in one line each (exit 1) instead
    of a 90-line traceback (found by the ops review): no broker, topics the broker refuses or
    that have another partition count than SEMSCHED_PARTITIONS, or an embedded archive another process holds."""
    from aiokafka.errors import KafkaConnectionError

    from storage.client import held_by_another_process, redacted

    try:
        return build_worker(settings, archive=archive)
    except KafkaConnectionError as e:
        raise SystemExit(no_broker("worker", settings.bootstrap, e)) from None
    except TopicSetupError as e:
        raise SystemExit(f"semsched worker: {e}") from None
    except RuntimeError as e:
        dsn = settings.clickhouse_dsn
        if not (archive and dsn.startswith("chdb://") and held_by_another_process(dsn)):
            raise  # (a failed migration, say: its own message)
        raise SystemExit(f"semsched worker: cannot open the archive {redacted(dsn)} ({type(e).__name__}: "
                         f"{str(e).strip()[:300]}): another process (a running worker?) holds its directory; stop "
                         "it, or run this one with --no-archive or another SEMSCHED_STATE_DIR") from None  # fmt: skip


def close_policy(w: Worker) -> None:
    """The stopped worker lets go of its policy's backend: a Triton client's shared-memory region
    stayed registered (and allocated) in the server after the worker exited, until another worker's
    first registration swept it."""
    loop = getattr(w, "loop", None)
    close = getattr(loop.policy, "close", None) if loop is not None else None
    if close is not None:
        try:
            close()
        except Exception as e:  # the server may be gone: nothing to let go of there
            log.warning("closing the policy's backend: %s: %s", type(e).__name__, e)
