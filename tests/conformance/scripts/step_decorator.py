"""Marin's ``@step`` shape (its open-web-math download script), on a dataset of the local HF cache."""

from marin.download.huggingface.download_hf import DownloadConfig
from marin.download.huggingface.download_hf import download_hf as _download_hf
from marin.execution import deferred, executor_main, output, step, versioned

download_hf = deferred(_download_hf)


@step(name="raw/tiny-web")
def tiny_web_raw_creator():
    return download_hf(
        DownloadConfig(
            hf_dataset_id="tiny-org/tiny-web",
            revision=versioned("main"),
            gcs_output_path=output(),
            wait_for_completion=False,
        )
    )


tiny_web_raw = tiny_web_raw_creator(override_output_path="raw/tiny-web-main")

if __name__ == "__main__":
    executor_main(steps=[tiny_web_raw])
