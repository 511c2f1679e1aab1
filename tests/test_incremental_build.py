"""Incremental builds on the CPU: a family of host-only C++ (torch's JIT builds it with a CPU torch,
through the same folder, ninja file, content-named library and lock as a CUDA family). An edit
recompiles the translation units it reaches and nothing else, and what is loaded is the new code."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cudabench.spec.build import build
from cudabench.spec.family import Family

pytestmark = pytest.mark.skipif(not any(Path(p, "c++").exists() or Path(p, "g++").exists()
                                        for p in os.environ.get("PATH", "").split(os.pathsep)),
                                reason="no host C++ compiler")

HEADER = "#pragma once\nconstexpr int SCALE = {scale};\n"
# pybind11 only (not torch/extension.h): a binding of the same build in seconds, not a minute
BINDING = textwrap.dedent("""\
    #include <pybind11/pybind11.h>
    #include "scale.h"
    int other();
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{
      m.def("scaled", [](int x) {{ return x * SCALE + {offset}; }});
      m.def("other", &other);
    }}
""")
OTHER = "int other() {{ return {value}; }}\n"


def write(folder: Path, scale=2, offset=0, value=7):
    (folder / "scale.h").write_text(HEADER.format(scale=scale))
    (folder / "binding.cpp").write_text(BINDING.format(offset=offset))
    (folder / "other.cpp").write_text(OTHER.format(value=value))


@pytest.fixture
def family(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "hostonly"
    folder.mkdir()
    write(folder)
    return Family(name="hostonly", summary="", sources=("binding.cpp", "other.cpp"), params=(),
                  make_inputs=lambda *a: {}, reference=lambda **k: None, variants=(), folder=folder)


def objects(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.glob("*.o")}


def edit(path: Path, text: str) -> None:
    time.sleep(0.01)  # a new mtime for ninja, whatever the filesystem's resolution
    path.write_text(text)


def test_an_edit_recompiles_its_unit_only_and_the_new_code_is_what_loads(family):
    first = build(family)
    assert not first.cache_hit and first.module.scaled(3) == 6 and first.module.other() == 7
    before = objects(first.directory)
    assert set(before) == {"binding.o", "other.o"}

    edit(family.folder / "other.cpp", OTHER.format(value=8))
    second = build(family)
    after = objects(second.directory)
    assert second.directory == first.directory  # one folder for every edit
    assert after["other.o"] != before["other.o"] and after["binding.o"] == before["binding.o"]
    assert second.module.other() == 8 and first.module.other() == 7  # each module its own code

    again = build(family)
    assert again.cache_hit and again.module is second.module


def test_a_header_edit_recompiles_the_units_that_include_it(family):
    first = build(family)
    before = objects(first.directory)
    edit(family.folder / "scale.h", HEADER.format(scale=5))
    second = build(family)
    after = objects(second.directory)
    assert after["binding.o"] != before["binding.o"] and after["other.o"] == before["other.o"]
    assert second.module.scaled(3) == 15


def test_going_back_to_earlier_sources_loads_their_library_without_building(family):
    build(family)
    edit(family.folder / "other.cpp", OTHER.format(value=9))
    assert build(family).module.other() == 9
    edit(family.folder / "other.cpp", OTHER.format(value=7))
    back = build(family)
    assert back.cache_hit and back.module.other() == 7


def test_two_invocations_building_one_family_at_once_both_load_it(family, tmp_path):
    script = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from cudabench.spec.build import build
        from cudabench.spec.family import Family
        fam = Family(name="hostonly", summary="", sources=("binding.cpp", "other.cpp"), params=(),
                     make_inputs=lambda *a: {{}}, reference=lambda **k: None, variants=(),
                     folder=Path({str(family.folder)!r}))
        print(build(fam).module.scaled(4))
    """)
    env = {**os.environ, "CUDABENCH_CACHE": os.environ["CUDABENCH_CACHE"]}
    runs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env) for _ in range(2)]
    outputs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outputs
    assert [o.strip() for o, _ in outputs] == ["8", "8"]
