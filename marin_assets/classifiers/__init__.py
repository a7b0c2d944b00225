"""Marin's ``marin.classifiers``: labelled datasets (``utils``), the fastText training core
(``fasttext.training``) and the quality classifier's reference set (``quality_reference``, ours)."""
