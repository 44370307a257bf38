"""Database backends of our own (selected in chatforge/settings/database.py)."""
