"""Embedded mode reads documents too: the in-process worker threads consume
the ``tools`` queue of the in-memory broker, where an upload's reading task
goes (``make run``'s process, with a database and files directory of its
own)."""

from __future__ import annotations

import pytest

from tests.files.test_reading import pdf_bytes
from tests.support.client import ApiClient
from tests.support.stack import embedded_server, wait_for

pytestmark = pytest.mark.integration


def test_an_uploaded_pdf_is_read_by_the_embedded_worker():
    with embedded_server(prefix="chatforge-reading-embedded-") as server:
        api = ApiClient(server.url, server.token)
        uploaded = api.request("POST", "/api/files/",
                               files={"file": ("facts.pdf", pdf_bytes(["Water boils at 100 C."]), "application/pdf")})
        assert uploaded.status_code == 201, uploaded.text
        file_id = uploaded.json()["id"]
        locked = api.request("POST", "/api/files/",
                             files={"file": ("locked.pdf", pdf_bytes(["x"], user_password="pw"), "application/pdf")})
        assert locked.status_code == 201, locked.text

        def status(of: str) -> dict:
            return api.request("GET", f"/api/files/{of}/").json()

        wait_for(lambda: status(file_id)["text_status"] != "pending" and
                 status(locked.json()["id"])["text_status"] != "pending",
                 timeout=60, what="the documents' text", process=server.process)

        assert (status(file_id)["text_status"], status(file_id)["text_error"]) == ("ready", "")
        assert (status(locked.json()["id"])["text_status"], status(locked.json()["id"])["text_error"]) == (
            "failed", "The PDF is encrypted (password-protected): remove the password and upload it again.")
