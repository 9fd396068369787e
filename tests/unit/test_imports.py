"""What importing stratacrawl loads: elasticsearch only when a module asks for it, and
then without pyarrow (its serializer would import pyarrow for Arrow responses we never
ask for: ~60 MB resident in every process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip()


def test_elasticsearch_loads_on_demand_and_without_pyarrow() -> None:
    out = _run(
        "import sys, importlib.util\n"
        "import stratacrawl.clean.cleaner, stratacrawl.cli\n"
        "print('es' if 'elasticsearch' in sys.modules else 'no-es')\n"
        "importlib.util.find_spec('elasticsearch')  # a probe must not spend the hiding\n"
        "from elasticsearch import AsyncElasticsearch\n"
        "import elasticsearch.helpers\n"
        "print('pyarrow' if 'pyarrow' in sys.modules else 'no-pyarrow')\n"
        "import pyarrow\n"
        "print('pyarrow-ok')")
    assert out.split() == ["no-es", "no-pyarrow", "pyarrow-ok"]


def test_elasticsearch_imports_normally_when_pyarrow_came_first() -> None:
    out = _run("import pyarrow, stratacrawl\n"
               "from elasticsearch.serializer import OrjsonSerializer\n"
               "print('ok')")
    assert out == "ok"


def test_the_command_line_loads_no_engine_until_a_command_runs() -> None:
    """`stratacrawl --help` (and any command's) imports the commands but none of the
    engines they drive: the crawler's HTTP client, the stores' drivers, Great Expectations,
    Prefect. A module-level import of one of them in a command module costs every
    invocation ~0.5 s (`stratacrawl bench cli` measures it)."""
    heavy = ["aiohttp", "elasticsearch", "psycopg", "psycopg_pool", "redis", "great_expectations",
             "prefect", "trafilatura", "pandas", "stratacrawl.wiring", "stratacrawl.crawl"]
    out = _run("import sys, stratacrawl.cli.app, typer.main\n"
               "typer.main.get_command(stratacrawl.cli.app.app)  # every command's signature\n"
               f"print(' '.join(m for m in {heavy!r} if m in sys.modules) or 'none')")
    assert out == "none"
