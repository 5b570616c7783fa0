"""Maintainer checks that run on evalkit's own source (``python -m evalkit._devtools.<x>``)."""
