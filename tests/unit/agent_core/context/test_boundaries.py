from __future__ import annotations

import pytest

from agent_core.context.boundaries import (
    align_to_tool_groups,
    find_boundaries,
    head_end,
    keep_anchors_in_tail,
    minimum_tail_messages,
    tail_start_by_tokens,
    tool_result_parents,
)
from agent_core.context.markers import summary_message
from agent_core.tokens import rough_message_tokens
from tests.unit.agent_core.context.builders import assistant, call, result, system, user


def chat(n: int) -> list[dict]:
    """system + n alternating user/assistant messages."""
    return [system()] + [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(n)]


class TestMinimumTail:
    @pytest.mark.parametrize(("protect_last_n", "floor"), [(20, 8), (5, 5), (1, 3), (8, 8)])
    def test_floor(self, protect_last_n, floor):
        assert minimum_tail_messages(protect_last_n) == floor


class TestHead:
    def test_system_plus_first_n(self):
        assert head_end(chat(10), 3, decayed=False) == 4

    def test_decays_to_the_system_prompt(self):
        assert head_end(chat(10), 3, decayed=True) == 1

    def test_without_system_prompt(self):
        assert head_end(chat(10)[1:], 3, decayed=False) == 3

    def test_keeps_a_call_with_its_results(self):
        messages = [
            system(),
            user("go"),
            call("a"),
            result("a"),
            result("a2"),
            user("x"),
            assistant("y"),
        ]
        messages[2]["tool_calls"].append({"id": "a2", "function": {"name": "t", "arguments": "{}"}})
        assert head_end(messages, 2, decayed=False) == 5


class TestTailByTokens:
    def test_walks_back_within_budget(self):
        assert tail_start_by_tokens([50, 10, 10, 10], 0, 30, 1) == 1

    def test_overshoots_to_keep_a_straddling_message(self):
        # 20 fits, the next 25 crosses 30 but stays under 45: taken, and the walk stops.
        assert tail_start_by_tokens([5, 5, 25, 20], 0, 30, 1) == 2

    def test_does_not_overshoot_past_the_soft_ceiling(self):
        assert tail_start_by_tokens([5, 40, 20], 0, 30, 1) == 2

    def test_minimum_messages_win_over_budget(self):
        assert tail_start_by_tokens([100, 100, 100, 100], 0, 10, 3) == 1

    def test_message_cap(self):
        assert tail_start_by_tokens([1] * 100, 0, 1_000, 3, max_messages=10) == 90

    def test_message_cap_below_the_floor_keeps_the_floor(self):
        assert tail_start_by_tokens([1] * 100, 0, 1_000, 8, max_messages=2) == 92

    def test_never_enters_the_head(self):
        assert tail_start_by_tokens([1] * 10, 4, 1_000, 3) == 4


class TestToolGroups:
    def test_cut_moves_before_the_call(self):
        messages = [user("a"), call("x"), result("x"), user("b")]
        parents = tool_result_parents(messages)
        assert align_to_tool_groups(2, parents, len(messages)) == 1

    def test_cut_at_a_safe_place_stays(self):
        messages = [user("a"), call("x"), result("x"), user("b")]
        assert align_to_tool_groups(3, tool_result_parents(messages), 4) == 3

    def test_interleaved_results_pull_the_call_in(self):
        messages = [user("a"), call("x"), user("b", "bob"), result("x"), assistant("c")]
        assert align_to_tool_groups(3, tool_result_parents(messages), 5) == 1


