"""Where each tier lives: a configured server, or an embedded one started on demand.

``Services`` is the entry point: it resolves a URL per tier from settings, and
for each tier with no URL it reuses the embedded server recorded in the state
folder (``services up``) or starts one owned by this process and stops it on exit.
"""

from stratacrawl.services.embedded import EMBEDDED, EmbeddedServer
from stratacrawl.services.resolve import Endpoints, Services

__all__ = ["EMBEDDED", "EmbeddedServer", "Endpoints", "Services"]
