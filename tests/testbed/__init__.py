"""Testbed tests (a package so the modules can import the gates from .conftest)."""
