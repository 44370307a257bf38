#!/usr/bin/env bash
# Make sure Debian's Chromium, which the browser tests drive through
# Playwright, is installed. Installs it with apt when missing and we may
# (CI=true, or running as root: apt-install.sh); never downloads a browser
# any other way.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] && exit 0
bash "$(dirname "$0")/apt-install.sh" "the browser tests" chromium
[ -x "$CHROMIUM" ] || { echo "Chromium is still missing at $CHROMIUM" >&2; exit 1; }
