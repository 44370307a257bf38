"""Files on shared storage, on real processes: the web process stores an
upload, the tools worker reads the document's text from the same storage
(``chatforge.read_file_text``), the LLM worker gives it to the model, and a
download or a deletion through the web process sees the same bytes. Twice:
with a local directory every process of the stack shares (the session's
stack, CHATFORGE_FILES_DIR), and with a bucket on an S3-compatible server on
loopback (moto's server mode, tests/support/s3_server.py) and a stack of its
own configured as a deployment is (CHATFORGE_FILES_STORAGE=s3...).

What is checked at the storage itself (the directory's files, the bucket's
keys through boto3), not only through the API: bytes there after the
upload, byte-exact; gone after a delete, and after the conversation's
delete for the files the cascade took."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import base64

import httpx
import pytest

from chatforge.accounts.crypto import encrypt
from chatforge.files.models import StoredFile
from chatforge.llm.models import LanguageModel, Provider
from tests.fakes.openai_server import Reply
from tests.support.client import ApiClient, follow_run
from tests.support.files import PNG_BYTES
from tests.support.private_services import private_redis
from tests.support.s3_server import S3Server, s3  # noqa: F401 - the session's S3 server fixture
from tests.support.stack import DistributedStack, distributed_stack, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024
DOCUMENT = (
    "# Boiling points\n\n"
    "Water boils at 100 C at sea level, and at about 70 C on the summit of Everest.\n"
    "Ethanol boils at 78.4 C.\n"
)


@dataclass
class FilesStack:
    """A stack and a view of its files storage from outside every process."""

    stack: DistributedStack
    storage: str  # "local" | "s3"
    stored_names: Callable[[], set[str]]  # every key the storage holds
    read_stored: Callable[[str], bytes]  # the bytes under one key


def local_files_stack(stack: DistributedStack) -> FilesStack:
    root = Path(stack.env["CHATFORGE_FILES_DIR"])
    assert stack.env.get("CHATFORGE_FILES_STORAGE", "local") == "local"

    def stored_names() -> set[str]:
        return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()} if root.exists() else set()

    return FilesStack(stack=stack, storage="local", stored_names=stored_names,
                      read_stored=lambda name: (root / name).read_bytes())


@pytest.fixture(scope="module")
def s3_files_stack(django_db_setup, django_db_blocker, fake_llm, s3: S3Server) -> Iterator[FilesStack]:  # noqa: F811
    """Web, LLM worker and tools workers keeping files in a bucket, on a Redis
    of their own (the session's stack must not take their tasks: its workers
    look for files in a directory)."""
    from tests.conftest import _test_database_url

    bucket = s3.create_bucket()
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    with private_redis() as redis_server, distributed_stack(
        database_url=database_url, redis_url=redis_server.url(0), llm_concurrency=10, tool_concurrency=2,
        extra_env={
            "OPENAI_BASE_URL": fake_llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "CHATFORGE_TOOL_MODULES": "tests.support.tools",
            # The directory is not used: a file written there would show as missing from the bucket.
            "CHATFORGE_FILES_DIR": os.path.join(str(redis_server.dir), "unused-files-dir"),
            **s3.storage_env(bucket),
        },
    ) as stack:
        client = s3.client()

        def read_stored(name: str) -> bytes:
            return client.get_object(Bucket=bucket, Key=name)["Body"].read()

        yield FilesStack(stack=stack, storage="s3", stored_names=lambda: set(s3.keys(bucket)), read_stored=read_stored)
        assert not Path(stack.env["CHATFORGE_FILES_DIR"]).exists(), "a process wrote files outside the bucket"


def png(size: int) -> bytes:
    """A PNG signature and then bytes that differ everywhere: big enough, a
    multipart upload to S3 whose parts must come back in order."""
    block = hashlib.sha256(b"files-distributed").digest()
    body = b"".join(hashlib.sha256(block + i.to_bytes(4, "big")).digest() for i in range(size // 32 + 1))
    return (b"\x89PNG\r\n\x1a\n" + body)[:size]


def upload(api: ApiClient, name: str, data: bytes, conversation_id: str, content_type: str) -> dict:
    response = api.request("POST", "/api/files/", files={"file": (name, data, content_type)},
                           data={"conversation_id": conversation_id})
    assert response.status_code == 201, response.text
    return response.json()


def file_status(api: ApiClient, file_id: str) -> dict:
    response = api.request("GET", f"/api/files/{file_id}/")
    assert response.status_code == 200, response.text
    return response.json()


def download(api: ApiClient, file_id: str) -> httpx.Response:
    return api.request("GET", f"/api/files/{file_id}/content/")


def vision_model(fake_llm, name: str) -> None:
    provider = Provider.objects.create(name=f"p-{name}", kind="openai", base_url=fake_llm.base_url,
                                       api_key_ciphertext=encrypt("test-key"))
    LanguageModel.objects.create(name=name, provider=provider, supports_vision=True)


def message_text(message: dict) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def exercise_shared_storage(files: FilesStack, fake_llm, make_user) -> None:
    stack = files.stack
    user, token = make_user()
    api = ApiClient(stack.http_url, token)
    conversation = api.new_conversation()

    # An upload through the web process: the document, and an image above S3's multipart threshold (8 MiB).
    document = upload(api, "boiling.md", DOCUMENT.encode(), conversation, "text/markdown")
    image_bytes = png(10 * MIB + 123)
    image = upload(api, "big.png", image_bytes, conversation, "application/octet-stream")
    assert (document["kind"], document["content_type"], document["source"]) == ("document", "text/markdown", "upload")
    assert document["conversation_id"] == conversation and document["size"] == len(DOCUMENT.encode())
    assert (image["kind"], image["content_type"], image["size"]) == ("image", "image/png", len(image_bytes))
    assert image["sha256"] == hashlib.sha256(image_bytes).hexdigest()
    assert document["text_status"] in {"pending", "ready"} and image["text_status"] == "none"
    pixel = upload(api, "pixel.png", PNG_BYTES, conversation, "image/png")

    # The bytes are in the storage itself, under keys of our own. (The local
    # directory is shared with other test processes: only these keys are compared.)
    doc_row = StoredFile.objects.get(pk=document["id"])
    image_row = StoredFile.objects.get(pk=image["id"])
    pixel_row = StoredFile.objects.get(pk=pixel["id"])
    assert StoredFile.objects.filter(user=user).count() == 3
    assert {doc_row.storage_name, image_row.storage_name, pixel_row.storage_name} <= files.stored_names()
    assert "boiling" not in doc_row.storage_name and "big" not in image_row.storage_name
    assert files.read_stored(image_row.storage_name) == image_bytes
    assert files.read_stored(doc_row.storage_name) == DOCUMENT.encode()

    # The tools worker reads the document's text from that storage.
    wait_for(lambda: file_status(api, document["id"])["text_status"] != "pending", timeout=60,
             what="the document's text to be read", process=stack.process("tools"))
    status = file_status(api, document["id"])
    assert (status["text_status"], status["text_error"]) == ("ready", ""), (status, stack.logs())
    assert "Water boils at 100 C at sea level" in StoredFile.objects.get(pk=document["id"]).text
    assert "chatforge.read_file_text" in stack.process("tools").log()

    # Downloads through the web process, byte-exact.
    got = download(api, image["id"])
    assert got.status_code == 200 and got.content == image_bytes
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert download(api, document["id"]).content == DOCUMENT.encode()

    # A run: the LLM worker (gevent) gives the model the text the tools
    # worker read, and the image it reads from the storage itself.
    model = f"files-{files.storage}-model"
    vision_model(fake_llm, model)
    fake_llm.add_script(model, lambda body: Reply(text="Water, then ethanol."))
    accepted = api.post_message(conversation, "Which boils first?", model=model,
                                attachments=[document["id"], pixel["id"]])
    events = follow_run(stack.ws_url, accepted["run_id"], token)
    assert events[-1]["type"] == "run.completed", (events[-1], stack.logs())
    sent = fake_llm.requests_for(model)[-1]["messages"][-1]
    text = message_text(sent)
    assert text.startswith("Which boils first?")
    assert f'<file name="boiling.md" id="{document["id"]}" type="text/markdown">' in text
    assert "Ethanol boils at 78.4 C." in text
    images = [part["image_url"]["url"] for part in sent["content"] if part.get("type") == "image_url"]
    assert images == ["data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()]

    # A delete through the web process removes the bytes from the storage.
    response = api.request("DELETE", f"/api/files/{document['id']}/")
    assert response.status_code == 204, response.text
    wait_for(lambda: doc_row.storage_name not in files.stored_names(), timeout=30, what="the document's bytes to go")
    assert download(api, document["id"]).status_code == 404
    assert api.request("GET", f"/api/files/{document['id']}/").status_code == 404
    assert image_row.storage_name in files.stored_names()

    # Deleting the conversation takes its files, and their bytes, with it.
    response = api.request("DELETE", f"/api/conversations/{conversation}/")
    assert response.status_code == 204, response.text
    wait_for(lambda: not {image_row.storage_name, pixel_row.storage_name} & files.stored_names(), timeout=30,
             what="the conversation's files' bytes to go")
    assert not StoredFile.objects.filter(user=user).exists()
    if files.storage == "s3":  # the bucket is this test's alone
        assert files.stored_names() == set()


def test_files_on_a_directory_shared_by_web_and_workers(stack, fake_llm, make_user):
    exercise_shared_storage(local_files_stack(stack), fake_llm, make_user)


def test_files_on_an_s3_bucket_shared_by_web_and_workers(s3_files_stack: FilesStack, fake_llm, make_user):
    exercise_shared_storage(s3_files_stack, fake_llm, make_user)
