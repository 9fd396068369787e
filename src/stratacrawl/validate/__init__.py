"""Validation: Great Expectations suites per source, run per source and day in PostgreSQL."""
