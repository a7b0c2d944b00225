"""Marin's ``experiments/speedrun/prebuilt_caches.py``: the prebuilt fineweb-edu subcaches of the Marin
speedrun as ``download_pretokenized_cache`` steps (same names, repositories and tokenizer).

Defining them touches nothing; running one downloads the cache repository from the hub
(``$HF_ENDPOINT``), or fails when the step runs, naming the repository and the host.
"""

from marin_assets.experiments.marin_models import marin_tokenizer
from marin_assets.processing.tokenize.download_pretokenized import download_pretokenized_cache

fineweb_edu_10B_repo_id = "marin-community/fineweb-edu-pretokenized-10B"
fineweb_edu_subcache_10B = download_pretokenized_cache("fineweb-edu-10B", fineweb_edu_10B_repo_id, marin_tokenizer)

fineweb_edu_10M_repo_id = "marin-community/fineweb-edu-pretokenized-10M"
fineweb_edu_subcache_10M = download_pretokenized_cache("fineweb-edu-10M", fineweb_edu_10M_repo_id, marin_tokenizer)
