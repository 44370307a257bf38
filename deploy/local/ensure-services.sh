#!/usr/bin/env bash
# Make sure the local PostgreSQL and Redis that the tests use are running.
# Starts them when installed but stopped; in CI (CI=true) installs them from
# Debian's packages when missing. Never touches remote hosts.
set -euo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

install_missing() {
  local pkgs=()
  command -v pg_ctlcluster >/dev/null 2>&1 || pkgs+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "${CI:-}" != "true" ]; then
    echo "Missing ${pkgs[*]}: install them (apt-get install ${pkgs[*]}) or run with CI=true to install automatically." >&2
    exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  if [[ " ${pkgs[*]} " == *" postgresql "* ]]; then
    # A fresh cluster asks for passwords on TCP; the tests connect as
    # postgres over loopback without one, as on the development machines.
    hba=$(ls /etc/postgresql/*/main/pg_hba.conf | head -1)
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
}

if ! pg_up || ! redis_up; then
  install_missing
fi

if ! pg_up; then
  echo "Starting PostgreSQL..."
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi
if ! redis_up; then
  echo "Starting Redis..."
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 1 30); do redis_up && break; sleep 0.5; done
fi
pg_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
redis_up || { echo "Redis is not reachable on 127.0.0.1:6379" >&2; exit 1; }
echo "PostgreSQL and Redis are up."
