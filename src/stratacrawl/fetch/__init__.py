"""Fetching: politeness (limits, robots), the HTTP client, classification, batches."""
