"""Tool result caching (docs/tools.md, "Caching"): the key and the store
(``orchestration/services/tool_cache.py``) against the real Redis cache,
whole runs driven step by step in this process (the tasks delivered by
hand, the fake OpenAI server as the model), and one run end to end through
the real workers.

Every test puts a fresh ``nonce`` in its calls' arguments: the cache lives
in Redis, which the database flush between tests does not empty."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
import redis
from django.conf import settings as django_settings
from django.core.cache import caches
from prometheus_client import REGISTRY

from chatforge.catalog.catalog import get_catalog
from chatforge.conversations.models import Conversation, Message, Run, ToolInvocation
from chatforge.scheduling.limits import forget_cached_limits
from chatforge.scheduling.models import ToolLimit, UsageCounter
from orchestration import tasks
from orchestration.event_log import get_event_log
from orchestration.services.runs import RunOptions, run_start
from orchestration.services.tool_cache import KEY_PREFIX, CallCache, call_cache
from orchestration.services.tools_by_hand import run_tool_by_hand
from tests.fakes.openai_server import Reply, tool_results
from tests.support.client import ApiClient, follow_run
from tests.support.files import stored_file
from tests.support.tools import cached_lookup_runs
from tools.base import Tool, ToolContext, ToolPolicy
from tools.executor import ToolResult
from tools.files import FILE_ID, FileInfo
from tools.sandbox_limits import SandboxLimits

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def engine(in_process_engine):
    """The engine in the test's process (tests/engine/conftest.py)."""


@pytest.fixture
def nonce() -> str:
    return uuid.uuid4().hex


def _handler(args: dict, ctx: ToolContext) -> dict:
    return {"echo": args}


def _tool(*, name: str = "lookup_words", version: str = "", description: str = "Looks words up.",
          parameters: dict | None = None, scope: str = "user", ttl: float = 300, sandbox=None) -> Tool:
    return Tool(name=name, description=description, handler=_handler, version=version,
                parameters=parameters or {"type": "object", "properties": {"word": {"type": "string"},
                                                                           "lang": {"type": "string"}}},
                policy=ToolPolicy(cache_ttl_s=ttl, cache_scope=scope, sandbox=sandbox))


def _key(tool: Tool, arguments, user_id: int = 1, conversation_id: str = "c1") -> str:
    cache = call_cache(tool, arguments, user_id=user_id, conversation_id=conversation_id)
    assert cache is not None
    return cache.key


