#!/usr/bin/env bash
# Idempotent set-up: a .venv in the repo with webfreeze installed in editable mode plus extras.
# Usage: scripts/bootstrap.sh [EXTRAS]   (EXTRAS defaults to "test")
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
py="${PYTHON:-python3}"
stamp=".venv/.installed-${extras//,/-}"
# apt-get runs through sudo unless we are root
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi

if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "bootstrap: webfreeze needs Python 3.11 or newer as '$py'" >&2
  exit 1
fi

# Debian and Ubuntu ship venv support in a separate package.
if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  echo "bootstrap: installing python${ver}-venv with apt-get" >&2
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "python${ver}-venv" || \
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3-venv
fi

# Debian packages the tools need: Chromium (crawls, replay checks, the browser backend; no
# browser downloads are possible here), wrk (the replay server's load test), strace (a durability
# test), and for benchmarks nginx (the static-file reference). Installed only when missing.
apt_pkgs=()
if [ -z "${WEBFREEZE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  apt_pkgs+=(chromium fonts-dejavu-core)
fi
command -v wrk >/dev/null 2>&1 || apt_pkgs+=(wrk)
command -v strace >/dev/null 2>&1 || apt_pkgs+=(strace)  # a test reads the syncs of a new archive
if [ "${WEBFREEZE_BENCH:-}" = 1 ] && ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  apt_pkgs+=(nginx-light)
fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  echo "bootstrap: installing ${apt_pkgs[*]} with apt-get" >&2
  $sudo_cmd apt-get update -qq
  # no service start-up during install (there may be no init system at all)
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo_cmd apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi

# Optional: the agent environment prefers Chromium's headless shell (the same build without the
# browser's UI: a fresh context costs half as much) and uses chromium without it. Tried where apt
# knows the package (once more after an apt-get update); a failed try is not repeated (remove .venv/.no-headless-shell to try again)
# and never stops the set-up.
if [ -z "${WEBFREEZE_CHROMIUM:-}" ] && ! command -v chromium-headless-shell >/dev/null 2>&1 \
    && [ ! -f .venv/.no-headless-shell ] && apt-cache show chromium-headless-shell >/dev/null 2>&1; then
  echo "bootstrap: installing chromium-headless-shell with apt-get" >&2
  log=$(mktemp)
  if ! { DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium-headless-shell >"$log" 2>&1 ||
         { $sudo_cmd apt-get update -qq >"$log" 2>&1 &&
           DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium-headless-shell >"$log" 2>&1; }; }; then
    echo "bootstrap: could not install chromium-headless-shell ($(tail -n 1 "$log")); the agent environment uses chromium" >&2
    touch .venv/.no-headless-shell
  fi
  rm -f "$log"
fi

# Reinstall only when the dependency list changed since the last successful install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"
  touch "$stamp"
fi
