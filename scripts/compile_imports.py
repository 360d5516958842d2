"""Import every module of webfreeze once, so that Python compiles them and what they import into
``__pycache__`` (set-up's last step: scripts/bootstrap.sh installs with pip's ``--no-compile``).

A module whose extra is not installed is skipped. Run with PYTHONDONTWRITEBYTECODE unset (the
bootstrap does), or nothing is written. Prints one line: how many modules were imported.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    with open(ROOT / "pyproject.toml", "rb") as f:
        packages = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    skipped = 0
    for package in packages:  # (the stage folders too: an editable install does not list them under webfreeze)
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}.", onerror=lambda name: None):
            if info.name.endswith(".__main__") or info.name in packages:
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 (an optional extra's module: compiled when it is installed)
                skipped += 1
    print(f"compile_imports: {len(sys.modules)} modules imported, and so compiled "
          f"({skipped} of webfreeze's need extras not installed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
