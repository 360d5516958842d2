#!/usr/bin/env bash
# Idempotent set-up: a .venv in the repo with webfreeze installed in editable mode plus extras.
# Usage: scripts/bootstrap.sh [EXTRAS]   (EXTRAS defaults to "test")
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
py="${PYTHON:-python3}"
stamp=".venv/.installed-${extras//,/-}"

if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "bootstrap: webfreeze needs Python 3.11 or newer as '$py'" >&2
  exit 1
fi

# Debian and Ubuntu ship venv support in a separate package.
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  echo "bootstrap: installing python${ver}-venv with apt-get" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "python${ver}-venv" || \
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3-venv
fi

# Debian packages the tools need: Chromium (crawls, replay checks, the browser backend; no
# browser downloads are possible here), wrk (the replay server's load test), and for benchmarks
# nginx (the static-file reference). Installed only when missing.
apt_pkgs=()
if [ -z "${WEBFREEZE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  apt_pkgs+=(chromium fonts-dejavu-core)
fi
command -v wrk >/dev/null 2>&1 || apt_pkgs+=(wrk)
if [ "${WEBFREEZE_BENCH:-}" = 1 ] && ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  apt_pkgs+=(nginx-light)
fi
# The agent environment prefers Chromium's headless shell (same build, no browser UI: a fresh
# context costs half as much); where the distribution has no such package it uses chromium.
want_shell=""
if [ -z "${WEBFREEZE_CHROMIUM:-}" ] && ! command -v chromium-headless-shell >/dev/null 2>&1; then
  if [ ${#apt_pkgs[@]} -gt 0 ] || apt-cache show chromium-headless-shell >/dev/null 2>&1; then
    want_shell=1
  fi
fi
if [ ${#apt_pkgs[@]} -gt 0 ] || [ -n "$want_shell" ]; then
  echo "bootstrap: installing ${apt_pkgs[*]} ${want_shell:+chromium-headless-shell} with apt-get" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  # no service start-up during install (there may be no init system at all)
  if [ ${#apt_pkgs[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo_cmd apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
  fi
  if [ -n "$want_shell" ]; then
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium-headless-shell >/dev/null 2>&1 || \
      echo "bootstrap: no chromium-headless-shell package here; the agent environment uses chromium" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi

# Reinstall only when the dependency list changed since the last successful install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"
  touch "$stamp"
fi
