"""Stratacrawl core."""

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType


class _ElasticsearchWithoutPyarrow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """elasticsearch's serializer module imports pyarrow when it is installed, for Arrow
    responses (ES|QL) we never ask for: ~35 MB at import and ~60 MB resident in every fetch
    worker. When the ``elasticsearch`` package is first imported, it is imported with
    pyarrow hidden; pyarrow stays importable (Parquet export).

    A finder rather than an import here: elasticsearch and its transport take ~0.9 s of
    CPU to import, which a process that never talks to the warm tier (a cleaner, most
    CLI commands) should not pay."""

    def __init__(self) -> None:
        self._loader: importlib.abc.Loader | None = None

    def find_spec(self, name: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name != "elasticsearch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        if spec is None or spec.loader is None or "pyarrow" in sys.modules:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        assert self._loader is not None
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        assert self._loader is not None
        if self in sys.meta_path:     # once: elasticsearch is loaded for this process
            sys.meta_path.remove(self)
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import now raises ImportError
        try:
            self._loader.exec_module(module)
        finally:
            del sys.modules["pyarrow"]


if "elasticsearch" not in sys.modules:
    sys.meta_path.insert(0, _ElasticsearchWithoutPyarrow())