def _lookups(tool: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("chatforge_tool_cache_lookups_total", {"tool": tool, "outcome": outcome}) or 0.0


def _success(tool: Tool, value, ms: int = 40) -> ToolResult:
    return ToolResult(tool_name=tool.name, status="success", result=value, execution_time_ms=ms)


def _wait_for(condition, *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


# --- the key ----------------------------------------------------------------


def test_the_same_arguments_in_another_order_or_spacing_make_the_same_key_and_others_another():
    tool = _tool()
    assert _key(tool, '{"word": "cat", "lang": "en"}') == _key(tool, '{"lang":"en","word":"cat"}')
    assert _key(tool, {"lang": "en", "word": "cat"}) == _key(tool, '{"word":"cat","lang":"en"}')
    assert _key(tool, '{"word": "cat", "lang": "en"}') != _key(tool, '{"word": "cat", "lang": "fr"}')


def test_the_key_changes_with_the_tools_version_description_and_schema():
    base = _key(_tool(), '{"word": "cat"}')
    assert _key(_tool(version="2"), '{"word": "cat"}') != base
    assert _key(_tool(description="Looks words up, better."), '{"word": "cat"}') != base
    assert _key(_tool(parameters={"type": "object", "properties": {"word": {"type": "string", "maxLength": 9}}}),
                '{"word": "cat"}') != base
    assert _key(_tool(), '{"word": "cat"}') == base


def test_user_scope_keys_by_user_and_global_scope_shares_between_users():
    user = _tool(scope="user")
    assert _key(user, '{"word": "cat"}', user_id=1) != _key(user, '{"word": "cat"}', user_id=2)
    shared = _tool(scope="global")
    assert _key(shared, '{"word": "cat"}', user_id=1) == _key(shared, '{"word": "cat"}', user_id=2)


def test_the_key_holds_no_argument_in_plain_text_and_names_the_tool(nonce):
    key = _key(_tool(), {"word": f"secret-{nonce}"})
    assert key.startswith(f"{KEY_PREFIX}:lookup_words:") and nonce not in key


def test_no_cache_without_a_ttl_for_an_unknown_tool_or_for_arguments_that_are_no_object():
    assert call_cache(_tool(ttl=0), "{}", user_id=1, conversation_id="c") is None
    assert call_cache(None, "{}", user_id=1, conversation_id="c") is None
    assert call_cache(_tool(), "[1, 2]", user_id=1, conversation_id="c") is None
    assert call_cache(_tool(), "{not json", user_id=1, conversation_id="c") is None


def test_a_not_idempotent_tool_cannot_declare_a_ttl():
    with pytest.raises(ValueError, match="only for read-only and idempotent tools"):
        ToolPolicy(cache_ttl_s=60, side_effects="not_idempotent")
    assert ToolPolicy(cache_ttl_s=60, side_effects="idempotent").cached


def test_a_tool_reading_the_conversations_files_is_keyed_by_the_conversation_and_its_files(engine, make_user):
    user = make_user()[0]
    conversation, other = Conversation.objects.create(user=user), Conversation.objects.create(user=user)
    reader = _tool(name="read_words", scope="global",
                   parameters={"type": "object", "properties": {"file_id": FILE_ID}})
    doc = stored_file(user, conversation=conversation)
    args = {"file_id": str(doc.pk)}
    before = _key(reader, args, user_id=user.pk, conversation_id=str(conversation.pk))
    assert _key(reader, args, user_id=user.pk, conversation_id=str(other.pk)) != before
    stored_file(user, conversation=conversation, name="more.txt")
    assert _key(reader, args, user_id=user.pk, conversation_id=str(conversation.pk)) != before


def test_a_sandboxed_tool_is_keyed_by_the_conversation_whatever_its_scope(engine, make_user):
    user = make_user()[0]
    one, two = Conversation.objects.create(user=user), Conversation.objects.create(user=user)
    script = _tool(name="sum_script", scope="global", sandbox=SandboxLimits())
    args = {"word": "same"}
    assert (_key(script, args, user_id=user.pk, conversation_id=str(one.pk))
            != _key(script, args, user_id=user.pk, conversation_id=str(two.pk)))
    assert (_key(script, args, user_id=user.pk, conversation_id=str(one.pk))
            == _key(script, args, user_id=user.pk, conversation_id=str(one.pk)))


# --- the store (the real Redis cache) -----------------------------------------


def test_a_stored_success_is_served_marked_cached_and_counted_as_a_hit(nonce):
    tool = _tool(name="lookup_hits")
    cache = call_cache(tool, {"word": nonce}, user_id=1, conversation_id="c")
    hits, misses = _lookups("lookup_hits", "hit"), _lookups("lookup_hits", "miss")

    assert cache.lookup() is None
    assert cache.store(_success(tool, {"meaning": "a cat"}))
    served = cache.lookup()

    assert served is not None and served.cached and served.success
    assert served.result == {"meaning": "a cat"} and served.output_text() == '{"meaning":"a cat"}'
    assert served.as_dict()["cached"] is True and "cached" not in _success(tool, 1).as_dict()
    assert (_lookups("lookup_hits", "hit"), _lookups("lookup_hits", "miss")) == (hits + 1, misses + 1)


def test_errors_results_with_files_and_served_results_are_never_stored(nonce):
    tool = _tool(name="lookup_never")
    cache = call_cache(tool, {"word": nonce}, user_id=1, conversation_id="c")
    error = ToolResult(tool_name=tool.name, status="error", error="Error: it broke.")
    timeout = ToolResult(tool_name=tool.name, status="timeout", error="Error: too slow.")
    saved = FileInfo(id=str(uuid.uuid4()), name="a.txt", content_type="text/plain", kind="document", size=1,
                     text_status="ready")
    served = ToolResult(tool_name=tool.name, status="success", result=1, cached=True)

    assert not cache.store(error) and not cache.store(timeout)
    assert not cache.store(_success(tool, "made a file"), [saved]) and not cache.store(served)
    assert cache.lookup() is None


def test_a_stored_result_expires_after_its_ttl(nonce):
    tool = _tool(name="lookup_brief", ttl=1)
    cache = call_cache(tool, {"word": nonce}, user_id=1, conversation_id="c")
    assert cache.store(_success(tool, "short-lived"))
    assert cache.lookup() is not None

    _wait_for(lambda: caches["default"].get(cache.key) is None, timeout_s=10, what="the entry's TTL to pass")

    assert cache.lookup() is None


def test_a_ttl_below_a_second_still_expires(nonce):
    tool = _tool(name="lookup_briefer", ttl=0.2)
    cache = call_cache(tool, {"word": nonce}, user_id=1, conversation_id="c")
    assert cache.store(_success(tool, "short-lived"))
    ttl = redis.Redis.from_url(django_settings.REDIS_URL).ttl(f":1:{cache.key}")  # Django's key prefix
    assert ttl == 1


def test_a_cache_outage_is_a_miss_and_a_skipped_store_never_a_failure(settings, nonce):
    settings.CACHES = {"default": {"BACKEND": "chatforge.db.redis_cache.ReusingRedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0"}}
    tool = _tool(name="lookup_down")
    cache = call_cache(tool, {"word": nonce}, user_id=1, conversation_id="c")
    before = _lookups("lookup_down", "unavailable")

    assert cache.lookup() is None
    assert not cache.store(_success(tool, "not kept"))
    assert _lookups("lookup_down", "unavailable") == before + 1


def test_in_embedded_modes_memory_cache_a_stored_result_is_served_too(settings, nonce):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    tool = _tool(name="lookup_embedded")
    cache = call_cache(tool, {"word": nonce}, user_id=1, conversation_id="c")

    assert cache.store(_success(tool, ["in", "memory"]))
    served = cache.lookup()

    assert served is not None and served.cached and served.result == ["in", "memory"]


def test_a_value_of_another_shape_under_the_key_is_a_miss(nonce):
    tool = _tool(name="lookup_odd")
    cache = CallCache(tool=tool, key=f"{KEY_PREFIX}:lookup_odd:{nonce}")
    for odd in ("text", {"status": "error", "result": 1, "execution_time_ms": 1}, {"status": "success"}):
        caches["default"].set(cache.key, odd, timeout=60)
        assert cache.lookup() is None


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- runs, step by step in this process ----------------------------------------


def _start(user, model: str, *, tools: list[str]) -> Run:
    return run_start(user=user, conversation=Conversation.objects.create(user=user), content="Look it up.",
                     options=RunOptions(model=model, tools=tools))


def _run_through(run: Run) -> None:
    tasks.llm_turn(str(run.id), 0)
    for call in ToolInvocation.objects.filter(run=run).order_by("position").values_list("tool_call_id", flat=True):
        tasks.tool_call(str(run.id), call)
    tasks.llm_turn(str(run.id), 1)
    run.refresh_from_db()
    assert run.status == "completed", run.error


def _tool_output(run: Run) -> dict:
    (event,) = [e["data"] for e in get_event_log().read(str(run.id), after=0) if e["type"] == "tool_output"]
    return event


def _round_result(run: Run) -> dict:
    (result,) = Message.objects.get(run=run, role="assistant").tool_rounds[0]["results"]
    return result


def _script(fake_llm, model: str, tool: str, args: dict) -> None:
    fake_llm.add_script(model, [Reply(text="Looking.", tool_calls=[(tool, args)]), Reply(text="Found it.")])


def test_a_second_runs_identical_call_is_served_from_the_cache_marked_everywhere(engine, fake_llm, make_user,
                                                                                  nonce):
    user = make_user()[0]
    args = {"word": "cat", "nonce": nonce}
    _script(fake_llm, "cache-twice", "cached_lookup", args)
    first, second = (_start(user, "cache-twice", tools=["cached_lookup"]) for _ in range(2))
    hits = _lookups("cached_lookup", "hit")

    _run_through(first)
    _run_through(second)

    assert cached_lookup_runs(**args) == 1
    assert "cached" not in _tool_output(first) and "cached" not in _round_result(first)
    assert "cached" not in ToolInvocation.objects.get(run=first).result
    event = _tool_output(second)
    assert event["cached"] is True and event["status"] == "success"
    assert event["output"] == _tool_output(first)["output"] == '{"word":"cat","runs":1}'
    inv = ToolInvocation.objects.get(run=second)
    assert inv.status == "success" and inv.result["cached"] is True and inv.result["result"] == {"word": "cat",
                                                                                                   "runs": 1}
    assert _round_result(second)["cached"] is True
    assert _lookups("cached_lookup", "hit") == hits + 1
    # The model of the second run read the same output as the first.
    (sent,) = tool_results(fake_llm.requests_for("cache-twice")[-1])
    assert sent["content"] == '{"word":"cat","runs":1}'


def test_different_arguments_run_the_tool_again(engine, fake_llm, make_user, nonce):
    user = make_user()[0]
    _script(fake_llm, "cache-cat", "cached_lookup", {"word": "cat", "nonce": nonce})
    _script(fake_llm, "cache-dog", "cached_lookup", {"word": "dog", "nonce": nonce})

    _run_through(_start(user, "cache-cat", tools=["cached_lookup"]))
    dog = _start(user, "cache-dog", tools=["cached_lookup"])
    _run_through(dog)

    assert cached_lookup_runs(word="cat", nonce=nonce) == cached_lookup_runs(word="dog", nonce=nonce) == 1
    assert "cached" not in _tool_output(dog)


def test_user_scope_is_per_user_and_global_scope_shared(engine, fake_llm, make_user, nonce):
    alice, bob = make_user()[0], make_user()[0]
    mine, shared = {"word": "mine", "nonce": nonce}, {"word": "shared", "nonce": nonce}
    _script(fake_llm, "cache-user", "cached_lookup", mine)
    _script(fake_llm, "cache-global", "cached_lookup_global", shared)

    for user in (alice, bob):
        _run_through(_start(user, "cache-user", tools=["cached_lookup"]))
    bobs = _start(bob, "cache-global", tools=["cached_lookup_global"])
    _run_through(_start(alice, "cache-global", tools=["cached_lookup_global"]))
    _run_through(bobs)

    assert cached_lookup_runs(**mine) == 2  # each user's own
    assert cached_lookup_runs(**shared) == 1 and _tool_output(bobs)["cached"] is True


def test_an_error_is_not_stored_and_the_next_call_runs_again(engine, fake_llm, make_user, nonce):
    user = make_user()[0]
    args = {"word": "broken", "nonce": nonce, "fail": True}
    _script(fake_llm, "cache-error", "cached_lookup", args)

    runs = [_start(user, "cache-error", tools=["cached_lookup"]) for _ in range(2)]
    for run in runs:
        _run_through(run)

    assert cached_lookup_runs(**args) == 2
    assert [_tool_output(run)["status"] for run in runs] == ["error", "error"]
    assert "cached" not in _tool_output(runs[1])


def test_a_result_that_saved_files_is_not_stored(engine, fake_llm, make_user, nonce):
    user = make_user()[0]
    args = {"word": "report", "nonce": nonce, "save": True}
    _script(fake_llm, "cache-files", "cached_lookup", args)

    runs = [_start(user, "cache-files", tools=["cached_lookup"]) for _ in range(2)]
    for run in runs:
        _run_through(run)

    assert cached_lookup_runs(**args) == 2
    assert all(_tool_output(run).get("files") and "cached" not in _tool_output(run) for run in runs)


def test_a_cached_call_uses_none_of_the_tools_daily_quota(engine, fake_llm, make_user, nonce):
    user = make_user()[0]
    ToolLimit.objects.create(tool_name="cached_lookup", daily_quota_per_user=1)
    forget_cached_limits()
    args = {"word": "quota", "nonce": nonce}
    _script(fake_llm, "cache-quota", "cached_lookup", args)

    runs = [_start(user, "cache-quota", tools=["cached_lookup"]) for _ in range(3)]
    for run in runs:
        _run_through(run)

    assert [_tool_output(run).get("cached", False) for run in runs] == [False, True, True]
    assert UsageCounter.objects.get(user=user, kind="tool:cached_lookup").used == 1
    forget_cached_limits()


def test_a_tool_run_by_hand_always_runs(engine, make_user, nonce):
    user = make_user()[0]
    tool = get_catalog().get("cached_lookup_global")
    args = {"word": "by-hand", "nonce": nonce}
    call_cache(tool, args, user_id=user.pk, conversation_id="c").store(_success(tool, "stored by a run"))

    results = [run_tool_by_hand(tool, args, user_id=user.pk) for _ in range(2)]

    assert cached_lookup_runs(**args) == 2 and not any(result.cached for result in results)


def test_the_admins_run_page_names_the_calls_served_from_the_cache(engine, fake_llm, make_user, nonce, admin_client):
    user = make_user()[0]
    _script(fake_llm, "cache-admin", "cached_lookup", {"word": "admin", "nonce": nonce})
    first, second = (_start(user, "cache-admin", tools=["cached_lookup"]) for _ in range(2))
    _run_through(first)
    _run_through(second)
    call_id = ToolInvocation.objects.get(run=second).tool_call_id

    page = admin_client.get(f"/admin/conversations/run/{second.pk}/change/").content.decode()
    plain = admin_client.get(f"/admin/conversations/run/{first.pk}/change/").content.decode()

    assert "Served from the cache" in page and f'href="#call-{call_id}">cached_lookup</a>' in page
    assert f'href="#call-{ToolInvocation.objects.get(run=first).tool_call_id}">' not in plain
    assert "served from the tool result cache: the tool did not run" in page  # on the call itself
    assert "served from the tool result cache" not in plain


# --- end to end, through the real workers --------------------------------------


@pytest.mark.integration
def test_through_the_workers_a_second_runs_identical_call_is_cached(stack, fake_llm, make_user, nonce):
    args = {"word": "e2e", "nonce": nonce}
    fake_llm.add_script("e2e-cache", [Reply(text="Looking.", tool_calls=[("cached_lookup_global", args)]),
                                      Reply(text="Found it.")])
    outputs = []
    for _ in range(2):
        _, token = make_user()
        api = ApiClient(stack.http_url, token)
        accepted = api.post_message(api.new_conversation(), "look it up", model="e2e-cache",
                                    tools=["cached_lookup_global"])
        events = follow_run(stack.ws_url, accepted["run_id"], token)
        assert events[-1]["type"] == "run.completed", stack.logs()
        (output,) = [e["data"] for e in events if e["type"] == "tool_output"]
        outputs.append((accepted["run_id"], output))

    (first_run, first), (second_run, second) = outputs
    assert "cached" not in first and second["cached"] is True
    assert second["output"] == first["output"] == '{"word":"e2e","runs":1}'
    assert cached_lookup_runs(**args) == 1
    assert ToolInvocation.objects.get(run_id=second_run).result["cached"] is True
    (result,) = Message.objects.get(run_id=second_run, role="assistant").tool_rounds[0]["results"]
    assert result["cached"] is True
