"""Prefect flows: thin wrappers that parse parameters, build objects and call the core.

Importing this package first switches off Prefect's and Great Expectations' telemetry
(these machines are offline), unless the environment already decided.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import logging

import prefect.main  # noqa: F401  # sets logging up ('prefect.extra' gets the API handler)

from stratacrawl.redact import RedactingFilter

# The core's loggers reach the flow run's log in the UI, at STRATACRAWL_LOG_LEVEL (INFO).
# PREFECT_LOGGING_EXTRA_LOGGERS does that only when set before Prefect set logging up,
# which a worker's flow-run process does before it loads a flow: the handlers go on here.
_ours = logging.getLogger("stratacrawl")
_ours.setLevel(os.environ.get("STRATACRAWL_LOG_LEVEL", "INFO"))
for _handler in logging.getLogger("prefect.extra").handlers:
    if _handler not in _ours.handlers:
        _handler.addFilter(RedactingFilter())  # nor to the run's log in the Prefect UI
        _ours.addHandler(_handler)
