"""Build hook: the learned assets in the top-level ``models/`` ship inside the wheel as
``ragattn/models/`` (package data found through ``importlib.resources``, see ``ragattn/assets.py``).

Everything else about the package is in pyproject.toml. A source checkout (``PYTHONPATH=.`` or
``pip install -e .``) reads ``models/`` in place.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ASSET_SUFFIXES = (".npz", ".json", ".md", ".safetensors")
"""What a proxy's asset folder ships: probe weights, head profiles, adapters and model cards."""


class BuildPyWithModels(build_py):
    """``build_py`` that also copies ``models/<proxy>/<asset>`` to ``ragattn/models/<proxy>/``."""

    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "models"
        target = Path(self.build_lib) / "ragattn" / "models"
        for path in sorted(source.glob("*/*")):
            if path.is_file() and path.suffix in ASSET_SUFFIXES:
                out = target / path.relative_to(source)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)


setup(cmdclass={"build_py": BuildPyWithModels})
