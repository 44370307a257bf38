"""Checks by hand against other software that talks to ChatForge (`make interop-openwebui`).

Like `bench/`, nothing here is part of the app or of CI: each check installs
the other program at a pinned version outside the project's venv, drives it
through its own API against a running ChatForge, and prints PASS/FAIL.
"""