class TestAnchors:
    def test_latest_user_message_stays(self):
        messages = [user("task"), call("x"), result("x"), call("y"), result("y")]
        assert keep_anchors_in_tail(messages, 3) == (0, ())

    def test_latest_visible_reply_stays(self):
        messages = [user("a"), assistant("visible"), user("b"), call("x"), result("x")]
        assert keep_anchors_in_tail(messages, 2) == (1, ())

    def test_summary_messages_are_not_anchors(self):
        messages = [user("real"), summary_message("body"), assistant("r")]
        assert keep_anchors_in_tail(messages, 2) == (0, ())

    def test_an_anchor_beyond_the_ceiling_is_pinned_not_pulled(self):
        messages = [
            user("q", "ann"),
            assistant("answer"),
            *[user(f"chat {i}", "bob") for i in range(6)],
        ]
        cut, pinned = keep_anchors_in_tail(
            messages, 5, tokens=[10] * len(messages), ceiling_tokens=35
        )
        assert (cut, pinned) == (5, (1,))

    def test_within_the_ceiling_the_anchor_joins_the_tail(self):
        messages = [
            user("q", "ann"),
            assistant("answer"),
            *[user(f"chat {i}", "bob") for i in range(3)],
        ]
        assert keep_anchors_in_tail(
            messages, 3, tokens=[10] * len(messages), ceiling_tokens=100
        ) == (1, ())

    def test_the_message_limit_also_pins(self):
        messages = [
            user("q", "ann"),
            assistant("answer"),
            *[user(f"chat {i}", "bob") for i in range(6)],
        ]
        assert keep_anchors_in_tail(messages, 5, max_messages=4)[1] == (1,)


class TestGroupThreadAfterAnAnswer:
    def test_chatter_after_the_last_answer_can_still_be_compacted(self):
        messages = [
            user("how?", "ann"),
            assistant("like this"),
            *[user(f"unrelated chatter number {i} " * 5, "bob") for i in range(200)],
        ]
        tokens = [rough_message_tokens(m) for m in messages]
        bounds = find_boundaries(
            messages,
            tokens,
            protect_first_n=0,
            protect_last_n=20,
            tail_budget_tokens=300,
            decayed=True,
        )
        assert bounds.pinned == (1,)
        assert 1 not in bounds.middle
        assert len(bounds.middle) > 150


class TestFindBoundaries:
    def test_middle_between_head_and_tail(self):
        messages = chat(40)
        bounds = find_boundaries(
            messages,
            [10] * 41,
            protect_first_n=3,
            protect_last_n=20,
            tail_budget_tokens=50,
            decayed=False,
        )
        assert bounds.head_end == 4
        assert bounds.tail_start == 41 - 8  # the 8-message floor beats the 50-token budget
        assert list(bounds.middle) == list(range(4, 33))

    def test_everything_protected_means_empty_middle(self):
        bounds = find_boundaries(
            chat(6),
            [10] * 7,
            protect_first_n=3,
            protect_last_n=20,
            tail_budget_tokens=1_000,
            decayed=False,
        )
        assert len(bounds.middle) == 0

    def test_tool_group_straddling_the_cut_goes_to_the_tail(self):
        messages = [system(), user("task")] + [assistant(f"a{i}") for i in range(10)]
        messages += [call("x"), result("x", "r" * 10), user("q"), assistant("done")]
        tokens = [5] * len(messages)
        bounds = find_boundaries(
            messages,
            tokens,
            protect_first_n=1,
            protect_last_n=3,
            tail_budget_tokens=15,
            decayed=False,
        )
        assert messages[bounds.tail_start].get("tool_calls")

    def test_latest_user_message_and_reply_pulled_into_tail(self):
        messages = [system(), user("old"), assistant("old reply"), user("the task")]
        messages += [call(f"c{i}") if i % 2 == 0 else result(f"c{i - 1}") for i in range(4)]
        bounds = find_boundaries(
            messages,
            [10] * len(messages),
            protect_first_n=0,
            protect_last_n=3,
            tail_budget_tokens=40,
            decayed=True,
        )
        assert (bounds.head_end, bounds.tail_start, bounds.pinned) == (1, 2, ())

    def test_anchors_far_back_are_pinned_and_the_tool_run_is_summarised(self):
        messages = [system(), user("old"), assistant("old reply"), user("the task")]
        messages += [call(f"c{i}") if i % 2 == 0 else result(f"c{i - 1}") for i in range(20)]
        bounds = find_boundaries(
            messages,
            [10] * len(messages),
            protect_first_n=0,
            protect_last_n=3,
            tail_budget_tokens=30,
            decayed=True,
        )
        assert bounds.pinned == (2, 3)
        assert bounds.middle[0] == 1
        assert all(i not in bounds.middle for i in (2, 3))
        assert messages[bounds.tail_start].get("tool_calls"), "no tool group is split"
