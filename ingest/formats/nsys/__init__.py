"""Nsight Systems SQLite exports: the database read safely, by the columns
its tables have (:mod:`.tables`), and the frames (:mod:`.trace`)."""
