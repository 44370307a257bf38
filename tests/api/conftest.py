"""A signed-in API client for the REST API's tests."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.support.api_clients import api_client


@pytest.fixture
def client(make_user, idle_broker) -> APIClient:
    return api_client(*make_user())
