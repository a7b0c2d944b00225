"""The log of one command-line run (``executor_main``): everything in a file, the essentials on the console.

* The file ``<executor_info_base_path>/logs/<script>-<run_id>.log`` (default
  ``<prefix>/experiments/logs/``; under the system temp folder, ``marin-logs/``, when that base
  is not a local folder) receives every log record of the run at INFO and above, whatever library
  logged it, the full traceback of every failed step, and all that recording the run in the
  Dagster instance prints (its run logs and tracebacks, database migrations, first-use notices).
* The console shows the engine's own records (``marin.*``) and other libraries' warnings and
  errors -- but nothing of the recording except the engine's lines (every library's INFO lines
  too with ``$MARIN_VERBOSE=1``, which ``marin run -v`` sets); a failed run ends with one
  line per failed step (the step, its output, the exception) and the path of the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import TextIO

from marin_assets.execution.attempt import relocate_any_staging
from marin_assets.execution.status import read_status
from marin_assets.execution.storage import is_local, local_prefix

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _is_engine(record: logging.LogRecord) -> bool:
    return record.name == "marin" or record.name.startswith("marin.")


class ConsoleFilter(logging.Filter):
    """Keeps the console to the engine's records and other libraries' warnings; while ``quiet``
    (recording the run in Dagster) only the engine's. With ``$MARIN_VERBOSE`` (``marin run -v``)
    every record passes."""

    def __init__(self) -> None:
        super().__init__()
        self.quiet = False
        self.verbose = verbose_requested()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.verbose or _is_engine(record):
            return True
        return not self.quiet and record.levelno >= logging.WARNING


VERBOSE_ENV = "MARIN_VERBOSE"


def verbose_requested() -> bool:
    """Whether third-party INFO lines should reach the console (``$MARIN_VERBOSE``, set by ``marin run -v``)."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def log_path(info_base: str, script: str, run_id: str) -> str:
    """Where the run's log goes (a local file; see the module docstring)."""
    name = f"{script or 'experiment'}-{run_id}.log"
    if is_local(info_base):
        return os.path.join(local_prefix(info_base), "logs", name)
    return os.path.join(tempfile.gettempdir(), "marin-logs", name)


class PublishedPathsFormatter(logging.Formatter):
    """Names outputs by their published path: a staging folder is discarded at publish, and the
    log outlives it (library records -- Levanter's, Ray's -- name the folder they were given)."""

    def format(self, record: logging.LogRecord) -> str:
        return relocate_any_staging(super().format(record))


class _RunLogHandler(logging.StreamHandler):
    """The file's handler: a write that fails (a full disk) turns it off with one console line,
    instead of the logging module's traceback for every later record."""

    def __init__(self, stream: TextIO, path: str) -> None:
        super().__init__(stream)
        self.path = path

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's naming
        failure = sys.exc_info()[1]
        if self.level > logging.CRITICAL:
            return  # said once already
        self.setLevel(logging.CRITICAL + 1)  # off: its stream is unusable
        logging.getLogger("marin.executor").warning(
            "run log %s cannot be written (%s): from now on the console only", self.path, failure
        )


class RunLog:
    """The run's log file and console filter (see the module docstring)."""

    def __init__(self, path: str, console: ConsoleFilter | None) -> None:
        self.path = path
        self._console = console
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._stream: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:  # a full disk, a read-only folder: the run goes on, on the console
            logging.getLogger("marin.executor").warning(
                "run log %s cannot be written (%s): the console only", path, exc
            )
            self._stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._handler = _RunLogHandler(self._stream, path)
        self._handler.setFormatter(PublishedPathsFormatter(FORMAT))
        self._handler.setLevel(logging.INFO)

    def attach(self) -> None:
        logging.getLogger().addHandler(self._handler)

    def close(self) -> None:
        logging.getLogger().removeHandler(self._handler)
        try:
            self._stream.close()
        except OSError:  # its last buffered lines could not be written (a full disk)
            self._handler.handleError(logging.makeLogRecord({}))  # says so, unless it did already

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Send what runs inside (the Dagster recording) to the file only: its printed output and
        every non-engine log record -- also when the script configured logging itself
        (``logging.basicConfig(level=INFO)``: its handlers get no alembic / SQLAlchemy / Dagster
        INFO lines), unless ``$MARIN_VERBOSE`` asks for them (``-v``)."""
        if self._console is not None:
            self._console.quiet = True
        foreign: list[logging.Handler] = []
        muted = ConsoleFilter()
        muted.quiet = True
        if self._console is None and not verbose_requested():
            foreign = [h for h in logging.getLogger().handlers if h is not self._handler]
            for handler in foreign:
                handler.addFilter(muted)
        self._flush()
        try:
            with contextlib.redirect_stdout(self._stream), contextlib.redirect_stderr(self._stream):
                yield
        finally:
            self._flush()
            if self._console is not None:
                self._console.quiet = False
            for handler in foreign:
                handler.removeFilter(muted)

    def write_failures(self, failed: Sequence[tuple[str, str, str]]) -> None:
        """The full traceback of each failed step (as its status file keeps it, secrets scrubbed),
        into the file."""
        for name, path, error in failed:
            try:
                record = read_status(path)
            except Exception as exc:  # noqa: BLE001 - the error the run reported is still worth writing
                logging.getLogger("marin.executor").warning(
                    "run log: status of %s unreadable (%s: %s); writing the run's own error instead",
                    path,
                    type(exc).__name__,
                    exc,
                )
                record = None
            trace = record.error if record is not None and record.error else error
            try:
                self._stream.write(relocate_any_staging(f"\n=== {name} ({path}) failed ===\n{trace.rstrip()}\n"))
            except OSError as exc:
                logging.getLogger("marin.executor").warning("run log %s: tracebacks not written: %s", self.path, exc)
                return
        self._flush()

    def _flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:  # a full disk: the file stops here, the run goes on
            self._handler.handleError(logging.makeLogRecord({"msg": str(exc)}))


def configure_console() -> ConsoleFilter | None:
    """Log to the console (stderr) at INFO with :class:`ConsoleFilter`, unless logging is already
    configured (then the caller's handlers stay as they are and None is returned)."""
    root = logging.getLogger()
    if root.handlers:
        return None
    logging.basicConfig(level=logging.INFO, format=FORMAT)
    console = ConsoleFilter()
    for handler in root.handlers:
        handler.addFilter(console)
    return console


@contextlib.contextmanager
def run_log(path: str, console: ConsoleFilter | None) -> Iterator[RunLog]:
    """Log the run to the file ``path`` as well (``console``: the filter :func:`configure_console` made)."""
    log = RunLog(path, console)
    log.attach()
    try:
        yield log
    finally:
        log.close()
