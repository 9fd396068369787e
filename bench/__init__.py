"""Benchmarks: ``stratacrawl bench NAME [--json]``. Each module has ``run(quick) -> Iterable[Figure]``."""
