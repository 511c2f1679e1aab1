#!/usr/bin/env python3
"""A scripted trial of bad inputs through the real command line (project issue 31, item 8).

Every case runs `python -m cudabench ...` as its own process (the console entry, supervisor
included), in a folder of its own that holds the case's input files, under a time limit. A case
fails when it
  - printed a Python traceback,
  - hung (ran past its time limit; its whole process group is then killed),
  - changed, replaced or removed one of its input files (hashed before and after),
  - exited 0 although the input is bad, or exited non-zero saying nothing,
  - exited non-zero without an error paragraph (a line starting "error:", click's "Error:" or
    compare's "FAIL").
Cases marked `odd` are strange but arguably valid inputs: only a traceback, a hang or a changed
input counts against them. Also listed, without counting as failures: bad inputs that were only
stopped by the missing GPU ("No CUDA device": the input was not checked before that), and files a
refused command left behind.

    python scripts/bad_inputs_trial.py              # every case, 3 at a time
    python scripts/bad_inputs_trial.py -k store -j 4
    python scripts/bad_inputs_trial.py --list

Exit status: 0 when no case failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import hashlib
import json
import os
import random
import re
import shlex
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIMEOUT = 30.0
PARAGRAPH = re.compile(r"^(error:|Error:|FAIL |FAILED )", re.MULTILINE)
NO_GPU = "No CUDA device"


# ---- what a case is ------------------------------------------------------------------------------

class Fifo:
    """A named pipe (nobody ever writes to it)."""


class Folder:
    """An empty folder."""


@dataclass
class Link:
    """A symlink to `target` ({d} is the case folder)."""
    target: str


@dataclass
class HardLink:
    target: str  # relative to the case folder


@dataclass
class Maker:
    """Made by make(path) (a SQLite database, a socket)."""
    make: Callable[[Path], None]


@dataclass
class Case:
    name: str                      # category/variant, unique
    command: str                   # the cudabench command, for the tally
    args: list[str]                # after `python -m cudabench`; {d} is the case folder
    files: dict[str, Any] = field(default_factory=dict)   # relative path -> bytes/str/Fifo/Folder/Link/...
    env: dict[str, str] = field(default_factory=dict)
    odd: bool = False              # strange but arguably valid: exit 0 allowed
    may_change: str = ""           # why changing an input is by design here (a note, not a failure)
    judge: Optional[Callable[["Outcome"], str]] = None    # a further problem in words, or ""
    timeout: float = TIMEOUT


@dataclass
class Outcome:
    case: Case
    argv: list[str]
    code: Optional[int]
    output: str
    seconds: float
    hung: bool
    changed: list[str]
    left: list[str]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---- a valid results document, a valid store ----------------------------------------------------

def valid_document() -> dict:
    """A small sweep (add2 and its baseline at three sizes) as `run --json` writes it."""
    import numpy as np

    from cudabench.results.exporters.json_document import document, json_safe
    from cudabench.results.records.model import Case as RCase, Check, Environment, Measurement, Result
    from cudabench.results.records.stats import summarize

    env = Environment(gpu="NVIDIA H100 80GB HBM3", capability="9.0", sm_count=132, driver="550.54.15",
                      cuda_runtime="12.4", torch="2.4.0", cudabench="0.1.0", date="2024-06-01T12:00:00+00:00")
    results = []
    rng = np.random.default_rng(0)
    for i, n in enumerate((1024, 4096, 16384)):
        for subject, role, scale in (("add2", "variant", 1.0), ("torch-add", "baseline", 1.3)):
            median = scale * n * 1e-9
            samples = tuple(float(v) for v in median * (1 + 0.01 * rng.standard_normal(30)))
            m = Measurement(samples=samples, timing="sync", warmup_calls=3, warmup_seconds=0.1, stop_reason="test")
            results.append(Result(RCase("add2", (("n", n),), "fwd"), subject, role,
                                  check=Check((("out", 2e-7),), 1e-5), measurement=m, stats=summarize(samples),
                                  flops=float(n), bytes=12.0 * n))
    doc = document(results, env, "cudabench run --config trial.toml", seed=7, source_hashes={"add2": "ab" * 32})
    return json.loads(json.dumps(json_safe(doc)))


def make_store(doc: dict, runs: int = 2, after: Optional[Callable[[sqlite3.Connection], None]] = None,
               journal: str = "WAL"):
    """A Maker of a store holding `runs` copies of `doc`, then changed by after(connection), left in
    `journal` mode (cudabench's own stores are WAL) with no -wal or -shm file beside it."""
    def make(path: Path) -> None:
        from cudabench.results.store.database import Store
        from cudabench.results.store.provenance import Provenance

        with Store(path) as store:
            for i in range(runs):
                store.append(doc, Provenance(f"{i:040x}", False), f"2024-06-0{i + 1}T12:00:00+00:00")
        db = sqlite3.connect(path, isolation_level=None)
        try:
            if after is not None:
                after(db)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if journal != "WAL":
                db.execute(f"PRAGMA journal_mode={journal}")
        finally:
            db.close()
        for extra in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            extra.unlink(missing_ok=True)
    return Maker(make)


def sqlite_file(statements: list[str]) -> Maker:
    def make(path: Path) -> None:
        db = sqlite3.connect(path, isolation_level=None)
        for sql in statements:
            db.execute(sql)
        db.close()
    return Maker(make)


def unix_socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the socket file stays


# ---- the cases -----------------------------------------------------------------------------------

GOOD_SUITE = 'name = "trial"\n[timing]\nrepeat = 5\n[[case]]\nkernels = ["add2"]\nshape = { n = 1024 }\n'


def suite_text(top: str = "", timing: str = "repeat = 5\n", case: str = 'kernels = ["add2"]\nshape = { n = 1024 }\n') -> str:
    return top + ("[timing]\n" + timing if timing is not None else "") + "[[case]]\n" + case


def suite_cases() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, content: Any, odd: bool = False, env: Optional[dict] = None, extra: tuple = ()) -> None:
        cases.append(Case(f"suite/{name}", "run", ["run", "--config", "{d}/suite.toml", *extra],
                          {"suite.toml": content}, env or {}, odd))

    # syntax
    syntax = {
        "unclosed-array": '[[case]]\nkernels = ["add2"\n',
        "unclosed-table": '[[case]\nkernels = ["add2"]\n',
        "unclosed-string": '[[case]]\nkernels = ["add2]\n',
        "no-value": '[[case]]\nkernels =\n',
        "no-key": '[[case]]\n= ["add2"]\n',
        "duplicate-key": '[[case]]\nkernels = ["add2"]\nkernels = ["add2"]\n',
        "duplicate-table": '[timing]\nrepeat = 5\n[timing]\nrepeat = 6\n[[case]]\nkernels = ["add2"]\n',
        "table-then-array": '[case]\nkernels = ["add2"]\n[[case]]\nkernels = ["add2"]\n',
        "bad-escape": '[[case]]\nkernels = ["add\\q2"]\n',
        "bad-unicode-escape": '[[case]]\nkernels = ["\\uD800"]\n',
        "bad-date": 'name = 2024-13-45\n[[case]]\nkernels = ["add2"]\n',
        "bare-word-value": '[[case]]\nkernels = add2\n',
        "trailing-comma-inline": '[[case]]\nkernels = ["add2"]\nshape = { n = 1, }\n',
        "newline-in-inline": '[[case]]\nkernels = ["add2"]\nshape = { n = 1,\n}\n',
        "control-char": '[[case]]\nkernels = ["add\x01 2"]\n',
        "nul-char": '[[case]]\nkernels = ["add2"]\x00\n',
        "lone-cr": '[[case]]\rkernels = ["add2"]\r',
        "unclosed-multiline": '[[case]]\nkernels = ["""add2\n',
        "json-not-toml": '{"case": [{"kernels": ["add2"]}]}\n',
        "yaml-not-toml": 'case:\n  - kernels: [add2]\n',
        "only-header": '[[case]]\n[[',
        "dotted-conflict": 'a = 1\na.b = 2\n[[case]]\nkernels = ["add2"]\n',
        "number-leading-zero": '[timing]\nrepeat = 05\n[[case]]\nkernels = ["add2"]\n',
        "hex-float": '[timing]\nrepeat = 0x1.8p3\n[[case]]\nkernels = ["add2"]\n',
    }
    for name, text in syntax.items():
        add(f"syntax/{name}", text)
    # nesting and size
    for depth in (60, 1000, 100_000):
        add(f"depth/array-{depth}", '[[case]]\nkernels = ' + "[" * depth + '"add2"' + "]" * depth + "\n")
        add(f"depth/inline-table-{depth}", '[[case]]\nkernels = ["add2"]\nshape = ' + "{a = " * depth + "1"
            + " }" * depth + "\n")
    add("depth/unclosed-100000", '[[case]]\nkernels = ' + "[" * 100_000 + "\n")
    add("depth/dotted-header-5000", "[" + ".".join(["a"] * 5000) + "]\nx = 1\n[[case]]\nkernels = [\"add2\"]\n")
    add("depth/shape-list-deep", '[[case]]\nkernels = ["add2"]\nshape = { n = ' + "[" * 500 + "1" + "]" * 500 + " }\n")
    add("size/10000-cases", '[[case]]\nkernels = ["nope"]\n' * 10_000)
    add("size/1MB-name", 'name = "' + "x" * 1_000_000 + '"\n[[case]]\nkernels = ["add2"]\n')
    add("size/1MB-kernel-name", '[[case]]\nkernels = ["' + "k" * 1_000_000 + '"]\n')
    add("size/100000-kernels", '[[case]]\nkernels = [' + ", ".join(f'"k{i}"' for i in range(100_000)) + "]\n")
    add("size/product-200x200", suite_text(case='kernels = ["add2"]\nshape = { n = [' + ", ".join(map(str, range(1, 201)))
                                            + "], m = [" + ", ".join(map(str, range(1, 201))) + "] }\n"))
    add("size/over-limit", GOOD_SUITE, env={"CUDABENCH_MAX_INPUT_BYTES": "40"})
    # huge numbers
    add("huge/repeat-5000-digits", suite_text(timing="repeat = " + "9" * 5000 + "\n"))
    add("huge/shape-5000-digits", suite_text(case='kernels = ["add2"]\nshape = { n = ' + "9" * 5000 + " }\n"))
    add("huge/shape-2^64", suite_text(case='kernels = ["add2"]\nshape = { n = 18446744073709551616 }\n'))
    add("huge/shape-text-10^99999", suite_text(case='kernels = ["add2"]\nshape = { n = "10^99999" }\n'))
    add("huge/shape-text-2^100000000", suite_text(case='kernels = ["add2"]\nshape = { n = "2^100000000" }\n'))
    add("huge/shape-float-1e99999", suite_text(case='kernels = ["add2"]\nshape = { n = 1e99999 }\n'))
    add("huge/range-to-2^62", suite_text(case='kernels = ["add2"]\nshape = { n = { from = 1, to = "2^62", times = 2 } }\n'))
    add("huge/range-step-1", suite_text(case='kernels = ["add2"]\nshape = { n = { from = 1, to = "2^40", step = 1 } }\n'))
    add("huge/repeat-2^63", suite_text(timing="repeat = 9223372036854775807\n"))
    add("huge/timeout-1e308", suite_text(timing="timeout = 1e308\n"))
    # wrong types and values at every real key
    wrong_top = {
        "name": ["5", "true", "[1]", "{ a = 1 }", "1979-05-27", "1.5"],
        "description": ["5", "[]", "{ x = 1 }"],
        "kernels_dirs": ["5", '"nope"', "[1]", '[""]', '["suite.toml"]', "[{ a = 1 }]", "true", '["/dev/null"]'],
        "gpus": ['"some"', "5", "[-1]", "[1.5]", "[true]", "[]", "[99999]", '""', "{}"],
        "cluster": ["5", "[]", "true", "{}"],
    }
    for key, values in wrong_top.items():
        for i, value in enumerate(values):
            add(f"type/top.{key}/{i}", suite_text(top=f"{key} = {value}\n"))
    for i, value in enumerate(["5", '"sync"', "[]", "true"]):
        add(f"type/top.timing/{i}", f"timing = {value}\n[[case]]\nkernels = [\"add2\"]\n")
    for i, value in enumerate(["5", '"x"', "[]", "[1]", "[[]]", "true"]):
        add(f"type/top.case/{i}", f"case = {value}\n")
    add("type/top.case/single-table", '[case]\nkernels = ["add2"]\n')
    wrong_timing = {
        "timing": ['"bogus"', "5", "true", "[]", '""', '"SYNC"'],
        "cold": ['"yes"', "1", "[]", "0.0"],
        "repeat": ["0", "-1", "1.5", '"5"', "1000000000000000000", "true", "nan", "inf"],
        "min_time": ["0", "-1", "nan", "inf", '"1s"', "true", "1e300"],
        "noise": ["0", "2", "nan", "-inf", '"x"'],
        "max_time": ["0", "1e9", "nan", '"2"', "-0.0"],
        "warmup": ['""', '"abc"', "-1", "0", "1.5", '"1.5"', '"10us"', "true", "[]", '"999999999999999"', '"1e3ms"',
                   '"-5ms"', '"100 ms ms"'],
        "timeout": ["0", "-5", "nan", "inf", '"x"', "1e10"],
    }
    for key, values in wrong_timing.items():
        for i, value in enumerate(values):
            add(f"type/timing.{key}/{i}", suite_text(timing=f"{key} = {value}\n"))
    add("type/timing/repeat-and-min_time", suite_text(timing="repeat = 5\nmin_time = 0.5\n"))
    wrong_case = {
        "kernels": ["[]", '""', '[""]', "[1]", "5", "{}", '["nope"]', '["add2", 5]', '[" "]', '["add2[/x]"]',
                    '["\\u001b[31mred"]'],
        "shape": ["5", '"n=5"', "[]", "[5]", '{ n = "abc" }', "{ n = -1 }", "{ n = 1.5 }", "{ n = true }",
                  "{ n = [] }", "{ n = {} }", "{ n = { from = 1 } }", "{ n = { from = 10, to = 1, times = 2 } }",
                  "{ n = { from = 1, to = 10, times = 1 } }", "{ n = { from = 1, to = 10, step = 0 } }",
                  "{ n = { from = 1, to = 10, times = 2, step = 2 } }", "{ n = { from = 1, to = 1000000, step = 1 } }",
                  '{ n = "2^64" }', "{ n = { from = 1, to = 10, times = 2, extra = 1 } }", "{ bogus = 5 }",
                  '{ n = "" }', '{ n = "0x10" }', "{ n = [1, \"x\"] }", '{ "" = 5 }',
                  "[{ n = 1 }, 5]", "{ n = 1979-05-27 }"],  # (no valid value such as n = 3 here)
        "directions": ['"sideways"', "[]", "[5]", '["fwd", "bogus"]', "5", '["bwd"]'],
        "baselines": ["5", "[5]", '["nope"]', '[""]', "{}"],
        "dtypes": ['["float64"]', "[]", "5", '"int8"', '["float32", 1]'],
    }
    for key, values in wrong_case.items():
        for i, value in enumerate(values):
            body = 'kernels = ["add2"]\n' + f"{key} = {value}\n" if key != "kernels" else f"kernels = {value}\n"
            add(f"type/case.{key}/{i}", suite_text(case=body))
    add("type/case/no-kernels", suite_text(case="shape = { n = 1024 }\n"))
    # unknown keys
    add("unknown/top", suite_text(top='kernel = "add2"\n'))
    add("unknown/table", '[timings]\nrepeat = 5\n[[case]]\nkernels = ["add2"]\n')
    add("unknown/case", suite_text(case='kernel = ["add2"]\n'))
    add("unknown/case-shapes", suite_text(case='kernels = ["add2"]\nshapes = { n = 5 }\n'))
    add("unknown/timing", suite_text(timing="repat = 5\n"))
    add("unknown/range", suite_text(case='kernels = ["add2"]\nshape = { n = { from = 1, stop = 8, times = 2 } }\n'))
    # empty, binary, encodings
    add("empty/zero-bytes", b"")
    add("empty/whitespace", " \n\t\n")
    add("empty/comments", "# nothing\n# here\n")
    add("empty/timing-only", "[timing]\nrepeat = 5\n")
    add("binary/nul-bytes", b"\x00" * 256)
    add("binary/random", random.Random(1).randbytes(4096))
    add("binary/utf16", GOOD_SUITE.encode("utf-16"))
    add("binary/utf8-bom", b"\xef\xbb\xbf" + GOOD_SUITE.encode())
    add("binary/latin1", 'name = "caf\xe9"\n[[case]]\nkernels = ["add2"]\n'.encode("latin-1"))
    add("binary/gzip", __import__("gzip").compress(GOOD_SUITE.encode()))
    add("binary/elf", Path(sys.executable).resolve().read_bytes()[:65536])
    # special files and paths
    specials = {
        "fifo": Fifo(), "folder": Folder(), "symlink-loop": Link("{d}/suite.toml"), "dangling": Link("{d}/gone.toml"),
        "dev-zero": Link("/dev/zero"), "dev-null": Link("/dev/null"), "dev-urandom": Link("/dev/urandom"),
        "proc-status": Link("/proc/self/status"), "proc-mem": Link("/proc/self/mem"), "socket": Maker(unix_socket),
        "etc-passwd": Link("/etc/passwd"), "link-to-folder": Link("/"), "link-to-fifo": Link("{d}/pipe"),
    }
    for name, content in specials.items():
        files = {"suite.toml": content}
        if name == "link-to-fifo":
            files["pipe"] = Fifo()
        cases.append(Case(f"suite/special/{name}", "run", ["run", "--config", "{d}/suite.toml"], files))
    for name, path in {"missing": "{d}/nope.toml", "empty-path": "", "dash": "-", "long-name": "{d}/" + "x" * 300,
                       "long-path": "{d}/" + "/".join(["d"] * 3000), "file-as-folder": "{d}/plain/suite.toml",
                       "dev-stdin": "/dev/stdin", "dev-fd-0": "/dev/fd/0", "proc-dir": "/proc", "root": "/"}.items():
        cases.append(Case(f"suite/path/{name}", "run", ["run", "--config", path], {"plain": "x"}))
    # a suite whose kernels_dirs holds a broken family
    cases.append(Case("suite/kernels_dirs/raising-spec", "run", ["run", "--config", "{d}/suite.toml"],
                      {"suite.toml": 'kernels_dirs = ["k"]\n[[case]]\nkernels = ["add2"]\n',
                       "k/fam/spec.py": "raise ValueError('bad spec')\n"}))
    cases.append(Case("suite/kernels_dirs/os-exit-spec", "run", ["run", "--config", "{d}/suite.toml"],
                      {"suite.toml": 'kernels_dirs = ["k"]\n[[case]]\nkernels = ["add2"]\n',
                       "k/fam/spec.py": "import os\nos._exit(0)\n"}))
    cases.append(Case("suite/kernels_dirs/self", "run", ["run", "--config", "{d}/suite.toml"],
                      {"suite.toml": 'kernels_dirs = ["."]\n[[case]]\nkernels = ["add2"]\n'}, odd=True))
    cases.append(Case("suite/with-shape-option", "run", ["run", "--config", "{d}/suite.toml", "--shape", "n=5"],
                      {"suite.toml": GOOD_SUITE}))
    cases.append(Case("suite/with-kernel-option", "run", ["run", "--config", "{d}/suite.toml", "-k", "add2"],
                      {"suite.toml": GOOD_SUITE}))
    return cases


