"""What a model turn is given of a message's files: images as data URLs on
the message, documents' text after its own, within the message's budget
and with a note that says what was cut (docs/files.md, "What the model gets")."""

from __future__ import annotations

import base64

import pytest

from chatforge.conversations.models import Conversation
from orchestration.services.runs import RunOptions, run_start
from orchestration.transcript.history import conversation_messages
from tests.support.files import PNG_BYTES, image_file, stored_file

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(make_user, idle_broker):
    return make_user()[0]


def _user_message(user, content: str, files) -> object:
    conversation = Conversation.objects.create(user=user)
    run = run_start(user=user, conversation=conversation, content=content, options=RunOptions(),
                    attachments=[str(f.pk) for f in files])
    return conversation_messages(run)[-1]


def test_images_and_documents_reach_the_model(user):
    document = stored_file(user, name='a "quoted" <name>.txt', data=b"The answer is 42.")
    picture = image_file(user)

    message = _user_message(user, "Read this", [document, picture])

    assert message.role == "user"
    assert message.images == (f"data:image/png;base64,{base64.b64encode(PNG_BYTES).decode()}",)
    assert message.content == (
        "Read this\n\n"
        f'<file name="a &quot;quoted&quot; &lt;name>.txt" id="{document.pk}" type="text/plain">\n'
        "The answer is 42.\n</file>"
    )


def test_the_message_budget_cuts_the_documents_in_order_and_says_so(user, settings):
    settings.CHATFORGE_ATTACHMENT_TEXT_TOKENS = 5  # 20 characters
    first = stored_file(user, name="one.txt", data=b"0123456789abcdef")  # 16 of the 20
    second = stored_file(user, name="two.txt", data=b"ABCDEFGHIJ")  # 4 of its 10 fit

    content = _user_message(user, "", [first, second]).content

    assert "0123456789abcdef\n</file>" in content
    assert "ABCD\n[The text is cut here: 4 of its 10 characters are shown" in content
    assert f'read_file(file_id="{second.pk}", offset=4)' in content


def test_a_document_cut_when_it_was_read_says_its_end_is_missing(user):
    document = stored_file(user, name="long.txt", data=b"start")
    type(document).objects.filter(pk=document.pk).update(text_truncated=True)
    content = _user_message(user, "", [document]).content
    assert "start\n[The file is longer than the" in content and "its end is missing.]" in content


def test_messages_without_files_cost_no_query_for_them(user, django_assert_num_queries):
    from orchestration.transcript.attachment_content import attached_content

    conversation = Conversation.objects.create(user=user)
    message = conversation.messages.create(role="user", content="plain")
    with django_assert_num_queries(0):
        assert attached_content([message]) == {}
