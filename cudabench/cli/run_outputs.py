"""Where a run's results go: the results files (JSON, CSV, Markdown), rewritten atomically as results
come in (BackgroundSaver), standard output for one of them, and the results store, appended at the end."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from cudabench.cli.common import check_writable, detail, err, is_stdout, out, say
from cudabench.errors import ShapeError


# The sha256 of each results file a run wrote at its end, by path: watch hands it to the next turn's
# --baselines-digest, so baselines are kept only from the very bytes its run wrote.
WRITTEN: dict[str, str] = {}


@dataclass
class Outputs:
    """The results files of a run, rewritten atomically after each result. An output given as `-`
    goes to standard output once, at the end; the tables then go to stderr so stdout stays parseable."""

    json: Optional[Path]
    csv: Optional[Path]
    markdown: Optional[Path]
    store: Optional[Path] = None   # a results store the run is appended to, at the end
    stored_as: Optional[int] = None
    store_problem: str = ""        # why the append failed, and where the run was kept instead
    _copies: Optional[Callable[[dict], str]] = None  # the JSON copies written while the run goes on

    def check(self, inputs: tuple = ()) -> None:
        """Before any work: each output can be written and none is one of `inputs` (the suite file) or
        another output (the store included)."""
        from cudabench.outputs import check_outputs

        paths = [p for p in (self.json, self.csv, self.markdown) if p is not None]
        if sum(is_stdout(p) for p in paths) > 1:
            raise ShapeError("Only one of --json, --csv and --markdown can go to standard output (-).")
        for path in paths:
            check_writable(path)
        check_outputs([*paths, self.store], inputs)
        if self.store is not None:
            from cudabench.results.store.database import check_readable

            check_writable(self.store)  # its folder can be made and written (the file may not exist yet)
            check_readable(self.store)

    def missing(self) -> list[Path]:
        """The results files asked for that do not exist (standard output aside)."""
        return [p for p in (self.json, self.csv, self.markdown) if p is not None and not is_stdout(p) and not p.exists()]

    @contextlib.contextmanager
    def tables_elsewhere(self) -> Iterator[None]:
        """While a document goes to standard output, the tables and notes go to stderr."""
        claimed = any(is_stdout(p) for p in (self.json, self.csv, self.markdown))
        if claimed:
            out.file = sys.stderr
        try:
            yield
        finally:
            if claimed:
                out.file = None  # back to whatever sys.stdout is

    def save(self, doc: dict, final: bool = False) -> None:
        from cudabench.results.exporters.csv_file import to_csv
        from cudabench.results.exporters.json_document import DocumentText, json_text
        from cudabench.results.exporters.markdown_file import to_markdown
        from cudabench.outputs import write_text_atomic

        for path, text in ((self.json, None), (self.csv, to_csv), (self.markdown, to_markdown)):
            if path is None or (is_stdout(path) and not final):
                continue  # standard output gets the whole document once, at the end
            if text is None and final:
                final_text = json_text(doc) + "\n"
                write_text_atomic(path, final_text)
                WRITTEN[str(path)] = hashlib.sha256(final_text.encode("utf-8")).hexdigest()
            elif text is None:  # copies during the run: compact, each result encoded once
                self._copies = self._copies or DocumentText()
                write_text_atomic(path, self._copies(doc) + "\n")
            else:
                write_text_atomic(path, text(doc))
        if final and self.store is not None:
            self._store(doc)

    def _store(self, doc: dict) -> None:
        """Append the run; if that fails (a locked or full store, Ctrl-C while waiting for it), keep
        the run in a JSON file beside it instead and say so: nothing measured is lost."""
        import sqlite3

        from cudabench.errors import CudabenchError
        from cudabench.results.exporters.json_document import write_json_atomic
        from cudabench.results.store.database import append_run

        try:
            self.stored_as = append_run(self.store, doc)
            return
        except (CudabenchError, sqlite3.Error, OSError, KeyboardInterrupt) as exc:
            why = exc.message if isinstance(exc, CudabenchError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
        kept = Path(f"cudabench-unstored-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json")
        try:
            write_json_atomic(kept, doc)
            self.store_problem = f"could not append the run to {self.store} ({why}); it is kept in {kept}."
        except OSError as exc:
            self.store_problem = f"could not append the run to {self.store} ({why}), nor keep it in {kept} ({exc})."

    def tell(self) -> None:
        for label, path in (("results", self.json), ("csv", self.csv), ("markdown", self.markdown)):
            if path and not is_stdout(path):
                detail(f"{label}: {path}")
        if self.stored_as is not None:
            detail(f"store: {self.store} (run {self.stored_as})")
        if self.store_problem:
            say(("warning: ", "yellow"), self.store_problem, console=err)


class BackgroundSaver:
    """Rewrites the results files as results come in, in a thread of its own: the lane that hands in a
    result goes on at once, and results that come in during a save go into the next one. (Each lane
    used to save in turn, holding the others: a save of 168 results takes about 0.2 s, 16 s over an
    attention sweep.) A failed save is kept for the final one, which says it in the caller's thread."""

    def __init__(self, save: Callable[[], None]) -> None:
        self._save, self._wanted, self._stopping = save, threading.Event(), False
        self.error: Optional[Exception] = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def changed(self) -> None:
        self._wanted.set()

    def _loop(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                return
            try:
                self._save()
            except Exception as exc:  # noqa: BLE001 - the final save, in the caller's thread, reports it
                self.error = exc

    def close(self) -> None:
        """Stop after the save in progress, if any: the caller's final save comes next."""
        self._stopping = True
        self._wanted.set()
        self._thread.join()


def store_path(option: Optional[str]) -> Optional[Path]:
    """The store `--store` names: its path, or the default for `--store` alone (an empty value)."""
    if option is None:
        return None
    if is_stdout(option):
        raise ShapeError("--store needs a file: a results store is a SQLite database, not a stream.",
                         "Give --store PATH, or --store alone for the default store.")
    from cudabench.results.store.access import default_path

    return Path(option) if option else default_path()
