"""Staging: raw pages land here (bulk COPY, with the ledger update), or in the local spool."""
