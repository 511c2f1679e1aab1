"""The results store (SQLite) and the history of a subject across stored runs."""
