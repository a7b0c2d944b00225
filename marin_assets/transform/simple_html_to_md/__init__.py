"""Marin's ``marin.transform.simple_html_to_md``: HTML -> main-content text (resiliparse)."""
