"""How a Stratacrawl process runs, apart from what it does: its logging (``logs``: one
format, secrets redacted), its signals (``signals``: SIGTERM drains, a second one stops),
and the tuning only entry points apply (``tuning``: the garbage collector's thresholds,
``gctune``, and glibc malloc's arenas and trim, ``malloc``). Import the module you need;
nothing here is re-exported."""
