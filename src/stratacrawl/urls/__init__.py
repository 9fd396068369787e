"""URL handling: a URL's canonical form and fingerprint, and the checks every fetched
URL passes (``canonical``); the equivalences learned per source — which query
parameters or path variants name the same page (``equivalence``).

Public here: what the rest of the platform calls on a URL. The learned rules are used
through ``stratacrawl.urls.equivalence``.
"""

from stratacrawl.urls.canonical import (
    canonical_fingerprint,
    canonicalize,
    check_target,
    fingerprint,
    is_private_host,
    resolve,
)

__all__ = ["canonical_fingerprint", "canonicalize", "check_target", "fingerprint",
           "is_private_host", "resolve"]
