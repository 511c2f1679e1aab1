"""The CSV export: a header and one row per result (cudabench.results.exporters.rows), full precision."""

from __future__ import annotations

import csv
import io
from typing import Any, Mapping

from cudabench.results.exporters.rows import COLUMNS, flat_rows


def to_csv(doc: Mapping[str, Any]) -> str:
    """A header and one row per result; times in seconds (full precision), empty where not measured."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in flat_rows(doc):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()
