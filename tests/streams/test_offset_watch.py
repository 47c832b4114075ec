"""OffsetWatch: what the worker does with each input offset (handle, seek back, wait for the
offsets it sought back to) and which quiet partitions it seeks back to."""

from __future__ import annotations

from streams.offset_watch import OffsetWatch, Verdict

H, R, A = Verdict.HANDLE, Verdict.REWIND, Verdict.AWAIT


def test_contiguous_and_earlier_offsets_are_handled() -> None:
    w = OffsetWatch()
    assert [w.seen("t", o, 0.0) for o in (3, 4, 5, 2, 3, 4, 5, 6)] == [H] * 8  # the first is the start
    assert w.rewind_to("t") == 7


def test_a_gap_rewinds_once_and_waits_for_its_first_offset() -> None:
    w = OffsetWatch()
    assert [w.seen("t", o, 0.0) for o in (0, 1)] == [H, H]
    assert w.seen("t", 4, 0.0) is R and w.rewind_to("t") == 2
    assert [w.seen("t", o, 0.0) for o in (5, 6)] == [A, A]  # queued past the gap: they come again
    assert [w.seen("t", o, 0.0) for o in (2, 3, 4, 5, 6, 7)] == [H] * 6
    assert w.seen("u", 9, 0.0) is H  # partitions are separate


def test_an_earlier_offset_ends_the_wait() -> None:
    w = OffsetWatch()
    w.seen("t", 0, 0.0)
    assert w.seen("t", 3, 0.0) is R
    assert w.seen("t", 0, 0.0) is H  # a rebalance re-read from the committed offset: 1, 2 come on the way
    assert w.seen("t", 1, 0.0) is H


def test_a_partition_behind_its_end_for_stall_s_is_sought_back_once_per_stall() -> None:
    w = OffsetWatch(stall_s=10.0)
    for o in range(5):
        w.seen("t", o, 100.0)
    w.seen("u", 0, 100.0)
    assert w.stalled({"t": 5, "u": 1}, 200.0) == []  # everything handled
    # 5 and 6 were published after a quiet spell: behind from now on, not since the last arrival
    assert w.stalled({"t": 7, "u": 1}, 205.0) == []
    assert w.stalled({"t": 7, "u": 1}, 214.0) == []
    assert w.stalled({"t": 7, "u": 1}, 215.0) == ["t"] and w.rewind_to("t") == 5
    assert w.stalled({"t": 7}, 220.0) == []  # not again at once
    assert w.seen("t", 6, 221.0) is A and w.seen("t", 5, 221.0) is H and w.seen("t", 6, 221.0) is H
    assert w.stalled({"t": 7, "never-seen": 9}, 500.0) == []  # no start known for a partition never seen


def test_an_arrival_while_behind_restarts_the_stall_clock() -> None:
    w = OffsetWatch(stall_s=10.0)
    w.seen("t", 0, 0.0)
    assert w.stalled({"t": 5}, 1.0) == []  # behind since 1
    w.seen("t", 1, 8.0)  # progress
    assert w.stalled({"t": 5}, 12.0) == []  # behind since 12 now
    assert w.stalled({"t": 5}, 22.0) == ["t"]


def test_forgotten_partitions_start_over() -> None:
    w = OffsetWatch()
    w.seen("t", 0, 0.0)
    w.forget(["t"])
    assert "t" not in w and w.seen("t", 9, 0.0) is H


def test_a_seek_whose_target_does_not_come_back_is_asked_for_again_every_retry_s() -> None:
    # Faust can undo a seek (records it had fetched move its read offset past the target again)
    w = OffsetWatch(retry_s=1.0)
    w.seen("t", 0, 10.0)
    assert w.seen("t", 3, 10.0) is R
    assert w.due_reseeks(10.5) == []
    assert w.due_reseeks(11.0) == ["t"] and w.rewind_to("t") == 1
    assert w.due_reseeks(11.5) == [] and w.due_reseeks(12.0) == ["t"]
    assert w.seen("t", 1, 12.1) is H
    assert w.due_reseeks(20.0) == []  # back: nothing to ask for


def test_a_first_event_past_the_known_start_is_a_gap() -> None:
    w = OffsetWatch()
    w.begin("t", 4, 0.0)
    assert w.seen("t", 7, 0.0) is R and w.rewind_to("t") == 4
    assert [w.seen("t", o, 0.0) for o in (4, 5, 6, 7)] == [H] * 4
    w.begin("u", 4, 0.0)
    assert w.seen("u", 4, 0.0) is H  # at the start: nothing skipped


def test_a_wait_that_lasts_gives_up_so_the_partition_goes_on() -> None:
    w = OffsetWatch(give_up_s=60.0)
    w.seen("t", 0, 0.0)
    assert w.seen("t", 5, 0.0) is R
    assert w.give_up(59.0) == [] and w.seen("t", 6, 59.0) is A
    assert w.give_up(60.0) == [("t", 1)] and w.give_up(61.0) == []
    assert w.stalled({"t": 9}, 500.0) == []  # given up: not sought back again until a new start
    assert [w.seen("t", o, 61.0) for o in (7, 8)] == [H, H]  # taken as they come: no new rewind
    assert w.seen("t", 10, 62.0) is R  # and watched again from there


def test_a_begun_partition_that_nothing_arrives_on_stalls_unless_held() -> None:
    """Begun at assignment (no event yet): if every record fetched there is lost and nothing else
    comes, its end offset still shows it; a held stall clock (tables recovering) starts over."""
    w = OffsetWatch(stall_s=10.0)
    w.begin("t", 4, 0.0)
    assert w.stalled({"t": 4}, 1.0) == []  # nothing there yet
    assert w.stalled({"t": 5}, 2.0) == []  # behind from now
    w.hold_clocks(8.0)  # e.g. 8 s later: the partitions were paused for recovery
    assert w.stalled({"t": 5}, 10.0) == [] and w.stalled({"t": 5}, 19.0) == []  # counted from 10 s again
    assert w.stalled({"t": 5}, 20.0) == ["t"] and w.rewind_to("t") == 4
    assert w.seen("t", 4, 21.0) is H


def test_a_held_wait_is_neither_sought_again_nor_given_up_until_the_hold_ends() -> None:
    w = OffsetWatch(retry_s=1.0, give_up_s=60.0)
    assert [w.seen("t", o, 0.0) for o in (0, 3)] == [H, R]  # waits for 1
    for now in range(1, 100):  # a dead letter retried for 99 s: held every second
        w.hold_clocks(float(now))
        assert w.due_reseeks(float(now)) == []
    assert w.give_up(99.5) == [] and w.due_reseeks(99.5) == []
    assert w.due_reseeks(100.0) == ["t"]  # the hold ended: sought again after retry_s
    assert w.give_up(158.0) == [] and w.give_up(159.0) == [("t", 1)]


def test_a_wait_on_a_quiet_partition_still_gives_up() -> None:
    """Nothing arrives after the rewind: the stall check runs again and again meanwhile, and must not
    restart the wait's give-up clock (found by review: it did, every stall_s, so the partition waited
    for ever and every later event was held back)."""
    w = OffsetWatch(stall_s=10.0, give_up_s=60.0)
    w.seen("t", 0, 0.0)
    assert w.seen("t", 5, 0.0) is R  # waiting for 1
    given: list[tuple[str, int]] = []
    for now in range(1, 600):  # the worker's cadence: the stall check, the give-up check
        w.stalled({"t": 6}, float(now))
        given += w.give_up(float(now))
        if given:
            break
    assert given == [("t", 1)] and now == 60
