#!/usr/bin/env bash
# Make sure Debian's Chromium, which the browser tests drive through
# Playwright, is installed. Installs it with apt when missing and we may
# (CI=true, or running as root); never downloads a browser any other way.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] && exit 0

if [ "${CI:-}" = "true" ] || [ "$(id -u)" = "0" ]; then
  echo "Installing Debian's Chromium for the browser tests..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
else
  echo "The browser tests need Debian's Chromium at $CHROMIUM: sudo apt-get install chromium" >&2
  exit 1
fi
[ -x "$CHROMIUM" ] || { echo "Chromium is still missing at $CHROMIUM" >&2; exit 1; }
