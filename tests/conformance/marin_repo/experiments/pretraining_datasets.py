"""A dataset registry in the shape of Marin's: download steps defined at import, data fetched at run time."""

from experiments.defaults import default_download

tiny_web = default_download(name="raw/tiny-web", hf_dataset_id="tiny-org/tiny-web", revision="main")

# Not in this machine's Hugging Face cache: importing the registry still works; a run fails naming it.
big_web = default_download(name="raw/big-web", hf_dataset_id="big-org/big-web", revision="0a1b2c3")

DATASETS = {"tiny_web": tiny_web, "big_web": big_web}
