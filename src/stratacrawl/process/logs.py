"""Structured logs: every record carries its context — source, task,
batch, URL hash, trace id, latency, status, error — as ``key=value`` pairs after the
message, so a line is searchable without a log pipeline. Pass context with ``extra=``."""

from __future__ import annotations

import logging
import os

from stratacrawl.redact import RedactingFilter

CONTEXT = ("source_id", "task_id", "batch_id", "url_hash", "trace_id", "worker", "latency_ms",
           "status", "error", "alert_id", "rule", "level")


class ContextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        pairs = [f"{k}={getattr(record, k)}" for k in CONTEXT
                 if getattr(record, k, None) is not None]
        return f"{line} {' '.join(pairs)}" if pairs else line


def configure(level: str | None = None) -> None:
    """Our loggers to standard error with context (level from STRATACRAWL_LOG_LEVEL)."""
    logger = logging.getLogger("stratacrawl")
    if any(isinstance(h.formatter, ContextFormatter) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(ContextFormatter())
    handler.addFilter(RedactingFilter())  # no password reaches standard error, whoever logs it
    logger.addHandler(handler)
    logger.setLevel(level or os.environ.get("STRATACRAWL_LOG_LEVEL", "WARNING"))
