"""One agents process at a time: a second one would take the first one's runs for lost.

A (re)started agents process reports every run that the topics show started and not ended
``failed`` (:mod:`ops.agents.recovery`): its predecessor is gone, so nobody else will. That
holds only when the predecessor really is gone. Started beside a live one, it reported that
one's runs lost, the worker placed those jobs again, and each ran twice at once.

So before it reads anything back, :func:`wait_until_alone` looks at the agents' consumer group
on the broker (which works across machines): while it has members, another agents process is
consuming ``actions``. A predecessor killed without leaving the group stays a member until its
session times out (10 s), so the check waits :data:`PREDECESSOR_WAIT_S` for the group to empty
before it refuses. Two processes started within the same second can still both pass.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError, KafkaError, for_code

from streams.settings import Settings

log = logging.getLogger("semsched.agents")

PREDECESSOR_WAIT_S = 15.0  # past aiokafka's 10 s session timeout: a killed process's membership has expired


class AgentsAlreadyRunning(RuntimeError):
    """Another agents process is a member of the agents' consumer group."""


def agents_group(settings: Settings) -> str:
    """The consumer group every agents process joins to read ``actions``."""
    return f"{settings.topic_prefix}agents"


async def group_members(settings: Settings, group: str) -> list[str] | None:
    """The hosts of the group's live members; ``None`` while the broker has no coordinator for
    it yet (a broker that just started) or answers for the group with an error."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group])
    except GroupCoordinatorNotAvailableError:
        return None
    finally:
        await admin.close()
    (described,) = response.to_object()["groups"]
    if described["error_code"]:  # e.g. a restarted broker's coordinator still loading its groups: its
        # empty member list says nothing (found by review: it was taken for "no other agents process")
        log.warning("consumer group %s not described yet: %s", group, for_code(described["error_code"]).__name__)
        return None
    return [str(m["client_host"]).lstrip("/") for m in described["members"]]


async def wait_until_alone(settings: Settings, wait_s: float = PREDECESSOR_WAIT_S, poll_s: float = 1.0) -> None:
    """Return once the agents' group has no member; :class:`AgentsAlreadyRunning` if it still
    has one after ``wait_s`` seconds."""
    group = agents_group(settings)
    deadline = time.monotonic() + wait_s
    waited = False
    while True:
        try:
            members = await group_members(settings, group)
        except KafkaError as e:
            members = None
            log.warning("cannot describe consumer group %s yet: %s", group, e)
        if members == [] or (members is None and time.monotonic() >= deadline):
            return  # no coordinator all along: no live member either
        if members and time.monotonic() >= deadline:
            raise AgentsAlreadyRunning(
                f"another `semsched agents` is running: consumer group {group} has {len(members)} member(s) "
                f"({', '.join(sorted(set(members)))}) after {wait_s:g} s. One agents process plays every node; "
                "a second one would report the first one's runs lost and the worker would place them again. "
                "Stop the other one first (or use another SEMSCHED_TOPIC_PREFIX for another cluster).")
        if members and not waited:
            log.warning("consumer group %s has %d member(s): waiting up to %g s for a stopped predecessor's "
                        "session to expire", group, len(members), wait_s)  # fmt: skip
            waited = True
        await asyncio.sleep(poll_s)
