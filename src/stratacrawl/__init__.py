"""Stratacrawl core."""

import sys


def _import_elasticsearch_without_pyarrow() -> None:
    """elasticsearch's serializer module imports pyarrow when it is installed, for Arrow
    responses (ES|QL) we never ask for: ~35 MB at import and ~60 MB resident in every fetch
    worker. Import it with pyarrow hidden; pyarrow stays importable (Parquet export)."""
    if "elasticsearch.serializer" in sys.modules or "pyarrow" in sys.modules:
        return
    sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import now raises ImportError
    try:
        import elasticsearch.serializer  # noqa: F401
    finally:
        del sys.modules["pyarrow"]


_import_elasticsearch_without_pyarrow()
