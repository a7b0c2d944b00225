"""Marin's ``marin.utilities.ray_utils``."""

from __future__ import annotations

import os

RAY_CURRENT_CLUSTER_FILE = "/tmp/ray/ray_current_cluster"
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "0.0.0.0", "::1")


def is_local_ray_cluster() -> bool:
    """True when Ray work runs on this machine (a laptop, CI, this project's local head).

    The address is ``$RAY_ADDRESS``, else the one in ``/tmp/ray/ray_current_cluster`` (the file a
    ``ray start`` head leaves), as in Marin. None or ``"local"``: local. One difference from Marin,
    which treats any started cluster as remote: a cluster whose address is this host is local too,
    so a script's "CPU when local, TPU otherwise" branch picks CPU next to our local Ray head.
    """
    address = os.environ.get("RAY_ADDRESS") or None
    if address is None and os.path.exists(RAY_CURRENT_CLUSTER_FILE):
        with open(RAY_CURRENT_CLUSTER_FILE, encoding="utf-8") as handle:
            address = handle.read().strip() or None
    if address is None or address in ("local", "auto"):
        return True
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in _LOCAL_HOSTS
