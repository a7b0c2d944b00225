"""Marin's ``marin.transform``: raw inputs -> Dolma documents (``raw``), HTML -> text
(``simple_html_to_md``)."""
