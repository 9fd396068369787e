"""Prefect flows: thin wrappers that parse parameters, build core objects and call the core."""
