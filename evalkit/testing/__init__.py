"""Helpers for tests, examples and perf scripts: fixtures built with the product's own writers."""
