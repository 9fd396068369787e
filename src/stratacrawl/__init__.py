"""Stratacrawl core."""
