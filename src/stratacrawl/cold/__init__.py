"""Cold tier: PostgreSQL, the durable truth (ledger, URL state, staging, records, history)."""
