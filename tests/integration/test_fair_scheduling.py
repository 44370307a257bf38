"""Fair scheduling with real workers: with each user capped at one running
step, a user's backlog runs one step at a time across the fleet (two LLM
worker processes here), and another user's run starts while the backlog
waits — parked in Redis, not in the broker's queue."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from chatforge.conversations.models import LlmTurn, Run
from chatforge.scheduling.slots import PREFIX
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient
from tests.support.stack import private_stack, start_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FAIR_REDIS_URL = settings.REDIS_URL.rsplit("/", 1)[0] + "/6"


@pytest.fixture
def fair_stack(django_db_blocker, fake_llm):
    from tests.conftest import _test_database_url

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_stack(database_url=database_url, redis_url=FAIR_REDIS_URL, llm_base_url=fake_llm.base_url,
                       extra_env={"CHATFORGE_USER_MAX_RUNNING_STEPS": "1"}) as stack:
        # A second LLM worker process: the cap must hold across processes, as across hosts.
        stack.processes.append(start_worker("llm2", queues="llm", pool="gevent", concurrency=20,
                                            env=stack.env, log_dir=stack.log_dir))
        yield stack


def test_a_backlog_runs_one_step_at_a_time_and_another_user_is_not_held_up(fair_stack, fake_llm, make_user):
    fake_llm.add_script("fair-slow", lambda body: Reply(text="Slow answer.", delay_s=0.8))
    _, heavy_token = make_user()
    _, light_token = make_user()
    heavy, light = ApiClient(fair_stack.http_url, heavy_token), ApiClient(fair_stack.http_url, light_token)
    heavy_runs = [heavy.post_message(heavy.new_conversation(), f"job {i}", model="fair-slow")["run_id"]
                  for i in range(4)]
    broker = redis.Redis.from_url(FAIR_REDIS_URL)
    assert broker.llen("llm") <= 1  # three of the four wait in the scheduler's line, not in the queue
    light_run = light.post_message(light.new_conversation(), "quick one", model="fair-slow")["run_id"]

    everything = [*heavy_runs, light_run]
    wait_for(lambda: Run.objects.filter(pk__in=everything, status="completed").count() == len(everything),
             timeout=60, what="every run to complete", process=fair_stack.process("llm"))

    turns = {str(t.run_id): t for t in LlmTurn.objects.filter(run_id__in=everything, iteration=0)}
    spans = sorted((turns[r].started_at, turns[r].finished_at) for r in heavy_runs)
    for (_, finished), (started, _) in zip(spans, spans[1:], strict=False):
        assert started >= finished, f"two steps of the capped user ran at once: {spans}"
    # The light user's run did not wait for the heavy user's backlog to drain.
    assert turns[light_run].started_at < max(started for started, _ in spans)
    assert all(t.worker.startswith(("llm@", "llm2@")) for t in turns.values())  # the node that ran each step
    assert not list(broker.scan_iter(PREFIX + "sem:*")) or all(
        broker.zcard(key) == 0 for key in broker.scan_iter(PREFIX + "sem:*"))  # every slot given back
