"""Files on the chat page in a real browser (docs/web.md, "Files"): attaching
by the button, by pasting an image and by dropping a file, each uploaded at
once with its progress, then a chip (removable; a refused file says the
server's reason); sending them with the demo model, which says what arrived;
the files on the sent message, after a reload too; Edit keeping them; a
document whose text could not be read; files returned by a tool on its card
(live and stored); a phone's width in the dark theme."""

from __future__ import annotations

import base64
import re
import struct
import zlib

import pytest
from playwright.sync_api import Page, Route, expect

from chatforge.conversations.models import Conversation, Message
from chatforge.files.message_parts import file_parts
from chatforge.files.models import StoredFile
from tests.browser.chat_actions import last_reply, open_chat, send
from tests.browser.readability import sticking_out, unreadable
from tests.fakes.openai_server import Reply
from tests.support.files import image_file, stored_file
from tests.support.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NOTES = b"Quarterly notes: revenue grew in every region, and the new office opens in March.\n"
CSV = b"region,revenue\nnorth,120\nsouth,95\n"


def png(width: int, height: int) -> bytes:
    """A real PNG (an RGB gradient), so a thumbnail has something to show."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        checksum = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", checksum)

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, 160)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


SCREENSHOT = png(160, 100)

# Pastes a PNG (base64) into the message box as a screenshot arrives: a
# ClipboardEvent whose DataTransfer holds one image File named "image.png".
PASTE_JS = """
([selector, data]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], "image.png", { type: "image/png" }));
  const event = new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true });
  document.querySelector(selector).dispatchEvent(event);
  return event.defaultPrevented;
}
"""

# Drops a file on an element: dragenter, dragover and drop with one DataTransfer.
DROP_JS = """
([selector, name, type, text]) => {
  const transfer = new DataTransfer();
  transfer.items.add(new File([text], name, { type }));
  const target = document.querySelector(selector);
  for (const kind of ["dragenter", "dragover", "drop"]) {
    target.dispatchEvent(new DragEvent(kind, { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }
}
"""


def choose(page: Page, name: str, mime: str, data: bytes) -> None:
    """Picks a file with the composer's file input (what the button opens)."""
    page.set_input_files("#file-input", files=[{"name": name, "mimeType": mime, "buffer": data}])


def chip(page: Page, name: str):
    return page.locator(f'#attachment-list .attachment[data-name="{name}"]')


def image_loaded(locator) -> bool:
    """The <img> has decoded pixels (its source answered with an image)."""
    return locator.evaluate("(img) => img.complete && img.naturalWidth > 0")


def server_refusal(page: Page, stack, name: str, data: bytes, mime: str) -> str:
    """The message the upload API gives for this file, asked directly."""
    token = page.locator('meta[name="csrf-token"]').get_attribute("content")
    response = page.request.post(f"{stack.http_url}/api/files/", headers={"X-CSRFToken": token},
                                 multipart={"file": {"name": name, "mimeType": mime, "buffer": data}})
    assert 400 <= response.status < 500, (response.status, response.text())
    return response.json()["error"]["message"]


class HeldUploads:
    """Holds each POST /api/files/ until released, so the page's upload is
    seen in progress without depending on how fast the machine is. One
    that reaches the route after ``release`` goes through at once."""

    def __init__(self, page: Page) -> None:
        self.routes: list[Route] = []
        self.holding = True
        page.route("**/api/files/", self._hold)

    def _hold(self, route: Route) -> None:
        if self.holding and route.request.method == "POST":
            self.routes.append(route)
        else:
            route.continue_()

    def release(self) -> None:
        self.holding = False
        for route in self.routes:
            route.continue_()
        self.routes.clear()


def test_attach_paste_drop_remove_send_and_reload(page: Page, stack, browser_user, screenshot):
    user = browser_user("fay")
    open_chat(page, stack, "fay", model="demo")
    attach = page.locator("#attach-button")
    expect(attach).to_have_accessible_name("Attach files")
    # Reached from the message box with the keyboard.
    page.focus("#message-input")
    page.keyboard.press("Shift+Tab")
    expect(attach).to_be_focused()

    # By the button (it opens the file picker): the upload shows its
    # progress, and Send waits for it.
    held = HeldUploads(page)
    with page.expect_file_chooser() as chooser:
        page.keyboard.press("Enter")
    assert chooser.value.is_multiple()
    chooser.value.set_files(files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": NOTES}])
    notes = chip(page, "notes.txt")
    expect(notes).to_have_attribute("data-state", "uploading")
    expect(notes.locator("progress")).to_be_visible()
    expect(notes.locator("progress")).to_have_accessible_name("Uploading notes.txt")
    expect(page.locator("#send-button")).to_be_disabled()
    held.release()
    expect(notes).to_have_attribute("data-state", "done")
    expect(notes.locator("progress")).to_have_count(0)
    expect(notes.locator(".attachment-meta")).to_have_text(f"{len(NOTES)} bytes · text/plain")
    expect(page.locator("#send-button")).to_be_enabled()

    # A pasted screenshot: attached (not pasted as text), with its thumbnail.
    assert page.evaluate(PASTE_JS, ["#message-input", base64.b64encode(SCREENSHOT).decode()]) is True
    pasted = page.locator("#attachment-list .attachment").nth(1)
    expect(pasted).to_have_attribute("data-name", re.compile(r"^Pasted image .+\.png$"))
    expect(pasted).to_have_attribute("data-state", "done")
    thumb = pasted.locator("img.attachment-thumb")
    expect(thumb).to_be_visible()
    assert image_loaded(thumb)
    assert page.input_value("#message-input") == ""

    # A file dropped on the conversation.
    page.evaluate(DROP_JS, ["#history", "data.csv", "text/csv", CSV.decode()])
    expect(chip(page, "data.csv")).to_have_attribute("data-state", "done")
    expect(page.locator("#attachment-list .attachment")).to_have_count(3)

    # Removed before sending: gone from the composer and from the server.
    csv_id = chip(page, "data.csv").get_attribute("data-file-id")
    chip(page, "data.csv").get_by_role("button", name="Remove data.csv").click()
    expect(page.locator("#attachment-list .attachment")).to_have_count(2)
    wait_for(lambda: not StoredFile.objects.filter(pk=csv_id).exists(), timeout=20,
             what="the removed file to be deleted")

    # A refused file says the server's reason.
    reason = server_refusal(page, stack, "empty.txt", b"", "text/plain")
    choose(page, "empty.txt", "text/plain", b"")
    refused = chip(page, "empty.txt")
    expect(refused).to_have_attribute("data-state", "error")
    expect(refused.locator(".attachment-error")).to_have_text(reason)
    screenshot(page, "chat-files-composer")
    refused.get_by_role("button", name="Remove empty.txt").click()
    expect(refused).to_have_count(0)

    # Sent: the message shows its files; the demo model says what arrived.
    page.fill("#message-input", "What is in these?")
    page.keyboard.press("Enter")
    expect(page.locator("#attachment-list .attachment")).to_have_count(0)
    sent = page.locator("article.user").last
    expect(sent.locator(".message-files .file-item")).to_have_count(2)
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    expect(reply.locator(".round-text").last).to_contain_text("You attached notes.txt (text/plain")
    expect(reply.locator(".round-text").last).to_contain_text("You attached 1 image.")
    conversation = Conversation.objects.get(user=user)
    files = {f.name: f for f in StoredFile.objects.filter(user=user)}
    assert len(files) == 2 and "notes.txt" in files, files  # data.csv was deleted; empty.txt never stored
    assert {f.conversation_id for f in files.values()} == {conversation.pk}
    assert all(f.message_id for f in files.values())
    screenshot(page, "chat-files")

    # After a reload: the same files, from the server, with the session cookie.
    page.reload()
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    stored = page.locator("article.user").last
    image = stored.locator(".file-item.image .file-thumb img")
    expect(image).to_be_visible()
    page.wait_for_function("(img) => img.complete && img.naturalWidth === 160", arg=image.element_handle())
    document = stored.locator(".file-item.document .file-chip")
    expect(document).to_contain_text("notes.txt")
    expect(document.locator(".file-meta")).to_have_text(f"{len(NOTES)} bytes")
    href = document.get_attribute("href")
    assert href == f"/api/files/{files['notes.txt'].pk}/content/"
    assert page.request.get(f"{stack.http_url}{href}").body() == NOTES
    assert stored.locator(".file-thumb").get_attribute("target") == "_blank"

    # In the conversation now: an upload names it, and files go without text.
    page.select_option("#model-select", "demo")
    choose(page, "more.csv", "text/csv", CSV)
    expect(chip(page, "more.csv")).to_have_attribute("data-state", "done")
    more = StoredFile.objects.get(user=user, name="more.csv")
    assert more.conversation_id == conversation.pk and more.message_id is None
    page.click("#send-button")
    expect(page.locator("article.user").last.locator(".file-chip")).to_contain_text("more.csv")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    expect(last_reply(page).locator(".round-text").last).to_contain_text("You attached more.csv")


def test_editing_a_message_keeps_its_files(page: Page, stack, browser_user):
    """Edit sends the question's files again: the new version of the
    message carries them, and the model gets them."""
    user = browser_user("eve")
    open_chat(page, stack, "eve", model="demo")
    choose(page, "notes.txt", "text/plain", NOTES)
    expect(chip(page, "notes.txt")).to_have_attribute("data-state", "done")
    page.fill("#message-input", "Summarise")
    page.keyboard.press("Enter")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")

    page.locator("article.user").last.get_by_role("button", name="Edit").click()
    page.fill(".edit-box textarea", "Summarise it briefly")
    page.click(".edit-box .save-edit")
    edited = page.locator("article.user").last
    expect(edited.locator(".round-text")).to_have_text("Summarise it briefly")
    expect(edited.locator(".file-chip")).to_contain_text("notes.txt")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    expect(last_reply(page).locator(".round-text").last).to_contain_text("You attached notes.txt")
    notes = StoredFile.objects.get(user=user, name="notes.txt")
    assert Message.objects.get(pk=notes.message_id).content == "Summarise it briefly"


def test_unreadable_document_on_a_message_and_refused_at_send(page: Page, stack, browser_user):
    user = browser_user("gus")
    conversation = Conversation.objects.create(user=user, title="Broken file")
    broken = stored_file(user, name="locked.pdf", data=b"%PDF-1.7 encrypted", content_type="application/pdf",
                         text_status="failed", text_error="The PDF is encrypted (password-protected).",
                         conversation=conversation)
    parts = [{"type": "text", "text": "Read this"}, *file_parts([broken.pk])]
    message = Message.objects.create(conversation=conversation, role="user", content="Read this",
                                     content_json=parts)
    StoredFile.objects.filter(pk=broken.pk).update(message=message)
    open_chat(page, stack, "gus", model="demo")
    page.goto(f"{stack.http_url}/c/{conversation.pk}/")
    item = page.locator("article.user .file-item.unreadable")
    expect(item.locator(".file-chip")).to_contain_text("locked.pdf")
    expect(item.locator(".file-error")).to_have_text("The PDF is encrypted (password-protected).")

    # A damaged PDF uploaded now: once its reading has failed, the message
    # that carries it is refused, and its chip says why.
    page.wait_for_selector("body[data-chat-ready]", state="attached")
    page.select_option("#model-select", "demo")
    choose(page, "damaged.pdf", "application/pdf", b"%PDF-1.7\n1 0 obj\n<< /Type /Cat")
    damaged = chip(page, "damaged.pdf")
    expect(damaged).to_have_attribute("data-state", "done")
    wait_for(lambda: StoredFile.objects.get(user=user, name="damaged.pdf").text_status == "failed",
             timeout=60, what="the damaged PDF's reading to fail")
    page.fill("#message-input", "And this one?")
    page.click("#send-button")
    expect(damaged).to_have_attribute("data-state", "error")
    expect(damaged.locator(".attachment-error")).to_contain_text("could not be read")
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


TOOL_FILES_JS = """
async ([files]) => {
  const state = await import("/static/web/run_state.js");
  const render = await import("/static/web/run_render.js");
  const run = state.newRunState("live-run", "running");
  const events = [
    { seq: 1, type: "run.started", data: {} },
    { seq: 2, type: "llm.started", data: { iteration: 0 } },
    { seq: 3, type: "tool_call",
      data: { iteration: 0, id: "call-live", name: "make_chart", arguments: "{}" } },
    { seq: 4, type: "tool_output", data: { tool_call_id: "call-live", status: "success", output: "{}",
                                           execution_time_ms: 12, files } },
  ];
  for (const event of events) state.applyEvent(run, event);
  const article = render.createRunArticle("live-run");
  article.id = "live-article";
  document.getElementById("history").append(article);
  render.renderRun(article, run);
  render.renderRun(article, run);  // drawn again, as every frame of a live run
}
"""


def test_files_from_a_tool_on_its_card(page: Page, stack, browser_user):
    """A tool's files as the stored tool_rounds carry them (after a reload),
    and as a tool_output event brings them (the page's own modules, fed the
    event in the browser)."""
    user = browser_user("hal")
    conversation = Conversation.objects.create(user=user, title="Charts")
    chart = image_file(user, conversation=conversation, name="chart.png")
    StoredFile.objects.filter(pk=chart.pk).update(source="tool", tool_call_id="call-1")
    table = stored_file(user, name="table.csv", data=CSV, content_type="text/csv", conversation=conversation)
    shape = [{"id": str(f.pk), "name": f.name, "content_type": f.content_type, "kind": f.kind, "size": f.size}
             for f in (chart, table)]
    Message.objects.create(conversation=conversation, role="user", content="Chart it")
    rounds = [{
        "iteration": 0, "assistant_response": "",
        "tool_calls": [{"id": "call-1", "name": "make_chart", "arguments": "{}"}],
        "results": [{"tool_call_id": "call-1", "output": "{\"ok\": true}", "status": "success",
                     "execution_time_ms": 40, "files": shape}],
    }]
    Message.objects.create(conversation=conversation, role="assistant", content="Here is the chart.",
                           tool_rounds=rounds)
    open_chat(page, stack, "hal", model="demo")
    page.goto(f"{stack.http_url}/c/{conversation.pk}/")
    reply = last_reply(page)
    card = reply.locator(".tool-card[data-tool-name=make_chart]")
    expect(card).not_to_have_attribute("open", "")
    files = reply.locator('.tool-files[data-tool-id="call-1"]')
    # Folded, the card still shows what the tool made.
    image = files.locator(".file-item.image img")
    expect(image).to_be_visible()
    expect(image).to_have_attribute("alt", "chart.png")
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle())
    assert files.locator(".file-thumb").get_attribute("href") == f"/api/files/{chart.pk}/content/"
    expect(files.locator(".file-chip")).to_contain_text("table.csv")
    assert files.locator(".file-chip").get_attribute("href") == f"/api/files/{table.pk}/content/"

    page.evaluate(TOOL_FILES_JS, [shape])
    live = page.locator("#live-article")
    expect(live.locator('.tool-files[data-tool-id="call-live"] .file-item')).to_have_count(2)
    expect(live.locator(".tool-files")).to_have_count(1)
    expect(live.locator('.tool-files[data-tool-id="call-live"] .file-chip')).to_contain_text("table.csv")


def test_a_file_a_tool_saved_on_its_card_live_and_after_reload(page: Page, stack, browser_user, fake_model):
    """The test tool save_report saves a CSV to the conversation: its card
    shows it from the tool_output event, and again from the stored rounds."""
    user = browser_user("kim")
    report = "city,people\nOslo,700000\n"
    model = fake_model("browser-tool-files", [
        Reply(text="Saving it.", tool_calls=[("save_report", {"name": "cities.csv", "text": report})]),
        Reply(text="Saved cities.csv."),
    ])
    open_chat(page, stack, "kim", model="demo")
    send(page, model, "Save the report")
    reply = last_reply(page)
    expect(reply).to_have_attribute("data-status", "completed")
    saved = StoredFile.objects.get(user=user, name="cities.csv")
    assert saved.source == "tool"

    def saved_chip(reply):
        card = reply.locator(".tool-card[data-tool-name=save_report]")
        expect(card).to_have_attribute("data-status", "success")
        return reply.locator(f'.tool-files[data-tool-id="{card.get_attribute("data-tool-id")}"] .file-chip')

    live = saved_chip(reply)
    expect(live).to_contain_text("cities.csv")
    assert live.get_attribute("href") == f"/api/files/{saved.pk}/content/"
    assert page.request.get(f"{stack.http_url}/api/files/{saved.pk}/content/").body() == report.encode()

    page.reload()
    stored = saved_chip(last_reply(page))
    expect(stored).to_contain_text("cities.csv")
    assert stored.get_attribute("href") == f"/api/files/{saved.pk}/content/"


def test_files_on_a_phone_in_the_dark(phone_page: Page, stack, browser_user, screenshot):
    page = phone_page
    browser_user("ivy")
    open_chat(page, stack, "ivy", model="demo")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    long_name = "quarterly-revenue-by-region-and-product-line-" + "x" * 80 + ".txt"
    page.set_input_files("#file-input", files=[
        {"name": long_name, "mimeType": "text/plain", "buffer": NOTES},
        {"name": "photo.png", "mimeType": "image/png", "buffer": SCREENSHOT},
        {"name": "empty.txt", "mimeType": "text/plain", "buffer": b""},
    ])
    expect(chip(page, long_name)).to_have_attribute("data-state", "done")
    expect(chip(page, "photo.png")).to_have_attribute("data-state", "done")
    expect(chip(page, "empty.txt")).to_have_attribute("data-state", "error")
    assert sticking_out(page) == []
    assert unreadable({
        "chip name": chip(page, long_name).locator(".attachment-name"),
        "chip size": chip(page, long_name).locator(".attachment-meta"),
        "refusal": chip(page, "empty.txt").locator(".attachment-error"),
        "remove": chip(page, "photo.png").locator(".attachment-remove"),
    }) == {}
    chip(page, "empty.txt").get_by_role("button", name="Remove empty.txt").click()

    page.fill("#message-input", "Both, please")
    page.click("#send-button")
    expect(last_reply(page)).to_have_attribute("data-status", "completed")
    sent = page.locator("article.user").last
    expect(sent.locator(".file-item")).to_have_count(2)
    expect(sent.locator(".file-thumb img")).to_be_visible()
    assert sticking_out(page) == []
    assert unreadable({
        "file name": sent.locator(".file-chip .file-name"),
        "file size": sent.locator(".file-chip .file-meta"),
    }) == {}
    screenshot(page, "chat-files-phone-dark")
