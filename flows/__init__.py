"""Prefect flows: thin wrappers that parse parameters, build objects and call the core.

Importing this package first switches off Prefect's and Great Expectations' telemetry
(these machines are offline), unless the environment already decided.
"""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# Our loggers' records (with their context) reach the Prefect run logs too.
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "stratacrawl")
