"""One attempt at a unit, by the runner that holds its lease: staging, status records, publishing.

The attempt (:class:`StepAttempt`)

1. picks its staging folder (:mod:`marin_assets.execution.attempt`): the previous attempt's, adopted
   in place when that attempt is known to have stopped, or a fresh one into which the previous
   attempt is copied when its holder may still be alive -- complete checkpoints only, either way;
2. records RUNNING and ``.executor_info`` (config, version, dependencies; secrets hidden, an
   environment by variable name only);
3. calls the step function (``launch``: in process or on Ray, :mod:`marin_assets.execution.ray_launch`)
   under the lease's fence, with ``output_path`` pointing at the staging folder;
4. rewrites staged text naming the staging folder, publishes the folder into the output while still
   holding the lease, writes the returned metadata and records SUCCESS -- or FAILED with the
   (scrubbed) traceback.

Every status write is conditional (compare-and-swap on the token this attempt last wrote, after
checking the lease is still ours). A lost lease stops the attempt and records nothing; the message
says what was observed (taken over by whom, deleted, not renewable). On a full disk FAILED is still
recorded where the status file's own blocks can hold it; where even that fails, the status stays
RUNNING with no lease -- which the next run treats as not started, and runs again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.attempt import (
    copy_attempt,
    discard_attempts,
    drop_incomplete_checkpoints,
    prepare_staging,
    publish,
    relocate_staged_text,
    rewrite_paths,
    staging_path,
)
from marin_assets.execution.events import EventListener, Progress, Started, emit
from marin_assets.execution.fence import LeaseLostError, StepCancelled
from marin_assets.execution.gcs import is_transient
from marin_assets.execution.lease import StepLease
from marin_assets.execution.outcomes import StepFailedError, StepOutcome
from marin_assets.execution.reachability import explain
from marin_assets.execution.secrets import (
    environment_secrets,
    redact_secrets,
    resolve_secrets,
    scrub,
    scrub_values,
    secret_values,
)
from marin_assets.execution.status import (
    INFO_FILE,
    METADATA_FILE,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    StatusRecord,
    host_id,
    write_json,
    write_status_if,
)
from marin_assets.execution.storage import join_path
from marin_assets.execution.units import unit_label
from marin_assets.execution.versioning import ResolvedStep, StepGraph, instantiate_config
from marin_resources.progress import reporting_to
from marin_resources.runtime_env import secret_names_by
from marin_resources.secret_rule import is_secret_name

logger = logging.getLogger("marin.executor")


def function_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a step function (unwrapping Ray remote functions)."""
    inner = getattr(fn, "_function", fn)
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', repr(inner))}"


def _config_for_info(config: Any) -> Any:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return config


def info_record(
    node: ResolvedStep, partition: str | None, config: Any, staging: str, attempt: str, run_id: str
) -> dict[str, Any]:
    """The ``.executor_info`` of an attempt, secrets hidden (``redact_secrets``: by name, by form, by
    known value -- the config's own ``EnvSecret`` values included -- and environments by name only)."""
    output_path = node.partition_output_path(partition)
    record = {
        "name": node.name,
        "partition": partition,
        "fn": function_name(node.step.fn),
        "fn_name": function_name(node.step.fn),  # Marin's key for the same
        "description": node.step.description,
        "override_output_path": node.step.override_output_path,
        # As published: the output path, not the staging folder the function writes to.
        "config": rewrite_paths(_config_for_info(config), staging, output_path),
        "version": node.version,
        "hash": node.hash,
        "output_path": output_path,
        "attempt": attempt,
        "dependencies": [d.output_path for d in node.dependencies],
        "pseudo_dependencies": [d.output_path for d in node.pseudo_dependencies],
        "pip_dependency_groups": node.step.pip_dependency_groups,
        "resources": repr(node.step.resources) if node.step.resources is not None else None,
        "run_id": run_id,
        # When the attempt started (seconds since the epoch): with the SUCCESS status's time, the
        # step's real duration for whoever finds it done later (a re-execution of an interrupted run).
        "started": time.time(),
    }
    return redact_secrets(record, secret_values(config))


def choose_attempt(lease: StepLease, label: str, status: StatusRecord | None) -> tuple[str, str | None]:
    """The staging folder this attempt writes to, and the attempt to copy into it first.

    The previous attempt's folder itself when that attempt is known to have stopped (it
    recorded FAILED, released the lease, or its holder is provably dead) -- so a retried
    training step resumes from its checkpoints in place. When its holder may still be alive
    (we took its lease over because it went stale: paused, cut off, on another host), or a
    copy from such an attempt was under way: a fresh folder, into which that attempt is copied
    before it is discarded -- the step still resumes, and the old holder never writes into
    anything this attempt publishes.
    """
    previous = status.attempt if status is not None else None
    if previous and not lease.took_over_live_holder:
        logger.info("%s: resuming in the staging folder of attempt %s", label, previous)
        return previous, None
    source = previous or (status.copying_from if status is not None else None)
    return lease.owner[:16], source


