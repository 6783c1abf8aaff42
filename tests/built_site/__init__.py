"""Tests of the built book in headless Chromium (a package so that its conftest.py and
site_pages.py are named built_site.conftest and built_site.site_pages, apart from
tests/conftest.py: mypy checks both)."""
