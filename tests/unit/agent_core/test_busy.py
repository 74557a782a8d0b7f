"""Busy modes: which turns answer the waiting messages, the collect window, what stops a turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_core.busy import (
    BusyMode,
    Interruption,
    TurnPlan,
    Waiting,
    collect_wait_seconds,
    interruption,
    plan_turns,
)
from agent_core.errors import InvalidInput
from agent_core.tenancy.settings import TenantDefaults, check_busy_mode, effective_busy_mode

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def chat(i: int, seconds: float = 0.0) -> Waiting:
    return Waiting(i, i, T0 + timedelta(seconds=seconds), mergeable=True)


def command(i: int, *, stop: bool = False) -> Waiting:
    return Waiting(i, i, T0, mergeable=False, stop=stop)


class TestPlanTurns:
    @pytest.mark.parametrize("mode", [BusyMode.QUEUE, BusyMode.STEER])
    def test_one_turn_per_message_in_order(self, mode: BusyMode) -> None:
        waiting = [chat(1), chat(2), command(3), chat(4)]
        assert plan_turns(waiting, mode) == [TurnPlan(1), TurnPlan(2), TurnPlan(3), TurnPlan(4)]

    @pytest.mark.parametrize("mode", [BusyMode.COLLECT, BusyMode.INTERRUPT])
    def test_a_run_of_chat_messages_is_answered_once_to_the_latest(self, mode: BusyMode) -> None:
        assert plan_turns([chat(1), chat(2), chat(3)], mode) == [TurnPlan(3, (1, 2))]

    def test_a_command_keeps_its_own_turn_and_its_place(self) -> None:
        waiting = [chat(1), chat(2), command(3), chat(4), chat(5)]
        assert plan_turns(waiting, BusyMode.COLLECT) == [
            TurnPlan(2, (1,)),
            TurnPlan(3),
            TurnPlan(5, (4,)),
        ]

    def test_nothing_waiting_plans_nothing(self) -> None:
        assert plan_turns([], BusyMode.COLLECT) == []


class TestCollectWindow:
    def test_waits_out_the_window_after_the_first_message(self) -> None:
        waiting = [chat(1), chat(2, seconds=0.5)]
        now = T0 + timedelta(seconds=0.5)
        left = collect_wait_seconds(waiting, BusyMode.COLLECT, now=now, window=2.0)
        assert left == pytest.approx(1.5)

    def test_messages_that_waited_behind_a_turn_start_at_once(self) -> None:
        now = T0 + timedelta(seconds=30)
        assert collect_wait_seconds([chat(1)], BusyMode.COLLECT, now=now, window=2.0) == 0.0

    @pytest.mark.parametrize("mode", [BusyMode.QUEUE, BusyMode.INTERRUPT, BusyMode.STEER])
    def test_only_collect_waits(self, mode: BusyMode) -> None:
        assert collect_wait_seconds([chat(1)], mode, now=T0, window=2.0) == 0.0

    def test_a_command_first_does_not_wait(self) -> None:
        assert collect_wait_seconds([command(1)], BusyMode.COLLECT, now=T0, window=2.0) == 0.0


class TestInterruption:
    @pytest.mark.parametrize("mode", list(BusyMode))
    def test_stop_interrupts_in_every_mode(self, mode: BusyMode) -> None:
        assert interruption([chat(5), command(6, stop=True)], mode) == Interruption(6, stop=True)

    def test_interrupt_mode_is_stopped_by_the_newest_chat_message(self) -> None:
        newer = [chat(5), command(6), chat(7)]
        assert interruption(newer, BusyMode.INTERRUPT) == Interruption(7, stop=False)

    @pytest.mark.parametrize("mode", [BusyMode.QUEUE, BusyMode.COLLECT, BusyMode.STEER])
    def test_other_modes_keep_running_on_new_messages(self, mode: BusyMode) -> None:
        assert interruption([chat(5), chat(6)], mode) is None

    def test_other_commands_do_not_interrupt(self) -> None:
        assert interruption([command(5)], BusyMode.INTERRUPT) is None


class TestEffectiveBusyMode:
    def test_the_bot_s_own_mode_wins(self) -> None:
        tenant = TenantDefaults(busy_mode="queue")
        assert effective_busy_mode("interrupt", tenant, "collect") is BusyMode.INTERRUPT

    def test_a_bot_without_one_inherits_its_tenant_s(self) -> None:
        tenant = TenantDefaults(busy_mode="queue")
        assert effective_busy_mode(None, tenant, "collect") is BusyMode.QUEUE

    def test_then_the_deployment_s(self) -> None:
        assert effective_busy_mode(None, TenantDefaults(), "steer") is BusyMode.STEER

    def test_the_tenant_s_mode_survives_the_json_column(self) -> None:
        stored = TenantDefaults(busy_mode="interrupt").to_json()
        assert TenantDefaults.from_json(stored).busy_mode == "interrupt"

    def test_an_unknown_mode_is_refused_with_the_choices(self) -> None:
        with pytest.raises(InvalidInput, match="busy mode 'frantic' is unknown: use one of queue"):
            check_busy_mode("frantic")