DELETE = object()


def mutated(doc: dict, path: tuple, value: Any) -> dict:
    doc = copy.deepcopy(doc)
    target = doc
    for step in path[:-1]:
        target = target[step]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


def swaps(value: Any) -> list[Any]:
    """Values of other JSON types than `value`'s: each is wrong for a strictly typed field."""
    if isinstance(value, bool):
        return ["yes", 1, [True]]
    if isinstance(value, (int, float)):
        return ["12", {}, True, [value]]
    if isinstance(value, str):
        return [12345, [value], {"s": value}, False]
    if isinstance(value, list):
        return ["list", {"0": 1}, 7]
    if isinstance(value, dict):
        return [[], "table", 3]
    return []


def results_cases(doc: dict) -> list[Case]:
    cases: list[Case] = []
    good = json.dumps(doc, indent=1)
    commands = [
        ("compare", lambda: ["compare", "{d}/good.json", "{d}/bad.json"]),
        ("plot", lambda: ["plot", "{d}/bad.json", "-o", "{d}/out.png"]),
        ("report", lambda: ["report", "--html", "{d}/out.html", "--results", "{d}/bad.json", "--store", "{d}/none.db"]),
        ("compare", lambda: ["compare", "{d}/bad.json", "{d}/good.json", "--json", "{d}/verdicts.json"]),
    ]
    counter = [0]

    def add(name: str, content: Any, odd: bool = False, every: bool = False, env: Optional[dict] = None) -> None:
        chosen = commands if every else [commands[counter[0] % len(commands)]]
        counter[0] += 1
        for command, args in chosen:
            suffix = f"/{command}{commands.index((command, args))}" if every else ""
            cases.append(Case(f"json/{name}{suffix}", command, args(), {"good.json": good, "bad.json": content},
                              env or {}, odd))

    # syntax, encodings, special files: every command
    for name, text in {
        "empty": b"", "whitespace": " \n", "truncated": good[: len(good) // 2], "trailing-comma": '{"a": 1,}',
        "single-quotes": "{'schema': 'cudabench.results'}", "comments": '// x\n{"schema": "cudabench.results"}',
        "nul": b'{"schema"\x00: 1}', "utf16": good.encode("utf-16"), "latin1": '{"command": "caf\xe9"}'.encode("latin-1"),
        "bom": b"\xef\xbb\xbf" + good.encode(), "two-documents": good + good, "toml": GOOD_SUITE,
        "random-bytes": random.Random(2).randbytes(2048),
        "depth-100000": "[" * 100_000 + "]" * 100_000, "depth-unclosed": "[" * 100_000,
        "int-5000-digits": '{"schema": "cudabench.results", "schema_version": ' + "9" * 5000 + "}",
    }.items():
        add(f"syntax/{name}", text, every=True)
    for name, content in {"fifo": Fifo(), "folder": Folder(), "symlink-loop": Link("{d}/bad.json"),
                          "dangling": Link("{d}/gone.json"), "dev-zero": Link("/dev/zero"),
                          "dev-null": Link("/dev/null"), "proc-self-environ": Link("/proc/self/environ"),
                          "socket": Maker(unix_socket)}.items():
        add(f"special/{name}", content, every=True)
    add("limit/over", good, every=True, env={"CUDABENCH_MAX_INPUT_BYTES": "10"})
    # valid JSON, wrong shape at the top
    for name, value in {"list": [], "string": "results", "number": 5, "null": None, "true": True,
                        "empty-object": {}, "schema-only": {"schema": "cudabench.results"},
                        "list-of-doc": [doc]}.items():
        add(f"shape/top-{name}", json.dumps(value))
    for name, value in {"schema-other": ("schema", "cudabench.resultz"), "version-99": ("schema_version", 99),
                        "version-0": ("schema_version", 0), "version-string": ("schema_version", "2"),
                        "version-float": ("schema_version", 2.0), "version-bool": ("schema_version", True),
                        "version-huge": ("schema_version", 10**30), "results-empty": ("results", [])}.items():
        add(f"shape/{name}", json.dumps(mutated(doc, (value[0],), value[1])), odd=name == "results-empty")
    # every key at every level: its value swapped for other JSON types
    levels: list[tuple] = [()]
    levels += [("environment",), ("results", 0), ("results", 0, "case"), ("results", 0, "stats"),
               ("results", 0, "measurement"), ("results", 0, "check")]
    for level in levels:
        table = doc
        for step in level:
            table = table[step]
        for key, value in table.items():
            if level == () and key in ("schema", "schema_version"):
                continue
            path = (*level, key)
            where = ".".join(map(str, path))
            for i, other in enumerate(swaps(value)[:2] if level in ((), ("results", 0)) else swaps(value)[:1]):
                add(f"swap/{where}/{i}", json.dumps(mutated(doc, path, other)))
    # required keys left out
    for path in [("environment",), ("results",), ("command",), ("environment", "gpu"), ("results", 0, "case"),
                 ("results", 0, "subject"), ("results", 0, "status"), ("results", 0, "case", "key"),
                 ("results", 0, "stats", "median"), ("results", 0, "measurement", "samples")]:
        add(f"missing/{'.'.join(map(str, path))}", json.dumps(mutated(doc, path, DELETE)))
    # elements and bounds
    for name, (path, value) in {
        "sample-string": (("results", 0, "measurement", "samples", 0), "fast"),
        "sample-null": (("results", 0, "measurement", "samples", 0), None),
        "shape-value-string": (("results", 0, "case", "shape", "n"), "1024"),
        "shape-value-2^70": (("results", 0, "case", "shape", "n"), 2**70),
        "shape-value-float": (("results", 0, "case", "shape", "n"), 1.5),
        "error-value-string": (("results", 0, "check", "errors", "out"), "small"),
        "role-other": (("results", 0, "role"), "reference"),
        "status-other": (("results", 0, "status"), "fine"),
        "integrity-verdict": (("results", 0, "integrity"), [{"name": "x", "verdict": "maybe", "detail": ""}]),
        "sm-count-2^70": (("environment", "sm_count"), 2**70),
        "settings-number": (("environment", "settings"), {"timing": 5}),
        "result-null": (("results", 0), None),
        "result-list": (("results", 0), []),
        "results-object": (("results",), {"0": doc["results"][0]}),
    }.items():
        add(f"element/{name}", json.dumps(mutated(doc, path, value)))
    # strange but well-typed documents: no traceback, no hang; any exit
    first = ("results", 0)
    odd = {
        "nan-literal-median": json.dumps(doc).replace('"median": ' + json.dumps(doc["results"][0]["stats"]["median"]),
                                                      '"median": NaN', 1),
        "infinity-literal": json.dumps(mutated(doc, (*first, "flops"), 1.0)).replace('"flops": 1.0', '"flops": Infinity', 1),
        "1e400": json.dumps(mutated(doc, (*first, "bytes"), 1.0)).replace('"bytes": 1.0', '"bytes": 1e400', 1),
        "nan-strings-everywhere": json.dumps(mutated(doc, (*first, "stats"), {k: "nan" for k in doc["results"][0]["stats"]})),
        "negative-samples": json.dumps(mutated(doc, (*first, "measurement", "samples"), [-1.0] * 30)),
        "zero-samples": json.dumps(mutated(doc, (*first, "measurement", "samples"), [0.0] * 30)),
        "empty-samples": json.dumps(mutated(doc, (*first, "measurement", "samples"), [])),
        "one-sample": json.dumps(mutated(doc, (*first, "measurement", "samples"), [1e-6])),
        "ok-without-stats": json.dumps(mutated(doc, (*first, "stats"), None)),
        "ok-without-measurement": json.dumps(mutated(doc, (*first, "measurement"), None)),
        "ok-without-check": json.dumps(mutated(doc, (*first, "check"), None)),
        "stats-n-negative": json.dumps(mutated(doc, (*first, "stats", "n"), -5)),
        "key-not-shape": json.dumps(mutated(doc, (*first, "case", "key"), "other[n=1]/fwd")),
        "duplicate-results": json.dumps(mutated(doc, ("results",), doc["results"] + doc["results"])),
        "empty-shape": json.dumps(mutated(doc, (*first, "case", "shape"), {})),
        "skipped-and-ok": json.dumps(mutated(doc, (*first, "skipped"), "constraint: no")),
        "lone-surrogate-subject": json.dumps(mutated(doc, (*first, "subject"), "add2\ud800")),
        "lone-surrogate-gpu": json.dumps(mutated(doc, ("environment", "gpu"), "H100\udfff")),
        "lone-surrogate-command": json.dumps(mutated(doc, ("command",), "cudabench \ud800")),
        "lone-surrogate-shape-name": json.dumps(mutated(doc, (*first, "case", "shape"), {"n\ud800": 1024})),
        "escape-codes-subject": json.dumps(mutated(doc, (*first, "subject"), "\x1b[2J\x1b[31madd2\x07")),
        "markup-subject": json.dumps(mutated(doc, (*first, "subject"), "[bold red]add2[/]")),
        "html-subject": json.dumps(mutated(doc, (*first, "subject"), "<script>alert(1)</script>")),
        "1MB-subject": json.dumps(mutated(doc, (*first, "subject"), "s" * 1_000_000)),
        "rtl-and-zero-width": json.dumps(mutated(doc, (*first, "subject"), "add2\u202e\u200b\ufeff")),
        "extra-keys-everywhere": json.dumps(mutated(mutated(doc, ("extra",), {"deep": [1, 2]}), (*first, "x"), None)),
        "many-results": json.dumps(mutated(doc, ("results",), doc["results"] * 2000)),
        "million-samples": json.dumps(mutated(doc, (*first, "measurement", "samples"),
                                              [1e-6 * (1 + (i % 7) / 100) for i in range(1_000_000)])),
        "incomplete": json.dumps(mutated(doc, ("complete",), False)),
        "all-skipped": json.dumps(mutated(doc, ("results",), [dict(r, status="SKIP", skipped="constraint: x",
                                                                  stats=None, measurement=None, check=None)
                                                             for r in doc["results"]])),
        "huge-median": json.dumps(mutated(doc, (*first, "stats", "median"), 1e308)),
        "tiny-median": json.dumps(mutated(doc, (*first, "stats", "median"), 5e-324)),
        "int-limit-2^63-1": json.dumps(mutated(doc, (*first, "peak_memory"), 2**63 - 1)),
        "shape-1000-params": json.dumps(mutated(doc, (*first, "case", "shape"), {f"p{i}": i for i in range(1000)})),
    }
    for name, text in odd.items():
        add(f"odd/{name}", text, odd=True, every=name in ("lone-surrogate-subject", "million-samples", "ok-without-stats",
                                                           "empty-samples", "nan-strings-everywhere"))
    return cases


def store_cases(doc: dict) -> list[Case]:
    cases: list[Case] = []
    commands = [
        ("history", ["history", "--store", "{d}/store.db"]),
        ("compare", ["compare", "@latest", "@latest~1", "--store", "{d}/store.db"]),
        ("report", ["report", "--html", "{d}/out.html", "--store", "{d}/store.db"]),
        ("run", ["run", "-k", "add2", "--store", "{d}/store.db"]),
    ]

    def bad_document(text: str):
        return make_store(doc, after=lambda db: db.execute("UPDATE runs SET document = ? WHERE id = 2", (text,)))

    stores: dict[str, tuple[Any, tuple[str, ...]]] = {
        "garbage": (random.Random(3).randbytes(8192), ("history", "compare", "report", "run")),
        "empty-file": (b"", ("history", "compare", "report")),
        "folder": (Folder(), ("history", "compare", "report", "run")),
        "dev-null": (Link("/dev/null"), ("history", "compare", "report", "run")),
        "fifo": (Fifo(), ("history", "compare", "report", "run")),
        "symlink-loop": (Link("{d}/store.db"), ("history", "compare", "report", "run")),
        "text": ("runs\n", ("history", "run")),
        "sqlite-header-then-garbage": (b"SQLite format 3\x00" + random.Random(4).randbytes(4096),
                                       ("history", "compare", "report", "run")),
        "foreign-schema": (sqlite_file(["CREATE TABLE users (id INTEGER, name TEXT)",
                                        "INSERT INTO users VALUES (1, 'x')"]), ("history", "compare", "report", "run")),
        "newer-version": (sqlite_file(["PRAGMA user_version = 99"]), ("history", "compare", "run")),
        "version-2-no-tables": (sqlite_file(["PRAGMA user_version = 2"]), ("history", "compare", "report")),
        "runs-without-columns": (sqlite_file(["CREATE TABLE runs (id INTEGER PRIMARY KEY)",
                                              "CREATE TABLE results (run_id INTEGER)", "INSERT INTO runs VALUES (1)",
                                              "INSERT INTO runs VALUES (2)", "PRAGMA user_version = 2"]),
                                 ("history", "compare")),
        "document-unclosed": (bad_document("{"), ("history", "compare", "report")),
        "document-list": (bad_document("[]"), ("history", "compare")),
        "document-null": (bad_document("null"), ("history", "compare")),
        "document-wrong-shape": (bad_document('{"schema": "cudabench.results", "schema_version": 2}'),
                                 ("history", "compare")),
        "document-deep": (bad_document("[" * 100_000 + "]" * 100_000), ("history", "compare")),
        "document-blob": (make_store(doc, after=lambda db: db.execute(
            "UPDATE runs SET document = X'00FFFE' WHERE id = 2")), ("history", "compare")),
        "document-integer": (make_store(doc, after=lambda db: db.execute(
            "UPDATE runs SET document = 5 WHERE id = 2")), ("history", "compare")),
        "truncated-store": (None, ("history", "compare")),  # filled below
        "no-runs": (make_store(doc, runs=0), ("compare", "report")),
        "valid-but-rollback-journal": (make_store(doc, journal="DELETE"), ("history", "compare", "report")),
        "old-version-1": (make_store(doc, after=lambda db: [db.execute("DROP INDEX results_by_subject"),
                                                            db.execute("ALTER TABLE results DROP COLUMN source_hash"),
                                                            db.execute("PRAGMA user_version = 1")]),
                          ("history", "compare")),
        "one-run": (make_store(doc, runs=1), ("compare",)),
    }

    def truncated(path: Path) -> None:
        make_store(doc).make(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    stores["truncated-store"] = (Maker(truncated), ("history", "compare", "report"))
    for name, (content, which) in stores.items():
        for command, args in commands:
            if command in which:
                cases.append(Case(f"store/{name}/{command}", command, list(args), {"store.db": content},
                                  odd=name in ("valid-but-rollback-journal", "old-version-1"),
                                  may_change={"valid-but-rollback-journal": "a valid store is switched to WAL",
                                              "old-version-1": "an older store is migrated"}.get(name, "")))
    # references that name no run
    for ref in ["@", "@latest~", "@latest~-1", "@latest~99999999999999999999", "@nope", "@--help",
                "@--output=x", "@HEAD~1", "@\x1b[31m", "@" + "f" * 5000]:
        cases.append(Case(f"store/ref/{ref[:20]!r}", "compare", ["compare", ref, "@latest", "--store", "{d}/store.db"],
                          {"store.db": make_store(doc)}))
    cases.append(Case("store/ref/same-run", "compare", ["compare", "@latest", "@latest", "--store", "{d}/store.db"],
                      {"store.db": make_store(doc)}))
    cases.append(Case("store/env/dev-null", "history", ["history"], {}, {"CUDABENCH_STORE": "/dev/null"}))
    cases.append(Case("store/env/folder", "history", ["history"], {"x": Folder()}, {"CUDABENCH_STORE": "{d}/x"}))
    cases.append(Case("store/env/missing", "history", ["history"], {}, {"CUDABENCH_STORE": "{d}/none.db"}))
    return cases


def kernels_cases() -> list[Case]:
    cases: list[Case] = []
    scale = ROOT / "examples" / "my_kernels" / "scale"
    family = {p.name: p.read_bytes() for p in scale.iterdir() if p.is_file()}

    def fam(spec: Any, name: str = "fam") -> dict:
        return {f"k/{name}/spec.py": spec}

    specs = {
        "syntax-error": "x = (\n",
        "indent-error": "def f():\nreturn 1\n",
        "raises": "raise RuntimeError('my bug')\n",
        "raises-keyboardinterrupt": "raise KeyboardInterrupt\n",
        "raises-memoryerror": "raise MemoryError\n",
        "raises-recursion": "def f():\n    return f()\nf()\n",
        "raises-baseexception": "class Boom(BaseException):\n    pass\nraise Boom('x')\n",
        "raises-generatorexit": "raise GeneratorExit\n",
        "sys-exit-0": "import sys\nsys.exit(0)\n",
        "sys-exit-none": "import sys\nsys.exit()\n",
        "sys-exit-text": "import sys\nsys.exit('bye')\n",
        "raise-systemexit": "raise SystemExit\n",
        "os-exit-0": "import os\nos._exit(0)\n",
        "os-exit-3": "import os\nos._exit(3)\n",
        "ctypes-exit-0": "import ctypes\nctypes.CDLL(None).exit(0)\n",
        "ctypes-_exit-0": "import ctypes\nctypes.CDLL(None)._exit(0)\n",
        "sigkill-self": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "sigterm-self": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
        "sigsegv": "import ctypes\nctypes.string_at(0)\n",
        "abort": "import os\nos.abort()\n",
        "missing-family": "x = 1\n",
        "family-int": "FAMILY = 3\n",
        "family-string": "FAMILY = 'fam'\n",
        "family-none": "FAMILY = None\n",
        "family-dict": "FAMILY = {'name': 'fam'}\n",
        "family-class": "from cudabench.spec import Family\nFAMILY = Family\n",
        "import-missing": "import no_such_module_here\n",
        "closes-stdout": "import sys\nsys.stdout.close()\nsys.stderr.close()\nFAMILY = 3\n",
        "replaces-excepthook": "import sys\nsys.excepthook = lambda *a: None\nraise RuntimeError('hidden')\n",
        "chdir": "import os\nos.chdir('/')\nFAMILY = 3\n",
        "empty": "",
        "binary": b"\x00\xff\xfe" * 100,
        "latin1": "# caf\xe9\nFAMILY = 3\n".encode("latin-1"),
        "exit-in-atexit": "import atexit, os\natexit.register(lambda: os._exit(0))\nFAMILY = 3\n",
        "str-subclass-raise": "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no str')\nraise E()\n",
        "huge-message": "raise RuntimeError('x' * 10_000_000)\n",
        "escape-message": "raise RuntimeError('\\x1b[2J\\x1b[31mred')\n",
    }
    for name, spec in specs.items():
        cases.append(Case(f"kernels/spec/{name}", "list", ["list", "--kernels-dir", "{d}/k"], fam(spec)))
    # the same spec through other commands
    for name in ("os-exit-0", "ctypes-exit-0", "sys-exit-0", "raises"):
        for command, args in (("run", ["run", "-k", "fam", "--kernels-dir", "{d}/k", "--json", "{d}/r.json"]),
                              ("check", ["check", "-k", "fam", "--kernels-dir", "{d}/k"]),
                              ("profile", ["profile", "-k", "fam", "--kernels-dir", "{d}/k", "-o", "{d}/prof"]),
                              ("compare-sync-modes", ["compare-sync-modes", "-k", "fam", "--kernels-dir", "{d}/k"])):
            cases.append(Case(f"kernels/spec/{name}/{command}", command, args, fam(specs[name])))
    for name in ("os-exit-0", "raises"):
        cases.append(Case(f"kernels/spec/{name}/build-check", "build",
                          ["build", "--all", "--check", "--arch", "sm_90", "--kernels-dir", "{d}/k"], fam(specs[name])))
    # families that load but are wrong
    def scale_as(name_line: str, folder: str = "fam") -> dict:
        spec = family["spec.py"].decode().replace('name="scale"', name_line)
        return {**{f"k/{folder}/{n}": data for n, data in family.items() if n != "spec.py"},
                f"k/{folder}/spec.py": spec}
    cases.append(Case("kernels/family/duplicate-of-builtin", "list", ["list", "--kernels-dir", "{d}/k"],
                      scale_as('name="add2"')))
    cases.append(Case("kernels/family/duplicate-twice", "list", ["list", "--kernels-dir", "{d}/k"],
                      {**scale_as('name="twin"', "a"), **scale_as('name="twin"', "b")}))
    cases.append(Case("kernels/family/same-dir-twice", "list",
                      ["list", "--kernels-dir", "{d}/k", "--kernels-dir", "{d}/k"], scale_as('name="scale"'), odd=True))
    cases.append(Case("kernels/family/empty-name", "list", ["list", "--kernels-dir", "{d}/k"], scale_as('name=""')))
    cases.append(Case("kernels/family/name-int", "list", ["list", "--kernels-dir", "{d}/k"], scale_as("name=5")))
    cases.append(Case("kernels/family/name-with-slash", "list", ["list", "--kernels-dir", "{d}/k"],
                      scale_as('name="../../etc"')))
    cases.append(Case("kernels/family/variant-named-like-builtin", "list", ["list", "--kernels-dir", "{d}/k"],
                      {**scale_as('name="scale2"'), "k/fam/spec.py": scale_as('name="scale2"')["k/fam/spec.py"]
                       .replace('Variant("scale"', 'Variant("add2"')}))
    cases.append(Case("kernels/family/missing-sources", "build",
                      ["build", "-k", "scale", "--check", "--arch", "sm_90", "--kernels-dir", "{d}/k"],
                      {"k/fam/spec.py": family["spec.py"]}))
    cases.append(Case("kernels/family/source-is-fifo", "build",
                      ["build", "-k", "scale", "--check", "--arch", "sm_90", "--kernels-dir", "{d}/k"],
                      {**{f"k/fam/{n}": d for n, d in family.items()}, "k/fam/scale.cu": Fifo()}, timeout=60))
    # the folder itself
    for name, content in {"file": "x", "missing": None, "fifo": Fifo(), "dev-null": Link("/dev/null"),
                          "symlink-loop": Link("{d}/k"), "spec-is-folder": None, "spec-is-fifo": None,
                          "spec-symlink-loop": None, "family-link-to-parent": None}.items():
        files: dict[str, Any] = {}
        if content is not None:
            files["k"] = content
        elif name == "spec-is-folder":
            files["k/fam/spec.py"] = Folder()
        elif name == "spec-is-fifo":
            files["k/fam/spec.py"] = Fifo()
        elif name == "spec-symlink-loop":
            files["k/fam/spec.py"] = Link("{d}/k/fam/spec.py")
        elif name == "family-link-to-parent":
            files["k/fam"] = Link("{d}/k")
        cases.append(Case(f"kernels/dir/{name}", "list", ["list", "--kernels-dir", "{d}/k"], files,
                          # a spec.py that is not a regular file: the folder is no family (skipped, said nowhere)
                          odd=name in ("spec-is-folder", "spec-is-fifo", "spec-symlink-loop", "family-link-to-parent"),
                          timeout=TIMEOUT))
    return cases


def option_cases() -> list[Case]:
    cases: list[Case] = []

    def add(command: str, args: list[str], name: str = "", odd: bool = False) -> None:
        label = name or " ".join(args)[:60]
        cases.append(Case(f"option/{command}/{label}", command, [command, *args], {}, odd=odd))

    for shape in ["", "n", "n=", "=5", "n=abc", "n=-1", "n=2^64", "n=10^100000000", "x=5", "n=5,n=6", "n=1,,",
                  "n=0x10", "n=5;rm -rf /", "n=\x1b[31m", "n=" + "9" * 5000, "n=1e3", "n=1.5", "n=2**10",
                  "n=" + "1" * 100_000, ",", "n=2^-1", "n=^", "n=5=6", "N=1024"]:
        add("run", ["-k", "add2", "--shape", shape], name=f"shape {shape[:40]!r}")
    add("run", ["-k", "add2", "--shape", "n=\u0661\u0662\u0663"], name="shape arabic-indic digits", odd=True)
    for dtype in ["float64", "", "float32,,", "FLOAT32", "int8", "float32,bogus", "\x7f"]:
        add("run", ["-k", "add2", "--dtype", dtype], name=f"dtype {dtype!r}")
    for timing in ["bogus", "", "SYNC", "sync,events"]:
        add("run", ["-k", "add2", "--timing", timing], name=f"timing {timing!r}")
    for warmup in ["", "abc", "-1", "1e3", "10us", "999999999999999", "1.5", "0ms", "nan", "inf s"]:
        add("run", ["-k", "add2", "--warmup", warmup], name=f"warmup {warmup!r}")
    for option, values in {"--repeat": ["0", "-1", "1e3", "99999999999999999999", "nan"],
                           "--min-time": ["nan", "inf", "-0", "1e400", "0"],
                           "--noise": ["nan", "inf", "0", "-1"], "--max-time": ["nan", "-inf", "0"],
                           "--timeout": ["nan", "inf", "0", "-1", "1e400"]}.items():
        for value in values:
            add("run", ["-k", "add2", option, value], name=f"{option} {value}")
    add("run", ["-k", "add2", "--repeat", "5", "--min-time", "1"], name="repeat and min-time")
    for option, values in {"--seed": ["-1", str(2**31), "abc", "1e3"], "--fuzz": ["-1", "101", "x"],
                           "--direction": ["sideways", "", "fwd,bogus"], "--inputs": ["bogus", "", "../x"],
                           "--baseline": ["nope", ""], "--record-as": ["x", "=y", "add2=", "add2"],
                           "--gpus": ["abc", "-1", "999", "", "0,0,x"], "--arch": ["sm_9x", "sm_", "",
                                                                                   "sm_" + "9" * 30, "compute_90a+"],
                           "--kernel": ["", ",,,", "add2[/x]", "\u200b", "nope", "a" * 10000]}.items():
        for value in values:
            args = ["--kernel", value] if option == "--kernel" else ["-k", "add2", option, value]
            add("run", args, name=f"{option} {value[:30]!r}")
    for value in ["tcp://", "not a url", "tcp://127.0.0.1:1", "tcp://[::1", "inproc://x"]:
        add("run", ["-k", "add2", "--cluster", value], name=f"--cluster {value!r}")
    add("run", ["-k", "add2", "--cluster", "tcp://127.0.0.1:1", "--gpus", "all"], name="cluster and gpus")
    add("run", [], name="nothing")
    add("run", ["-k", "add2", "--no-baseline", "--baseline", "torch-add"], name="no-baseline and baseline", odd=True)
    for option, values in {"--shape": ["n=abc", "n=-1"], "--dtype": ["float64"], "--seed": ["-1"],
                           "--fuzz": ["1001", "-1"], "--direction": ["x"], "--inputs": ["bogus"],
                           "--kernel": ["nope", ""]}.items():
        for value in values:
            args = ["--kernel", value] if option == "--kernel" else ["-k", "add2", option, value]
            add("check", args, name=f"{option} {value!r}")
    add("check", [], name="nothing")
    for threshold in ["", "abc", "-5%", "nan", "inf", "1e400%", "%", "5%%", "\uff15%", "1e-400", "-0"]:
        cases.append(Case(f"option/compare/threshold {threshold!r}", "compare",
                          ["compare", "{d}/a.json", "{d}/a.json", "--threshold", threshold], {"a.json": "{}"}))
    for threshold in ["", "nan", "-1", "x"]:
        cases.append(Case(f"option/compare/memory-threshold {threshold!r}", "compare",
                          ["compare", "{d}/a.json", "{d}/a.json", "--memory-threshold", threshold], {"a.json": "{}"}))
    cases.append(Case("option/compare/json-and-markdown-stdout", "compare",
                      ["compare", "{d}/a.json", "{d}/a.json", "--json", "-", "--markdown", "-"], {"a.json": "{}"}))
    for args in (["--iters", "0"], ["--iters", "100001"], ["--busy-ms", "nan"], ["--busy-ms", "inf"], ["--show", "-1"],
                 ["--warmup", "-1"], ["--seed", "-1"], ["-k", "nope"], ["-k", "timex"], ["-d", "sideways"],
                 ["-s", "n=abc"], ["--timeline", "/proc/x.png"], ["--timeline", "x.bogus"]):
        add("compare-sync-modes", args)
    for args in (["--sizes", ""], ["--sizes", "abc"], ["--sizes", "0"], ["--sizes", "-1MB"], ["--sizes", "1XB"],
                 ["--sizes", "1e100GB"], ["--sizes", "1MB,,"], ["--sizes", "9" * 5000], ["--iters", "0"],
                 ["--overlap-size", "x"], ["--overlap-size", "0"], ["--json", "/proc/x.json"]):
        add("compare-transfer", args)
    for args in (["-k", "add2", "--tool", "bogus"], ["-k", "add2", "--name", "../escape"], ["-k", "add2", "--name", ""],
                 ["-k", "add2", "--name", "a/b"], ["-k", "add2", "--iters", "-1"], ["-k", "add2", "--nsys", "/bin/false"],
                 ["-k", "add2", "--nsys", "/nonexistent"], ["-k", "add2", "-o", "/proc/prof"], ["-k", "nope"],
                 ["-k", "add2", "-d", "sideways"], ["-k", "add2", "--timeline", "x.bogus"],
                 ["-k", "add2", "--tool", "ncu", "--timeline", "x.png"], ["-k", "add2", "-s", "n=-5"], []):
        add("profile", args)
    for args in (["--threshold", "abc"], ["--plot", "x.bogus"], ["--plot", "/proc/x.png"], ["--store", "-"],
                 ["--store", ""], ["--case", "\x1b[31m"]):
        add("history", args)
    for args in (["-k", "nope"], [], ["--check"], ["--check", "--all"], ["--all", "--check", "--arch", "sm_9x"],
                 ["-k", "add2", "--arch", "sm_1"]):
        add("build", args)
    add("doctor", ["--bogus"])
    add("list", ["--bogus"])
    add("list", ["extra-argument"])
    cases.append(Case("option/global/unknown-command", "-", ["frobnicate"], {}))
    cases.append(Case("option/global/no-command-arg", "-", ["--quiet"], {}))
    return cases


def output_cases(doc: dict) -> list[Case]:
    cases: list[Case] = []
    good = json.dumps(doc)
    base = {"a.json": good, "b.json": good, "suite.toml": GOOD_SUITE, "store.db": make_store(doc),
            "link-a.json": Link("{d}/a.json"), "hard-a.json": HardLink("a.json"), "folder": Folder(), "pipe": Fifo(),
            "plain": "x", "loop.json": Link("{d}/loop.json"), "link-store": Link("{d}/store.db"),
            "link-suite.png": Link("{d}/suite.toml"), "link-a.png": Link("{d}/a.json"),
            "hard-store.png": HardLink("store.db")}

    def add(command: str, args: list[str], name: str) -> None:
        cases.append(Case(f"output/{command}/{name}", command, [command, *args], dict(base)))

    targets = {"input": "{d}/b.json", "symlink-to-input": "{d}/link-a.json", "hardlink-to-input": "{d}/hard-a.json",
               "proc": "/proc/self/x.json", "sys": "/sys/x.json", "folder": "{d}/folder", "fifo": "{d}/pipe",
               "under-a-file": "{d}/plain/x.json", "symlink-loop": "{d}/loop.json", "dev-full": "/dev/full",
               "dev-zero": "/dev/zero", "dot": ".", "empty": ""}
    for name, target in targets.items():
        add("compare", ["{d}/a.json", "{d}/b.json", "--json", target], f"json-{name}")
    for name in ("input", "symlink-to-input", "hardlink-to-input", "fifo", "folder", "proc"):
        add("compare", ["{d}/a.json", "{d}/b.json", "--markdown", targets[name]], f"markdown-{name}")
    add("compare", ["{d}/a.json", "{d}/b.json", "--json", "{d}/o.json", "--markdown", "{d}/o.json"], "json-equals-markdown")
    add("compare", ["{d}/a.json", "{d}/b.json", "--store", "{d}/store.db", "--json", "{d}/store.db"], "json-is-given-store")
    add("compare", ["@latest", "@latest~1", "--store", "{d}/store.db", "--json", "{d}/store.db"], "json-is-store")
    add("compare", ["@latest", "@latest~1", "--store", "{d}/store.db", "--json", "{d}/link-store"], "json-link-to-store")
    for name, target in {"input": "{d}/a.json", "symlink-to-input": "{d}/link-a.png", "folder": "{d}/folder",
                         "fifo": "{d}/pipe", "proc": "/proc/x.png", "bad-suffix": "{d}/x.bogus", "empty": "",
                         "under-a-file": "{d}/plain/x.png", "dev-full": "/dev/full"}.items():
        add("plot", ["{d}/a.json", "-o", target], f"o-{name}")
    for name, target in {"input": "{d}/a.json", "symlink-to-input": "{d}/link-a.json", "the-store": "{d}/store.db",
                         "link-to-store": "{d}/link-store", "folder": "{d}/folder", "fifo": "{d}/pipe",
                         "proc": "/proc/x.html", "under-a-file": "{d}/plain/x.html", "dev-zero": "/dev/zero"}.items():
        add("report", ["--html", target, "--results", "{d}/a.json", "--store", "{d}/store.db"], f"html-{name}")
    for option in ("--json", "--csv", "--markdown"):
        for name, target in {"suite": "{d}/suite.toml", "link-to-suite": "{d}/link-suite.png", "fifo": "{d}/pipe",
                             "folder": "{d}/folder", "proc": "/proc/x", "under-a-file": "{d}/plain/x"}.items():
            add("run", ["--config", "{d}/suite.toml", option, target], f"{option[2:]}-{name}")
    add("run", ["--config", "{d}/suite.toml", "--json", "{d}/o.json", "--csv", "{d}/o.json"], "json-equals-csv")
    add("run", ["--config", "{d}/suite.toml", "--store", "{d}/suite.toml"], "store-is-suite")
    add("run", ["--config", "{d}/suite.toml", "--json", "{d}/store.db", "--store", "{d}/store.db"], "json-is-store")
    add("run", ["-k", "add2", "--json", "-", "--csv", "-"], "two-to-stdout")
    add("history", ["--store", "{d}/store.db", "--plot", "{d}/store.db"], "plot-is-store")
    add("history", ["--store", "{d}/store.db", "--plot", "{d}/link-store"], "plot-link-to-store")
    add("history", ["--store", "{d}/store.db", "--plot", "{d}/hard-store.png"], "plot-hardlink-to-store")
    add("history", ["--store", "{d}/store.db", "--plot", "{d}/pipe"], "plot-fifo")
    add("history", ["--store", "{d}/store.db", "--plot", "{d}/folder"], "plot-folder")
    add("compare-transfer", ["--json", "{d}/a.json"], "json-existing-file")  # not an input: refused for the GPU only
    add("compare-sync-modes", ["--timeline", "{d}/pipe"], "timeline-fifo")
    add("profile", ["-k", "add2", "-o", "{d}/plain"], "output-dir-a-file")
    add("profile", ["-k", "add2", "--timeline", "{d}/suite.toml"], "timeline-over-a-file")
    return cases


def doctor_says_nvcc_ok(outcome: Outcome) -> str:
    for line in outcome.output.splitlines():
        cells = [c.strip() for c in re.split(r"[│|]", line)]
        cells = [c for c in cells if c]
        if len(cells) >= 2 and cells[0] == "nvcc" and cells[1] == "ok":
            return "doctor reports the broken nvcc as ok"
    if "nvcc" not in outcome.output:
        return "doctor does not mention nvcc"
    return ""


def environment_cases(doc: dict) -> list[Case]:
    cases: list[Case] = []
    for name, value in {"bin-false": "/bin/false", "missing": "/nonexistent/nvcc", "dev-null": "/dev/null",
                        "folder": "/tmp", "bin-true": "/bin/true", "relative": "nvcc-not-here", "empty-file": "{d}/nvcc"}.items():
        files = {"nvcc": ""} if name == "empty-file" else {}
        cases.append(Case(f"env/nvcc-{name}/doctor", "doctor", ["doctor"], files, {"CUDABENCH_NVCC": value},
                          odd=True, judge=doctor_says_nvcc_ok))
    for name, value in {"bin-false": "/bin/false", "missing": "/nonexistent/nvcc", "bin-true": "/bin/true"}.items():
        cases.append(Case(f"env/nvcc-{name}/build-check", "build", ["build", "--all", "--check", "--arch", "sm_90"],
                          {}, {"CUDABENCH_NVCC": value}, timeout=120))
    good = json.dumps(doc)
    for value in ["10", "abc", "-1", "0", "1e3", "9" * 30 + "x", " "]:
        cases.append(Case(f"env/max-input-bytes={value!r}/compare", "compare", ["compare", "{d}/a.json", "{d}/a.json"],
                          {"a.json": good}, {"CUDABENCH_MAX_INPUT_BYTES": value}, odd=value == " "))
        cases.append(Case(f"env/max-input-bytes={value!r}/run", "run", ["run", "--config", "{d}/s.toml"],
                          {"s.toml": GOOD_SUITE}, {"CUDABENCH_MAX_INPUT_BYTES": value}))
    for value in ["5", "abc", "-1", "99999999999999999999", "0", ""]:
        cases.append(Case(f"env/columns={value!r}/compare-bad", "compare", ["compare", "{d}/a.json", "{d}/b.json"],
                          {"a.json": good, "b.json": "[1"}, {"COLUMNS": value}))
        cases.append(Case(f"env/columns={value!r}/compare-ok", "compare", ["compare", "{d}/a.json", "{d}/a.json"],
                          {"a.json": good}, {"COLUMNS": value}, odd=True))
    cases.append(Case("env/columns=5/list", "list", ["list"], {}, {"COLUMNS": "5"}, odd=True))
    cases.append(Case("env/columns=5/doctor", "doctor", ["doctor"], {}, {"COLUMNS": "5", "CUDABENCH_NVCC": "/bin/false"},
                      odd=True, judge=doctor_says_nvcc_ok))
    for name, env in {"nsys-bin-false": {"CUDABENCH_NSYS": "/bin/false"}, "ncu-dev-null": {"CUDABENCH_NCU": "/dev/null"},
                      "store-dev-zero": {"CUDABENCH_STORE": "/dev/zero"}, "cuda-visible-garbage": {"CUDA_VISIBLE_DEVICES": "x,y"},
                      "lang-c": {"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}}.items():
        args = (["profile", "-k", "add2"] if name.startswith("nsys") else ["profile", "-k", "add2", "--tool", "ncu"]
                if name.startswith("ncu") else ["history"] if name.startswith("store") else ["run", "-k", "add2"]
                if name.startswith("cuda") else ["compare", "{d}/a.json", "{d}/b.json"])
        files = {"a.json": good, "b.json": json.dumps(mutated(doc, ("results", 0, "subject"), "add2\u00e9\u2603"))}
        cases.append(Case(f"env/{name}", args[0], args, files if name == "lang-c" else {}, env))
    return cases


def all_cases() -> list[Case]:
    doc = valid_document()
    cases = (suite_cases() + results_cases(doc) + store_cases(doc) + kernels_cases() + option_cases()
             + output_cases(doc) + environment_cases(doc))
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"duplicate case names: {sorted(dupes)[:5]}"
    return cases


# ---- running one case ----------------------------------------------------------------------------

def fill(text: str, folder: Path) -> str:
    return text.replace("{d}", str(folder))


def materialise(case: Case, folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Fifo):
            os.mkfifo(path)
        elif isinstance(content, Folder):
            path.mkdir()
        elif isinstance(content, Link):
            os.symlink(fill(content.target, folder), path)
        elif isinstance(content, HardLink):
            os.link(folder / content.target, path)
        elif isinstance(content, Maker):
            content.make(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(str(content).encode("utf-8", "surrogateescape"))


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every path under `folder` (symlinks not followed): its kind and, for files, content hash and mode."""
    found: dict[str, tuple] = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(top, name)
            info = os.lstat(path)
            rel = os.path.relpath(path, folder)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("symlink", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as f:
                    found[rel] = ("file", hashlib.sha256(f.read()).hexdigest(), stat.S_IMODE(info.st_mode))
            else:
                found[rel] = (stat.S_IFMT(info.st_mode),)
    return found


def environment(case: Case, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDABENCH_") and k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CUDABENCH_STORE"] = str(folder / "default-store.db")  # never the checkout's own store
    env.update({k: fill(v, folder) for k, v in case.env.items()})
    return env


def run_case(case: Case, folder: Path) -> Outcome:
    materialise(case, folder)
    before = snapshot(folder)
    argv = [sys.executable, "-m", "cudabench", *(fill(a, folder) for a in case.args)]
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=folder, env=environment(case, folder), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    hung = False
    try:
        output, _ = proc.communicate(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            output, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            output = b""
    finally:
        try:  # whatever the command started in its session and left running
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    seconds = time.monotonic() - start
    after = snapshot(folder)
    changed = [f"{rel} ({'removed' if rel not in after else 'changed'})" for rel, what in before.items()
               if after.get(rel) != what]
    left = sorted(rel for rel in after if rel not in before and not rel.startswith(".cudabench"))
    text = output.decode("utf-8", "replace")
    outcome = Outcome(case, argv, None if hung else proc.returncode, text, seconds, hung, changed, left)
    judge(outcome)
    return outcome


def run_guarded(case: Case, folder: Path) -> Outcome:
    """run_case, with a failure of this script (not of cudabench) recorded as such."""
    try:
        return run_case(case, folder)
    except Exception as exc:
        return Outcome(case, [sys.executable, "-m", "cudabench", *case.args], None,
                       f"{type(exc).__name__}: {exc}", 0.0, False, [], [], problems=["harness error"])


def judge(o: Outcome) -> None:
    if "Traceback" in o.output:
        o.problems.append("traceback")
    if o.hung:
        o.problems.append("hang")
    if o.changed and o.case.may_change:
        o.notes.append(f"input changed by design? ({o.case.may_change}): " + ", ".join(o.changed))
    elif o.changed:
        o.problems.append("input changed: " + ", ".join(o.changed))
    if not o.hung:
        if o.code == 0 and not o.case.odd:
            o.problems.append("exit 0 on a bad input")
        if o.code != 0 and not o.output.strip():
            o.problems.append("silent exit")
        elif o.code != 0 and not PARAGRAPH.search(o.output):
            o.problems.append("no error paragraph")
    if o.case.judge is not None:
        extra = o.case.judge(o)
        if extra:
            o.problems.append(extra)
    if not o.case.odd and NO_GPU in o.output:
        o.notes.append("only the GPU check stopped it")
    if o.left and o.code != 0:
        o.notes.append("left " + ", ".join(o.left[:4]))


# ---- the trial -----------------------------------------------------------------------------------

CATEGORIES = ("traceback", "hang", "input changed", "exit 0 on a bad input", "silent exit", "no error paragraph",
              "harness error")


def category(problem: str) -> str:
    return next((c for c in CATEGORIES if problem.startswith(c)), "other")


def summary(outcomes: list[Outcome], seconds: float) -> str:
    lines = []
    commands = sorted({o.case.command for o in outcomes})
    head = ["command", "cases", "traceback", "hang", "changed", "exit0", "silent", "no-para", "harness", "other",
            "failing"]
    rows = []
    for command in [*commands, "ALL"]:
        picked = [o for o in outcomes if command in ("ALL", o.case.command)]
        counts = [sum(any(category(p) == c for p in o.problems) for o in picked) for c in (*CATEGORIES, "other")]
        rows.append([command, str(len(picked)), *map(str, counts), str(sum(bool(o.problems) for o in picked))])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    gpu_only = [o for o in outcomes if "only the GPU check stopped it" in o.notes]
    left = [o for o in outcomes if any(n.startswith("left ") for n in o.notes)]
    lines.append("")
    lines.append(f"{len(outcomes)} cases in {seconds:.0f} s; "
                 f"{sum(bool(o.problems) for o in outcomes)} failing; slowest {max(o.seconds for o in outcomes):.1f} s")
    lines.append(f"not counted: {len(gpu_only)} bad inputs were only stopped by the GPU check; "
                 f"{len(left)} refused commands left files behind")
    return "\n".join(lines)


def describe(o: Outcome, tail: int = 8) -> str:
    last = [line for line in o.output.rstrip().splitlines()][-tail:]
    shown = "\n".join("      | " + line[:300] for line in last) or "      | (nothing)"
    env = " ".join(f"{k}={shlex.quote(fill(v, Path('CASE')))}" for k, v in o.case.env.items())
    command = shlex.join(["python", "-m", "cudabench", *o.argv[3:]])
    return (f"  {o.case.name}: {'; '.join(o.problems)} (exit {o.code}, {o.seconds:.1f} s)\n"
            f"    $ {(env + ' ') if env else ''}{command}\n{shown}")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", "--jobs", type=int, default=3, help="cases at once (default 3)")
    parser.add_argument("-k", "--filter", default="", help="only cases whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--keep", action="store_true", help="keep the case folders (printed)")
    parser.add_argument("--notes", action="store_true", help="also list the cases with notes")
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    args = parser.parse_args(argv)
    cases = [c for c in all_cases() if args.filter in c.name]
    if args.list:
        for c in cases:
            print(c.name, "::", shlex.join(c.args)[:150])
        print(f"{len(cases)} cases")
        return 0
    work = Path(tempfile.mkdtemp(prefix="cudabench-trial-"))
    started = time.monotonic()
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(run_guarded, c, work / f"{i:04d}"): c for i, c in enumerate(cases)}
            for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
                outcome = future.result()
                with lock:
                    outcomes.append(outcome)
                mark = "FAIL" if outcome.problems else "ok  "
                print(f"[{done:4d}/{len(cases)}] {mark} {outcome.seconds:5.1f}s {outcome.case.name}", flush=True)
    finally:
        if args.keep:
            print(f"case folders kept in {work}")
        else:
            subprocess.run(["rm", "-rf", str(work)], check=False)
    outcomes.sort(key=lambda o: o.case.name)
    failing = [o for o in outcomes if o.problems]
    print()
    print(summary(outcomes, time.monotonic() - started))
    if failing:
        print(f"\nfailing cases ({len(failing)}):")
        for o in failing:
            print(describe(o))
    if args.notes:
        noted = [o for o in outcomes if o.notes and not o.problems]
        print(f"\ncases with notes ({len(noted)}):")
        for o in noted:
            print(f"  {o.case.name}: {'; '.join(o.notes)}")
    if args.json:
        args.json.write_text(json.dumps([{"name": o.case.name, "command": o.case.command, "argv": o.argv[3:],
                                          "env": o.case.env, "code": o.code, "seconds": round(o.seconds, 2),
                                          "problems": o.problems, "notes": o.notes, "output": o.output[-4000:]}
                                         for o in outcomes], indent=1))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
