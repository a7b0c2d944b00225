"""The on-disk dedup index of one drop, and the file helpers of dedup's external-memory passes.

A drop's index (format 2) is four ``.npy`` files below ``<drop output>/index/``, then the marker::

    ids.npy          (n,) unicode          document ids, in (shard, line) order
    sigs.npy         (n, num_perm) uint32  MinHash signatures, same order
    bands.npy        (m,) {key u8, doc i8} per LSH band, the bucket keys of this drop sorted by key,
                                           each with its earliest document (documents with words only);
                                           band b is rows ``band_offsets[b]:band_offsets[b+1]``
    paragraphs.npy   (p,) uint64           sorted unique paragraph hashes
    _COMPLETE        JSON {drop_id, documents, earlier_drops, format: 2, band_offsets, paragraphs}

Every table is sorted, so a later drop reads only the key range it is working on (a slice found by
binary search in a memory map) and the signature/id rows of its candidates -- never a whole index.
Indices written by the first implementation (``minhash.npz`` + ``paragraphs.npy``, marker without
``format``) are converted to this layout on read, in a scratch folder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin_assets.execution.storage import filesystem, is_local, join_path, read_bytes

INDEX_FORMAT = 2
INDEX_COMPLETE = "index/_COMPLETE"
INDEX_FILES = ("ids.npy", "sigs.npy", "bands.npy", "paragraphs.npy")
BAND_DTYPE = np.dtype([("key", "<u8"), ("doc", "<i8")])
_COPY_BLOCK = 1 << 18


def write_npy_header(handle: Any, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """The ``.npy`` header of a C-ordered array; its rows are then written raw after it."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(handle, header)


class NpyWriter:
    """A ``.npy`` file of a known shape written block by block (never held whole)."""

    def __init__(self, path: str, dtype: Any, shape: tuple[int, ...]) -> None:
        self.dtype = np.dtype(dtype)
        self.rows = 0
        self.shape = shape
        self.handle = open(path, "wb")  # noqa: SIM115 -- closed in close()
        write_npy_header(self.handle, self.dtype, shape)

    def append(self, rows: np.ndarray) -> None:
        """Write the next rows (cast to the file's dtype)."""
        np.ascontiguousarray(rows, dtype=self.dtype).tofile(self.handle)
        self.rows += len(rows)

    def close(self) -> None:
        """Close; the rows written must fill the declared shape."""
        self.handle.close()
        if self.rows != self.shape[0]:
            raise RuntimeError(f"{self.handle.name}: wrote {self.rows} rows, declared {self.shape[0]}")


class RawRows:
    """Rows of one dtype appended to a headerless file (the row count need not be known up front)."""

    def __init__(self, path: str, dtype: Any) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.rows = 0
        open(path, "wb").close()

    def append(self, rows: np.ndarray) -> None:
        """Append ``rows`` (cast to the dtype)."""
        if len(rows):
            with open(self.path, "ab") as handle:
                np.ascontiguousarray(rows, dtype=self.dtype).tofile(handle)
            self.rows += len(rows)

    def read(self) -> np.ndarray:
        """Every row appended so far (call on a part bounded by the memory plan only)."""
        return np.fromfile(self.path, dtype=self.dtype)


def concat_raw_to_npy(path: str, parts: list[RawRows]) -> list[int]:
    """Write ``parts`` (same dtype) one after the other as one ``.npy``; returns the row offsets."""
    offsets = [0]
    for part in parts:
        offsets.append(offsets[-1] + part.rows)
    with open(path, "wb") as out:
        write_npy_header(out, parts[0].dtype, (offsets[-1],))
        for part in parts:
            with open(part.path, "rb") as handle:
                shutil.copyfileobj(handle, out, _COPY_BLOCK)
            os.unlink(part.path)
    return offsets


def key_range_slice(sorted_keys: np.ndarray, lo: int, hi: int | None) -> slice:
    """Rows of ``sorted_keys`` (uint64, ascending) with ``lo <= key < hi`` (``hi`` None: no bound)."""
    start = int(np.searchsorted(sorted_keys, np.uint64(lo), side="left"))
    stop = len(sorted_keys) if hi is None else int(np.searchsorted(sorted_keys, np.uint64(hi), side="left"))
    return slice(start, stop)


