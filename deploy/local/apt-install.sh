#!/usr/bin/env bash
# Install Debian packages the tests need when we may: in CI (CI=true) or as
# root; otherwise say the command to run and fail. Used by ensure-browser.sh
# and ensure-sandbox.sh: never downloads anything but Debian's packages.
#   apt-install.sh WHAT PACKAGE...
set -euo pipefail

what=$1
shift
if [ "${CI:-}" = "true" ] || [ "$(id -u)" = "0" ]; then
  echo "Installing Debian's $* for $what..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
else
  echo "$what needs Debian's $*: sudo apt-get install $*" >&2
  exit 1
fi
