"""The dashboard link of a step's placement (no Ray needed): the task's page, its job named by its
submission id; no link to pages that break after a restart (the job page, the log viewer)."""

from __future__ import annotations

from marin_resources.ray_jobs import new_submission_id, ray_links

BASE = "http://127.0.0.1:8265"


def _urls(placement: dict) -> dict[str, str]:
    return {label: link["value"] for label, link in ray_links(placement, BASE).items()}


def test_links_name_the_submission_id_unique_across_restarts():
    placement = {
        "ray_job_id": "01000000",
        "ray_job_submission_id": "marin-20261125-175000-0a1b2c3d",
        "ray_task_id": "t1",
        "ray_node_id": "n1",
        "ray_worker_log": "worker-w-01000000-7.out",
    }
    urls = _urls(placement)
    # Only the task page: after a restart it says "not found" (the job page and the log viewer
    # would say "Job Query Error" / "Failed to load").
    assert urls == {"marin/ray_task": f"{BASE}/#/jobs/marin-20261125-175000-0a1b2c3d/tasks/t1"}
    # Without a submission id (an embedded cluster), the job id is all there is.
    assert _urls({**placement, "ray_job_submission_id": None}) == {"marin/ray_task": f"{BASE}/#/jobs/01000000/tasks/t1"}
    assert _urls({**placement, "ray_task_id": None}) == {}


def test_submission_ids_differ_between_drivers():
    ids = {new_submission_id() for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("marin-") for i in ids)
