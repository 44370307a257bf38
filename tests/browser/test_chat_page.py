"""The chat page in a real browser: streaming, tool cards, stop, reload and
dropped connections, stored history."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from tests.browser.chat_actions import last_reply, send
from tests.fakes.openai_server import Reply
from tests.support.logs import assert_no_error_logged

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ANSWER = " ".join(f"word{i}" for i in range(1, 31)) + "."


def reply_text(page: Page) -> str:
    return " ".join(t.strip() for t in last_reply(page).locator(".round-text").all_text_contents() if t.strip())


def test_streamed_text_and_tool_cards_then_history(page: Page, stack, log_in, browser_user, fake_model, screenshot):
    browser_user("ada", staff=True)
    model = fake_model("browser-tools", [
        Reply(text="Let me look that up.", tool_calls=[("slow_sleep", {"ms": 2500}), ("echo", {"text": "hello"})],
              chunk_delay_s=0.05),
        Reply(text=ANSWER, chunk_delay_s=0.1),
    ])
    log_in(page, "ada")
    send(page, model, "Nap, then echo hello")

    reply = last_reply(page)
    slow = reply.locator(".tool-card[data-tool-name=slow_sleep]")
    echo = reply.locator(".tool-card[data-tool-name=echo]")
    # While the slow tool runs: its card is open with a running indicator,
    # and the quick one already shows its output.
    expect(slow).to_have_attribute("data-status", "running")
    expect(slow.locator(".spinner")).to_be_visible()
    expect(slow).to_have_attribute("open", "")
    expect(slow.locator(".tool-args")).to_contain_text('"ms": 2500')
    expect(echo).to_have_attribute("data-status", "success")
    expect(echo.locator(".tool-output")).to_contain_text("hello")
    expect(reply.locator(".round-text").first).to_have_text("Let me look that up.")
    expect(page.locator("#stop-button")).to_be_visible()
    screenshot(page, "chat-mid-run")

    # The answer streams in: seen part-way before it is whole.
    page.wait_for_function(
        """() => {
            const texts = [...document.querySelectorAll('article.assistant:last-of-type .round-text')];
            const t = texts.length ? texts[texts.length - 1].textContent : '';
            return t.startsWith('word1 ') && !t.endsWith('word30.');
        }"""
    )
    expect(reply).to_have_attribute("data-status", "completed")
    assert reply_text(page) == f"Let me look that up. {ANSWER}"
    expect(slow).to_have_attribute("data-status", "success")
    expect(slow.locator(".tool-duration")).to_have_text(re.compile(r"^\d+(\.\d)? s$|^\d+ ms$"))
    # Folded once the run ends; the answer stays in view.
    expect(slow).not_to_have_attribute("open", "")
    expect(echo).not_to_have_attribute("open", "")
    expect(page.locator("#stop-button")).to_be_hidden()
    run_id = reply.get_attribute("data-run-id")

    # Stored history after a reload: the same rounds, from Postgres.
    page.reload()
    stored = last_reply(page)
    expect(stored).to_have_attribute("data-status", "completed")
    assert reply_text(page) == f"Let me look that up. {ANSWER}"
    expect(stored.locator(".tool-card[data-tool-name=slow_sleep]")).to_have_attribute("data-status", "success")
    stored.locator(".tool-card[data-tool-name=echo] summary").click()
    expect(stored.locator(".tool-card[data-tool-name=echo] .tool-output")).to_contain_text("hello")
    expect(page.locator("#conversation-list .conversation.current")).to_contain_text("Nap, then echo hello")

    # The same run as a trace in the admin.
    page.goto(f"{stack.http_url}/admin/conversations/run/{run_id}/change/")
    expect(page.locator("body")).to_contain_text("slow_sleep")
    screenshot(page, "admin-run-trace", full_page=True)


def test_stop_button_cancels_a_slow_run(page: Page, log_in, browser_user, fake_model):
    browser_user("bob")
    long_answer = " ".join(f"slow{i}" for i in range(200))
    model = fake_model("browser-slow", [Reply(text=long_answer, chunk_delay_s=0.2)])
    log_in(page, "bob")
    send(page, model, "Tell me a long story")

    reply = last_reply(page)
    expect(reply.locator(".round-text").first).to_contain_text("slow2 ")
    page.click("#stop-button")
    expect(reply).to_have_attribute("data-status", "cancelled")
    expect(reply.locator(".run-outcome")).to_have_text("Stopped: the run was cancelled.")
    expect(page.locator("#stop-button")).to_be_hidden()
    kept = reply_text(page)
    assert kept.startswith("slow0 slow1 slow2") and len(kept) < len(long_answer)

    page.reload()
    stored = last_reply(page)
    expect(stored).to_have_attribute("data-status", "cancelled")
    expect(stored.locator(".run-outcome")).to_have_text("Stopped: the run was cancelled.")
    assert reply_text(page).startswith("slow0 slow1 slow2")


def test_reload_mid_run_resumes_without_duplicated_text(page: Page, stack, log_in, browser_user, fake_model):
    browser_user("cy")
    model = fake_model("browser-reload", [
        Reply(text="One moment.", tool_calls=[("echo", {"text": "x"})]),
        Reply(text=ANSWER, chunk_delay_s=0.12),
    ])
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    log_in(page, "cy")
    send(page, model, "Count for me")
    expect(last_reply(page).locator(".round-text").last).to_contain_text("word5 ")

    server_log = stack.process("server")
    logged_before = len(server_log.log())
    page.reload()
    reply = last_reply(page)
    # Drawn at once from the saved state, then resumed after its last seq.
    expect(reply.locator(".round-text").last).to_contain_text("word5 ")
    expect(reply).to_have_attribute("data-status", "completed")
    assert reply_text(page) == f"One moment. {ANSWER}"
    assert len(sockets) == 2 and "?after=" not in sockets[0]
    assert re.search(r"\?after=\d+$", sockets[1]), sockets
    expect(reply.locator(".tool-card[data-tool-name=echo]")).to_have_attribute("data-status", "success")
    # A reload is routine: the socket it dropped is logged at INFO at most.
    logged = server_log.log()[logged_before:]
    assert_no_error_logged(logged)


def test_dropped_connection_reconnects_from_last_seq(page: Page, log_in, browser_user, fake_model):
    browser_user("dee")
    model = fake_model("browser-drop", [Reply(text=ANSWER, chunk_delay_s=0.1)])
    urls: list[str] = []
    dropped = {"done": False}

    def route(ws: WebSocketRoute) -> None:
        urls.append(ws.url)
        server = ws.connect_to_server()
        if dropped["done"]:
            return  # later connections pass through untouched
        forwarded = {"n": 0}

        def from_server(message) -> None:
            ws.send(message)
            forwarded["n"] += 1
            if forwarded["n"] == 6:  # mid-stream: the network "drops"
                dropped["done"] = True
                ws.close()
                server.close()

        server.on_message(from_server)

    page.route_web_socket(re.compile(r"/ws/runs/"), route)
    log_in(page, "dee")
    send(page, model, "Count again")
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    assert reply_text(page) == ANSWER
    assert len(urls) >= 2 and re.search(r"\?after=\d+$", urls[1]), urls
