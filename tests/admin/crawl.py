"""Every admin page worth loading, derived from ``admin.site._registry``, so a
newly registered model is covered without editing the tests."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.test import RequestFactory
from django.urls import reverse

from chatforge.accounts.models import ApiToken
from chatforge.catalog.code_tools import code_tools
from chatforge.catalog.models import ToolDefinition

# Objects per model whose change, history and delete pages are loaded.
OBJECTS_PER_MODEL = 10


def admin_page_urls(user) -> list[str]:
    """The index, then per registered model its list, add page (if it has
    one) and the change, history and delete-confirmation pages of its first
    objects, then the custom pages (code tools, run pages, token confirmations)."""
    request = RequestFactory().get("/admin/")
    request.user = user
    urls = [reverse("admin:index")]
    for model, model_admin in admin.site._registry.items():
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:{}_{}_changelist".format(*info)))
        urls.append(reverse("admin:app_list", args=[info[0]]))
        if model_admin.has_add_permission(request):
            urls.append(reverse("admin:{}_{}_add".format(*info)))
        for obj in model_admin.get_queryset(request)[:OBJECTS_PER_MODEL]:
            pk = quote(obj.pk)
            urls.append(reverse("admin:{}_{}_change".format(*info), args=[pk]))
            urls.append(reverse("admin:{}_{}_history".format(*info), args=[pk]))
            if model_admin.has_delete_permission(request, obj):
                urls.append(reverse("admin:{}_{}_delete".format(*info), args=[pk]))
    urls += custom_admin_page_urls()
    return list(dict.fromkeys(urls))


def custom_admin_page_urls() -> list[str]:
    urls = [reverse("admin:catalog_tooldefinition_code_tools")]
    names = [tool.name for tool in code_tools()] + list(ToolDefinition.objects.values_list("name", flat=True))
    urls += [reverse("admin:catalog_tooldefinition_run", args=[name]) for name in names]
    for token_id in ApiToken.objects.filter(revoked_at__isnull=True).values_list("pk", flat=True):
        urls.append(reverse("admin:accounts_apitoken_rotate", args=[token_id]))
        urls.append(reverse("admin:accounts_apitoken_revoke", args=[token_id]))
    return urls

