"""The analysis catalog: one documented Cypher file per analysis (package data)."""
