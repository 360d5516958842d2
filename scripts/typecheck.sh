#!/usr/bin/env bash
# The type check of `make lint`: mypy (pyproject.toml [tool.mypy]) over the package under the names it
# is installed as. Each stage folder is a subpackage (archives/ is webfreeze.archives), which mypy cannot
# map by itself: a tree of links in .cache/typecheck gives it the installed layout.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.cache/typecheck
rm -rf "$tree"
mkdir -p "$tree/webfreeze"
for entry in webfreeze/*; do
  ln -s "$PWD/$entry" "$tree/webfreeze/"
done
for stage in $(.venv/bin/python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))
print(" ".join(v for k, v in d["tool"]["setuptools"]["package-dir"].items() if k != "webfreeze"))'); do
  ln -s "$PWD/$stage" "$tree/webfreeze/$stage"
done
exec .venv/bin/python -m mypy -p webfreeze "$@"
