"""Cleaning: staged pages → structured records (extract, coerce, fingerprint, upsert)."""