@dataclass
class StepAttempt:
    """One attempt at ``(node, partition)`` under ``lease`` (held); :meth:`run` brings it to SUCCESS
    or FAILED, or stops it recording nothing when the lease is lost.

    ``token`` is the status file's token as found when the lease was taken (None: no status file);
    ``status`` its parsed content. ``listeners`` hear :class:`~marin_assets.execution.events.Started`
    when the function starts and a :class:`~marin_assets.execution.events.Progress` for each line it
    reports or prints. The attempt logs no line of the unit's start or end: the console writes
    those from the run's events (:mod:`marin_assets.execution.console`); what it logs itself is
    about its staging folder and its status records (resuming, copying, FAILED not recordable).
    """

    node: ResolvedStep
    partition: str | None
    graph: StepGraph
    lease: StepLease
    token: str | None
    status: StatusRecord | None
    run_id: str
    launch: Callable[[ResolvedStep, Any], Any]
    start: float = field(default_factory=time.monotonic)
    listeners: tuple[EventListener, ...] = ()
    secret_name_rule: Callable[[str], bool] = is_secret_name  # what the launch keeps out of Ray's runtime_env

    @property
    def output_path(self) -> str:
        return self.node.partition_output_path(self.partition)

    @property
    def label(self) -> str:
        return unit_label(self.node, self.partition)

    # ------------------------------------------------------------------ status records
    def record(self, status: str, **fields: Any) -> None:
        """Write ``status`` only while we hold the lease and nobody changed the status since our
        last write; otherwise the lease is lost: raise LeaseLostError saying what was observed."""
        try:
            self.lease.verify()
            new_token = write_status_if(
                self.output_path, status, self.token, self.lease.backend, run_id=self.run_id, **fields
            )
        except LeaseLostError:
            new_token = None
        if new_token is None:
            self.lease.lost.set()
            why = self.lease.lost_reason or "the status file was changed by another writer"
            raise LeaseLostError(
                f"{self.label}: lease on {self.output_path} was lost ({why}); {status} was not recorded by this runner"
            )
        self.token = new_token

    def record_failed(self, error: str, attempt: str | None) -> None:
        """Record FAILED with ``error``; on a full disk with its last line only (what fits in the
        status file's own blocks); when even that cannot be written, say so (the status stays
        RUNNING without a lease: the next run runs the unit again)."""
        try:
            self.record(STATUS_FAILED, error=error, attempt=attempt)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):  # a shorter record helps only a full disk
                self._unrecorded(exc)
                return
            logger.warning(
                "%s: recording FAILED with its traceback failed (%s); recording its last line", self.label, exc
            )
        last_line = (error.strip().splitlines() or ["?"])[-1]
        try:
            self.record(STATUS_FAILED, error=last_line, attempt=attempt)
        except OSError as exc:
            self._unrecorded(exc)

    def _unrecorded(self, exc: OSError) -> None:
        logger.error(
            "%s: FAILED could not be recorded at %s (%s): the status stays RUNNING without a lease; "
            "the next run runs this step again",
            self.label,
            self.output_path,
            exc,
        )

    # ------------------------------------------------------------------ the attempt
    def open_staging(self) -> tuple[str, str]:
        """Pick (and prepare) this attempt's staging folder; record RUNNING naming it. Returns
        ``(attempt id, staging folder)``."""
        attempt, copy_from = choose_attempt(self.lease, self.label, self.status)
        staging = staging_path(self.output_path, attempt)
        if copy_from is not None:
            # The status names the source while we copy: a runner that takes over from us mid-copy
            # copies again (our half-copied folder is never adopted in place).
            self.record(STATUS_RUNNING, copying_from=copy_from)
            discard_attempts(self.output_path, keep=copy_from)
            copy_start = time.monotonic()
            copied = copy_attempt(staging_path(self.output_path, copy_from), staging, self.lease)
            logger.info(
                "%s: continuing from attempt %s, whose holder may still be alive: copied %d files into %s in %.1fs",
                self.label,
                copy_from,
                copied,
                attempt,
                time.monotonic() - copy_start,
            )
        self.record(STATUS_RUNNING, attempt=attempt)
        # Every attempt but ours is made unpublishable before our step writes anything (the one we
        # copied from included: what its holder writes from now on lands in discarded objects).
        discard_attempts(self.output_path, keep=attempt)
        prepare_staging(staging)
        if copy_from is None and self.status is not None and attempt == self.status.attempt:
            drop_incomplete_checkpoints(staging)  # adopted in place: only whole checkpoints stay
        return attempt, staging

    def run(self) -> StepOutcome:
        """Run the attempt to SUCCESS (returned) or FAILED (StepFailedError); LeaseLostError when
        the lease is lost (nothing recorded)."""
        attempt, staging = self.open_staging()
        config: Any = None
        publishing = False
        try:
            config = instantiate_config(
                self.node.step.config, self.node, self.partition, self.graph, output_path=staging
            )
            write_json(
                join_path(self.output_path, INFO_FILE),
                info_record(self.node, self.partition, config, staging, attempt, self.run_id),
            )
            # The attempt id, not the staging folder: a run's log outlives the folder (discarded at
            # publish), and nothing a run leaves behind may name a path that no longer exists.
            started = Started(
                self.node.name,
                self.partition,
                self.output_path,
                where=host_id(),
                fn=function_name(self.node.step.fn),
                attempt=attempt,
            )
            emit(self.listeners, started)
            with self.lease.fencing(), reporting_to(self._report), secret_names_by(self.secret_name_rule):
                result = self.launch(self.node, resolve_secrets(config))
            self.lease.check()
            # Files the step wrote that name its staging folder (summaries, Levanter's configs)
            # name the output instead. Still adoptable if this fails: paths are all they change.
            relocate_staged_text(staging, self.output_path, self.lease)
            # From here the staging folder is half-moved: no later attempt may adopt it.
            self.record(STATUS_RUNNING)
            publishing = True
            publish(staging, self.output_path, self.lease)
            metadata = self._write_metadata(result, config, staging)
        except BaseException as exc:  # noqa: BLE001 - also KeyboardInterrupt: record, then re-raise
            failure, chain = self._fail(exc, config, None if publishing else attempt)
            if not isinstance(exc, Exception):
                raise
            # The original exception stays chained unless its traceback quotes a secret.
            raise failure from (exc if chain else None)
        self.record(STATUS_SUCCESS)
        with contextlib.suppress(OSError):  # leftovers of stopped attempts: nobody will adopt them now
            discard_attempts(self.output_path)
        seconds = time.monotonic() - self.start
        return StepOutcome(self.node.name, self.output_path, self.partition, "ran", seconds, metadata=metadata)

    def _report(self, line: str, metrics: Any, stream: str) -> None:
        """A line the running function reported or printed: one Progress event of the run."""
        event = Progress(self.node.name, self.partition, self.output_path, message=line, metrics=metrics, stream=stream)
        emit(self.listeners, event)

    def _write_metadata(self, result: Any, config: Any, staging: str) -> dict[str, Any]:
        """What the step returned, as ``.executor_metadata.json``: scrubbed like errors (it may quote
        a secret it was given, under any key), paths naming the published output."""
        hidden = secret_values(config) | environment_secrets()
        metadata = scrub_values(result, hidden) if isinstance(result, dict) else {}
        metadata = rewrite_paths(metadata, staging, self.output_path)
        if metadata:
            # As read back (status.read_metadata): secret-named fields and URL credentials hidden.
            write_json(join_path(self.output_path, METADATA_FILE), redact_secrets(metadata))
        return metadata

    def _fail(self, exc: BaseException, config: Any, attempt: str | None) -> tuple[Exception, bool]:
        """Record what ``exc`` (being handled) means; return the error to raise and whether to
        chain ``exc`` to it. A lost lease records nothing and raises LeaseLostError here."""
        if self.lease.lost.is_set() or isinstance(exc, (StepCancelled, LeaseLostError)):
            why = self.lease.lost_reason or str(exc) or type(exc).__name__
            raise LeaseLostError(
                f"{self.label}: lease on {self.output_path} was lost ({why}); stopped the step, recorded nothing"
            ) from None
        # An error message may quote a secret the step was given: never record or log it.
        hidden = secret_values(config) | environment_secrets()
        raw_error = traceback.format_exc()
        error = scrub(raw_error, hidden)
        message = scrub(str(exc), hidden) or type(exc).__name__
        # A timeout or 5xx: is it the store? Probed now (seconds), so the line names the host --
        # and a store that does not answer is not asked to record FAILED (that would only time out
        # again): the status stays RUNNING, its lease released or going stale, for the next runner.
        diagnosis = explain(self.output_path) if is_transient(exc) else None
        if diagnosis is not None:
            return StepFailedError(f"{self.label} failed: {message} -- {diagnosis} (not recorded)"), error == raw_error
        # A failed attempt's staging folder (checkpoints...) is what the next attempt resumes from.
        self.record_failed(error, attempt)
        return StepFailedError(f"{self.label} failed: {message}"), error == raw_error
