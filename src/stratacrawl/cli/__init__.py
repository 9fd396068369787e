"""The ``stratacrawl`` command line: the same core calls the Prefect flows make."""

from stratacrawl.cli.app import app

__all__ = ["app"]
