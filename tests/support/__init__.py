"""Helpers the test suites share (no tests here)."""
