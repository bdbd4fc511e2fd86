"""A proxy's compress model files: the one place they are found and loaded.

The files of one proxy live in ``<models_dir>/<proxy slug>/`` (the packaged ones in ``models/``,
:mod:`ragattn.assets`) under the names the wheel ships (``scripts/wheel_check.sh`` checks them);
this is what each name holds:

- ``<method>.npz``: a compress method's sentence probe, and the cascade's ``lexical`` first pass
  (:class:`~ragattn.compress.probe.Probe`; ``ragattn probe train``);
- ``rerank-probe.npz``: the document probe (:class:`~ragattn.document_probe.DocumentProbe`; the
  ``attention-probe`` rerank reads the same file; ``ragattn probe train --kind rerank``);
- ``selection.json``: the document-aware selection
  (:class:`~ragattn.compress.selection.DocumentSelection`; ``ragattn probe train --kind
  selection``).

:class:`ModelFiles` answers for one folder and proxy: where a file is, whether it is there, and
the loaded model (a method's probe is required and raises where it is missing; the document probe
and the selection are optional parts and are None where they are missing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragattn.assets import proxy_slug, required_file
from ragattn.compress.probe import Probe
from ragattn.compress.selection import SELECTION_FILE, DocumentSelection
from ragattn.document_probe import PROBE_FILE, DocumentProbe
from ragattn.proxy import Proxy


def probe_path(models_dir: Path, proxy: Proxy | str, method: str) -> Path:
    """Where the probe weights of ``method`` for ``proxy`` (or its name) live."""
    return models_dir / proxy_slug(proxy) / f"{method}.npz"


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """The compress model files of one proxy in one models folder.

    Args:
        models_dir: the folder of every proxy's files (``<models_dir>/<proxy slug>/<file>``).
        proxy: the proxy's name (or path), read as its slug (:func:`~ragattn.assets.proxy_slug`).
    """

    models_dir: Path
    proxy: str

    def path(self, name: str) -> Path:
        """Where this proxy's file ``name`` is (``<models_dir>/<proxy slug>/<name>``)."""
        return self.models_dir / proxy_slug(self.proxy) / name

    def probe_path(self, method: str) -> Path:
        """Where ``method``'s sentence probe is (``<method>.npz``)."""
        return self.path(f"{method}.npz")

    def has_probe(self, method: str) -> bool:
        """Whether ``method``'s sentence probe is there."""
        return self.probe_path(method).is_file()

    def probe(self, method: str) -> Probe:
        """``method``'s sentence probe.

        Raises:
            ModelLoadError: it is missing (the message names the path and the command that
                trains it).
        """
        path = required_file(
            self.probe_path(method),
            f"trained probe for method {method!r} and proxy {self.proxy!r}",
            "train it with: ragattn probe train",
        )
        return Probe.load(path)

    def document_probe(self) -> DocumentProbe | None:
        """The document probe (``rerank-probe.npz``), or None where it is missing."""
        path = self.path(PROBE_FILE)
        return DocumentProbe.load(path) if path.is_file() else None

    def selection(self) -> DocumentSelection | None:
        """The document-aware selection (``selection.json``), or None where it is missing."""
        path = self.path(SELECTION_FILE)
        return DocumentSelection.load(path) if path.is_file() else None

    def required_selection(self) -> DocumentSelection:
        """The document-aware selection (``selection.json``).

        Raises:
            ModelLoadError: it is missing (the message names the path and the command that fits
                it).
        """
        path = required_file(
            self.path(SELECTION_FILE),
            f"document-aware selection for proxy {proxy_slug(self.proxy)!r}",
            "fit it with: ragattn probe train --kind selection",
        )
        return DocumentSelection.load(path)


__all__ = [
    "PROBE_FILE",
    "SELECTION_FILE",
    "ModelFiles",
    "probe_path",
]
