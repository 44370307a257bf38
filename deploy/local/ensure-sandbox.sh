#!/usr/bin/env bash
# Make sure bubblewrap, which the sandbox of the python tool and script tools
# runs on (docs/sandbox.md), is installed: with apt when missing and we may,
# as for Chromium (apt-install.sh).
set -euo pipefail

command -v bwrap >/dev/null 2>&1 && exit 0
bash "$(dirname "$0")/apt-install.sh" "the sandbox" bubblewrap
command -v bwrap >/dev/null 2>&1 || { echo "bubblewrap is still missing" >&2; exit 1; }
