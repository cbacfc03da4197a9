"""Test doubles shared by several test modules (importable because pytest puts tests/ on
the path: see ``pythonpath`` in pyproject.toml)."""
