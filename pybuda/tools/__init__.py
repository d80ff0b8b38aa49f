"""Command line and demo tools."""