@dataclass
class DropIndex:
    """A complete earlier drop's index, read through memory maps (slices and rows, not the whole)."""

    drop_id: str
    folder: str  # a local folder holding INDEX_FILES
    documents: int
    band_offsets: list[int]
    paragraphs: int

    def _map(self, name: str) -> np.ndarray:
        return np.load(os.path.join(self.folder, name), mmap_mode="r")

    @property
    def band_rows(self) -> int:
        """Bucket entries over all bands."""
        return self.band_offsets[-1]

    def band_slice(self, band: int, lo: int, hi: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(keys, earliest document) of ``band``'s buckets with ``lo <= key < hi``, sorted by key."""
        table = self._map("bands.npy")[self.band_offsets[band] : self.band_offsets[band + 1]]
        part = np.array(table[key_range_slice(table["key"], lo, hi)])
        del table
        return part["key"], part["doc"]

    def paragraph_slice(self, lo: int, hi: int | None) -> np.ndarray:
        """Sorted paragraph hashes with ``lo <= hash < hi``."""
        table = self._map("paragraphs.npy")
        part = np.array(table[key_range_slice(table, lo, hi)])
        del table
        return part

    def signature_rows(self, rows: np.ndarray) -> np.ndarray:
        """Signatures of the documents ``rows`` (local indices)."""
        table = self._map("sigs.npy")
        out = np.asarray(table[rows])
        del table
        return out

    def id_rows(self, rows: np.ndarray) -> list[str]:
        """Ids of the documents ``rows`` (local indices)."""
        table = self._map("ids.npy")
        out = [str(x) for x in table[rows]]
        del table
        return out


def open_drop_index(drop_id: str, drop_path: str, scratch: str) -> DropIndex:
    """The complete index below ``drop_path`` as a :class:`DropIndex`.

    Local indices are mapped in place; an object store's files are copied (streamed) into
    ``scratch`` first; a format-1 index is converted into ``scratch``.
    """
    marker = json.loads(read_bytes(join_path(drop_path, INDEX_COMPLETE)) or b"{}")
    index = join_path(drop_path, "index")
    if marker.get("format") != INDEX_FORMAT:
        return _convert_format1(drop_id, index, scratch)
    if is_local(index):
        folder = filesystem(index)[1]
    else:
        folder = scratch
        os.makedirs(folder, exist_ok=True)
        fs, remote = filesystem(index)
        for name in INDEX_FILES:
            fs.get_file(f"{remote.rstrip('/')}/{name}", os.path.join(folder, name))
    return DropIndex(drop_id, folder, int(marker["documents"]), list(marker["band_offsets"]), int(marker["paragraphs"]))


def band_tables(keys: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Per band, the unique keys of the ``valid`` documents with their earliest document (in memory)."""
    docs = np.flatnonzero(valid)
    tables, offsets = [], [0]
    for band in range(keys.shape[1]):
        unique, first = np.unique(keys[docs, band], return_index=True)
        table = np.empty(len(unique), dtype=BAND_DTYPE)
        table["key"], table["doc"] = unique, docs[first]
        tables.append(table)
        offsets.append(offsets[-1] + len(table))
    return (np.concatenate(tables) if tables else np.zeros(0, BAND_DTYPE)), offsets


def _convert_format1(drop_id: str, index: str, scratch: str) -> DropIndex:
    """A format-1 index (``minhash.npz`` + ``paragraphs.npy``, built in memory) in format 2."""
    import io

    os.makedirs(scratch, exist_ok=True)
    with np.load(io.BytesIO(read_bytes(join_path(index, "minhash.npz"))), allow_pickle=False) as z:
        ids, sigs, keys, valid = z["ids"], z["sigs"], z["keys"], z["has_words"]
    paragraphs = np.load(io.BytesIO(read_bytes(join_path(index, "paragraphs.npy"))), allow_pickle=False)
    bands, offsets = band_tables(keys, valid)
    for name, array in (("ids.npy", ids), ("sigs.npy", sigs), ("bands.npy", bands), ("paragraphs.npy", paragraphs)):
        np.save(os.path.join(scratch, name), array, allow_pickle=False)
    return DropIndex(drop_id, scratch, len(ids), offsets, len(paragraphs))


def publish_files(local_folder: str, index: str, names: Iterable[str]) -> None:
    """Copy the index files built in ``local_folder`` to ``index`` on an object store (streamed)."""
    from marin_assets.execution.fence import check_fence

    fs, remote = filesystem(index)
    for name in names:
        check_fence()
        fs.put_file(os.path.join(local_folder, name), f"{remote.rstrip('/')}/{name}")
