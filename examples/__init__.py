"""Bundled sample traces (package data), used by `tracegraph demo`."""
