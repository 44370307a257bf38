"""DRF's browsable API under the strict Content-Security-Policy.

DRF's page (``rest_framework/base.html``) writes the Pygments CSS into a
``<style>`` without a nonce and places its "Extra Actions" and "Filters"
buttons with ``style=""`` attributes; the policy (``style-src 'self'
'nonce-…'``) blocks both, so the page drew with console errors. This renderer
uses ``api/browsable_api.html``, which extends DRF's page and changes only
those parts. The policy itself stays as strict as for every other page.
"""

from __future__ import annotations

from rest_framework import renderers


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    template = "api/browsable_api.html"
