"""Window planning: whole turns leave, in batches, as a fixed id range."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime

from backend.chat.summarizer import split_by_budget
from backend.chat.window import JobBound, WindowPolicy, plan_eviction, tokens_of
from backend.domain.messages import Role, StoredMessage


def turns(count: int, *, start_id: int = 1, tokens: int = 10) -> list[StoredMessage]:
    messages = []
    for i in range(count * 2):
        role: Role = "user" if i % 2 == 0 else "assistant"
        messages.append(
            StoredMessage(
                id=start_id + i,
                session_id="s",
                role=role,
                content=f"{role} {i // 2}",
                turn_id=f"t{i // 2}",
                status="complete",
                created_at=datetime(2026, 1, 1, tzinfo=UTC),
                token_count=tokens,
            )
        )
    return messages


def test_nothing_leaves_while_the_window_fits() -> None:
    assert plan_eviction(turns(10), WindowPolicy(max_messages=20, batch=10)) is None
    assert plan_eviction(turns(500), WindowPolicy(max_messages=-1, batch=10)) is None


def test_overflow_evicts_down_to_max_minus_batch_between_turns() -> None:
    window = turns(11, start_id=100)  # 22 messages > 20
    eviction = plan_eviction(window, WindowPolicy(max_messages=20, batch=10))
    assert eviction is not None
    assert (eviction.first_message_id, eviction.last_message_id) == (100, 111)
    assert eviction.next_start_id == 112 and eviction.message_count == 12
    assert window[eviction.message_count].role == "user"


def test_cut_moves_forward_to_a_user_message() -> None:
    window = turns(11)[1:]  # starts with an assistant message: 21 messages
    eviction = plan_eviction(window, WindowPolicy(max_messages=20, batch=10))
    assert eviction is not None
    kept = window[eviction.message_count :]
    assert kept[0].role == "user" and len(kept) <= 10


def test_the_newest_turn_never_leaves() -> None:
    window = turns(3)
    eviction = plan_eviction(window, WindowPolicy(max_messages=1, batch=10))
    assert eviction is not None
    assert eviction.next_start_id == window[-2].id  # the newest user message stays


def test_token_pressure_evicts_early() -> None:
    window = turns(5, tokens=100)  # 1,000 tokens, 10 messages
    policy = WindowPolicy(max_messages=50, batch=10, normal_token_limit=700)
    eviction = plan_eviction(window, policy)
    assert eviction is not None and eviction.reason == "tokens"
    kept = window[eviction.message_count :]
    assert sum(m.token_count or 0 for m in kept) <= 350
    assert kept[0].role == "user"


def test_a_long_overflow_leaves_in_bounded_evictions() -> None:
    """A history that arrived at once leaves in whole turns a job reads in `parts` calls; the
    window still overflows, and the next plan takes the next turns."""
    window = turns(100, tokens=30)  # 200 messages, 6,000 tokens
    policy = WindowPolicy(max_messages=20, batch=10, job=JobBound(part_tokens=100, parts=2))
    eviction = plan_eviction(window, policy)
    assert eviction is not None
    assert eviction.first_message_id == 1 and eviction.message_count == 6  # 2 parts of 90
    assert window[eviction.message_count].role == "user"
    after = window[eviction.message_count :]
    following = plan_eviction(after, policy)
    assert following is not None and following.first_message_id == eviction.next_start_id
    unbounded = plan_eviction(window, WindowPolicy(max_messages=20, batch=10))
    assert unbounded is not None and unbounded.message_count == 190


def evictions(window: list[StoredMessage], policy: WindowPolicy) -> list[list[StoredMessage]]:
    """What leaves, job by job, until the window fits."""
    left = []
    while (eviction := plan_eviction(window, policy)) is not None:
        left.append(window[: eviction.message_count])
        window = window[eviction.message_count :]
    return left


def test_jobs_one_after_another_spend_the_calls_one_job_would() -> None:
    window = turns(100, tokens=30)  # parts of two turns (120 tokens): whole turns
    job = JobBound(part_tokens=120, parts=8)
    jobs = evictions(window, WindowPolicy(max_messages=20, batch=10, job=job))
    calls = [len(split_by_budget(evicted, job.part_tokens)) for evicted in jobs]
    everything = [m for evicted in jobs for m in evicted]
    assert [len(evicted) for evicted in jobs] == [32] * 5 + [30]
    assert max(calls) == 8 and everything == window[:190]
    assert sum(calls) == len(split_by_budget(everything, job.part_tokens)) == 48


def test_jobs_of_uneven_messages_cost_at_most_a_call_a_job_more() -> None:
    sizes = random.Random(7)
    window = [
        dataclasses.replace(message, token_count=sizes.randint(1, 300)) for message in turns(300)
    ]
    job = JobBound(part_tokens=500, parts=3)
    jobs = evictions(window, WindowPolicy(max_messages=20, batch=10, job=job))
    calls = [len(split_by_budget(evicted, job.part_tokens)) for evicted in jobs]
    everything = [m for evicted in jobs for m in evicted]
    assert everything == window[: len(everything)] and len(window) - len(everything) <= 20
    assert all(evicted[0].role == "user" for evicted in jobs)
    assert max(calls) <= 3 and len(jobs) > 20
    assert sum(calls) <= len(split_by_budget(everything, job.part_tokens)) + len(jobs) - 1


def test_a_turn_larger_than_the_bound_still_leaves() -> None:
    window = turns(30, tokens=500)
    job = JobBound(part_tokens=400, parts=2)  # the first turn alone takes two parts
    eviction = plan_eviction(window, WindowPolicy(max_messages=20, batch=10, job=job))
    assert eviction is not None and eviction.message_count == 2


def test_a_message_without_a_token_count_weighs_its_length() -> None:
    window = turns(30, tokens=10)
    long_reply = dataclasses.replace(window[1], content="x" * 4_000, token_count=None)
    window[1] = long_reply  # about 1,000 tokens: the first turn alone fills the job
    job = JobBound(part_tokens=500, parts=1)
    eviction = plan_eviction(window, WindowPolicy(max_messages=20, batch=10, job=job))
    assert eviction is not None and eviction.message_count == 2
    assert tokens_of(long_reply) == 1_001
