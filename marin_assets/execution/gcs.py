"""Conditional writes on Google Cloud Storage: object generations and ``ifGenerationMatch``.

Every GCS object has a *generation* that changes on each write. A write with
``ifGenerationMatch=0`` succeeds only when the object does not exist (create-if-absent); with
``ifGenerationMatch=G`` only when the live object is still generation ``G`` (compare-and-swap);
otherwise the server answers 412, which gcsfs raises as ``FileExistsError``. That is all a lease
and a fenced status file need, and no rename is involved (GCS has none).

Uploads use the JSON API's multipart upload (one request carrying metadata and content), through
gcsfs's authenticated session: the same credentials and ``STORAGE_EMULATOR_HOST`` handling as every
other gs:// access of the engine.
"""

from __future__ import annotations

import json
from typing import Any

from marin_assets.execution.storage import filesystem

_BOUNDARY = "==marin-lease=="


class GCSLeaseBackend:
    """:class:`~marin_assets.execution.conditional.LeaseBackend` on GCS; tokens are generations."""

    def __init__(self, path: str) -> None:
        self.fs, _ = filesystem(path)

    def _split(self, path: str) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(path)
        return bucket, key

    def _upload(self, path: str, data: bytes, if_generation_match: str) -> str | None:
        bucket, key = self._split(path)
        metadata = json.dumps({"name": key})
        body = (
            (
                f"--{_BOUNDARY}\nContent-Type: application/json; charset=UTF-8\n\n{metadata}\n"
                f"--{_BOUNDARY}\nContent-Type: application/octet-stream\n\n"
            ).encode()
            + data
            + f"\n--{_BOUNDARY}--".encode()
        )
        try:
            result: dict[str, Any] = self.fs.call(
                "POST",
                f"{self.fs._location}/upload/storage/v1/b/{bucket}/o",
                uploadType="multipart",
                headers={"Content-Type": f'multipart/related; boundary="{_BOUNDARY}"'},
                data=body,
                json_out=True,
                ifGenerationMatch=if_generation_match,
            )
        except FileExistsError:  # 412 Precondition Failed
            return None
        return str(result["generation"])

    def create_exclusive(self, path: str, data: bytes) -> str | None:
        return self._upload(path, data, "0")

    def read(self, path: str) -> tuple[bytes, str] | None:
        bucket, key = self._split(path)
        try:
            headers, content = self.fs.call("GET", "b/{}/o/{}", bucket, key, alt="media")
        except FileNotFoundError:
            return None
        generation = headers.get("x-goog-generation") or headers.get("X-Goog-Generation")
        if generation is None:  # a server without the header: ask for the metadata
            info = self.fs.call("GET", "b/{}/o/{}", bucket, key, json_out=True)
            generation = info["generation"]
        return content, str(generation)

    def replace_if(self, path: str, token: str, data: bytes) -> str | None:
        return self._upload(path, data, token)

    def delete_if(self, path: str, token: str) -> bool:
        bucket, key = self._split(path)
        # GCS enforces the precondition on DELETE; some emulators do not, so compare first too.
        current = self.read(path)
        if current is None or current[1] != token:
            return False
        try:
            self.fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=token)
        except (FileExistsError, FileNotFoundError):
            return False
        return True
