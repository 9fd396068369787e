"""Benchmarks: ``stratacrawl bench NAME [--quick|--smoke] [--json]``. Each module has
``run(size) -> Iterable[Figure]`` (``bench.figure.Size``) and ``FIGURES``, the metrics it
emits; ``tests/integration/test_benches.py`` runs each at its smoke size."""
