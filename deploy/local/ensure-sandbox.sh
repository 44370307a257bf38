#!/usr/bin/env bash
# Make sure bubblewrap, which the sandbox of the python tool and script tools
# runs on (docs/sandbox.md), is installed. Installs Debian's package with apt
# when missing and we may (CI=true, or running as root), as for Chromium.
set -euo pipefail

command -v bwrap >/dev/null 2>&1 && exit 0

if [ "${CI:-}" = "true" ] || [ "$(id -u)" = "0" ]; then
  echo "Installing Debian's bubblewrap for the sandbox..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }
else
  echo "The sandbox needs bubblewrap: sudo apt-get install bubblewrap" >&2
  exit 1
fi
command -v bwrap >/dev/null 2>&1 || { echo "bubblewrap is still missing" >&2; exit 1; }
