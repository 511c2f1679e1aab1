"""A kernel family made from an op named by import path (`cudabench.bench`, `cudabench run --op`), so that
an op in the user's own package runs through the same workers, checks, integrity checks, timers and
records as a family folder's variants, without one.

An op spec names everything by import path ("package.module:name", or a dotted path such as
"torch.add"), never by object: the op is imported only in the subject process, where variants run;
`inputs` and `reference` are imported in the judge process, as a family's spec.py is, and that import
may not bring in the op's module (its code never runs in the judge's process, not even at import).
Nothing is imported here until it is called.

    op          op(*inputs) -> output tensor(s)                     the subject, timed and checked
    inputs      inputs(shape, generator, device) -> {name: tensor}  as Family.make_inputs
    reference   reference(*inputs) -> output(s)                     the math, on float64 copies of the inputs
    baselines   [import path, ...]                                  timed beside it, called as the op

The op, its baselines and the reference take the inputs by position, in the order `inputs` made
them, so that library functions (torch.add(input, other)) serve as they are.
    shapes      [{param: int}, ...]                                 the cases (the first is the default)

`write_family` keeps a spec as a family folder under cudabench's cache (a spec.py that reads the spec
back), named by the spec's content, so every process finds it through the registry like any other."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from cudabench.errors import ConfigError
from cudabench.outputs import write_text_atomic
from cudabench.spec.family import DTYPES, Baseline, Family, Param, Variant

PATH = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?")
SPEC_FILE = "op.json"
SPEC_PY = '''"""Written by cudabench for an op named by import path (cudabench.spec.op_family); written again
whenever it is used: do not edit."""
from pathlib import Path

from cudabench.spec.op_family import family_from_file

FAMILY = family_from_file(Path(__file__).with_name("op.json"))
'''


@dataclass(frozen=True)
class OpSpec:
    op: str
    inputs: str
    reference: str
    shapes: tuple[tuple[tuple[str, int], ...], ...]
    baselines: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)
    grad_inputs: tuple[str, ...] = ()
    tolerance: float = 1e-5
    name: str = field(default="")

    def __post_init__(self) -> None:
        for what, path in (("op", self.op), ("inputs", self.inputs), ("reference", self.reference),
                           *(("baseline", b) for b in self.baselines)):
            if not isinstance(path, str) or not PATH.fullmatch(path):
                raise ConfigError(f"The {what} {path!r} is not an import path.",
                                  'Name it as "package.module:function" (or a dotted path such as "torch.add").')
            top = path.split(":", 1)[0].split(".", 1)[0]
            if importlib.util.find_spec(top) is None:  # found without running any of its code
                raise ConfigError(f"The {what} {path} cannot be imported: there is no module {top} here.",
                                  "Install the package, or put its folder on PYTHONPATH (the workers "
                                  "import it by name).")
        if not self.shapes:
            raise ConfigError("An op needs at least one shape to run at.", 'e.g. shapes=[{"n": 1 << 20}]')
        for dtype in self.dtypes:
            if dtype not in DTYPES:
                raise ConfigError(f"Unknown dtype {dtype!r}.", f"Use one of {', '.join(DTYPES)}.")
        if not self.name:
            object.__setattr__(self, "name", subject_name(self.op))

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def subject_name(path: str) -> str:
    """mypkg.ops:fused_add -> fused_add; torch.add -> torch.add (a name results and tables can carry)."""
    tail = path.split(":", 1)[1] if ":" in path else path
    return re.sub(r"[^A-Za-z0-9_.-]", "-", tail)[:100]


def op_spec(op: Any, inputs: Any, reference: Any, shapes: Sequence[Mapping[str, int]],
            baselines: Sequence[Any] = (), dtypes: Sequence[str] = ("float32",),
            grad_inputs: Sequence[str] = (), tolerance: float = 1e-5) -> OpSpec:
    """An OpSpec from import paths or functions a worker can import by reference (module-level
    functions of an importable module; not lambdas, closures or functions of __main__)."""
    checked = []
    for shape in shapes:
        if not isinstance(shape, Mapping) or not shape or not all(
                isinstance(k, str) and type(v) is int and v >= 0 for k, v in shape.items()):
            raise ConfigError(f"Cannot use the shape {shape!r}.", 'Give each shape as a dict of whole numbers, '
                              'e.g. {"n": 1048576}.')
        checked.append(tuple(shape.items()))
    first = dict(checked[0]) if checked else {}  # none: OpSpec says an op needs one
    for shape in checked[1:]:  # a later shape may leave some out (the first shape's values stand), not add any
        added = [name for name in dict(shape) if name not in first]
        if added:
            raise ConfigError(f"A later shape of the op names {', '.join(added)}, which its first shape does not "
                              f"({', '.join(first)}).", "The first shape names the op's parameters: name them all there.")
    return OpSpec(import_path(op, "op"), import_path(inputs, "inputs"), import_path(reference, "reference"),
                  tuple(checked), tuple(import_path(b, "baseline") for b in baselines), tuple(dtypes),
                  tuple(grad_inputs), float(tolerance))


def import_path(thing: Any, what: str) -> str:
    """An import path as given, or the one a function is found at again in another process."""
    if isinstance(thing, str):
        return thing
    module, name = getattr(thing, "__module__", None), getattr(thing, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        raise ConfigError(f"The {what} {thing!r} cannot be found by another process: cudabench runs it in "
                          "an isolated worker, which imports it by name.",
                          "Define it at the top level of a module of your package (not in __main__, a "
                          'notebook, a lambda or a closure), or give its import path as "module:name".')
    try:
        found = resolve(f"{module}:{name}")
    except ConfigError:
        found = None
    if found is not thing:
        raise ConfigError(f"The {what} {thing!r} is not what {module}:{name} names.",
                          'Give its import path as "module:name".')
    return f"{module}:{name}"


def resolve(path: str) -> Any:
    """The object an import path names: "module:attr.attr", or a dotted path whose longest
    importable prefix is the module."""
    if ":" in path:
        module_name, attrs = path.split(":", 1)
    else:
        parts = path.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module_name, attrs = ".".join(parts[:cut]), ".".join(parts[cut:])
            try:
                importlib.import_module(module_name)
                break
            except RefusedImport as exc:
                raise ConfigError(f"Cannot import {path}: {exc}.") from None
            except ImportError:
                continue
        else:
            raise ConfigError(f"Cannot import {path}: no module of it can be imported.",
                              'Give "package.module:function".')
    try:
        found: Any = importlib.import_module(module_name)
        for attr in attrs.split("."):
            found = getattr(found, attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"Cannot import {path}: {exc}.",
                          "Check the path, and that the package is importable here (installed, or on PYTHONPATH).") from None
    return found


class RefusedImport(ImportError):
    pass


class _Refuse:
    """A meta path finder that refuses one module (and its submodules)."""

    def __init__(self, module: str, why: str) -> None:
        self.module, self.why = module, why

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == self.module or name.startswith(self.module + "."):
            raise RefusedImport(self.why)
        return None


@contextlib.contextmanager
def refusing(module: str, why: str) -> Iterator[None]:
    """While the block runs, importing `module` fails with `why`, unless this process already has it
    (the op's module where it is a library the judge uses anyway, such as torch)."""
    if not module or module in sys.modules:
        yield
        return
    finder = _Refuse(module, why)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class Lazy:
    """A callable named by import path, imported at its first call (in whichever process calls it).
    `refuse`: a module its import must not bring in (the op's, where this is the judge's inputs or
    reference: the op's code never runs in the judge's process, not even at import)."""

    def __init__(self, path: str, refuse: str = "") -> None:
        self.path, self.refuse, self._target = path, refuse, None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._target is None:
            why = (f"{self.refuse} is the op's module, and the judge's process never imports it: keep the inputs "
                   "and the reference in modules that do not import the op")
            with refusing(self.refuse, why):
                self._target = resolve(self.path)
        return self._target(*args, **kwargs)


class Positional(Lazy):
    """Called as families call ops, op(**inputs), it passes the inputs by position, in the order the
    inputs function made them: a library function (torch.add(input, other)) takes them as they are."""

    def __call__(self, **inputs: Any) -> Any:
        return super().__call__(*inputs.values())


def family_of(spec: OpSpec, folder: Path = Path(".")) -> Family:
    first = dict(spec.shapes[0])
    params = tuple(Param(name, value, "from the op's shapes", minimum=0) for name, value in first.items())
    bind: Callable[[Any], Any] = lambda ext: Positional(spec.op)  # noqa: E731  (imported in the subject process)
    backward = bool(spec.grad_inputs)
    op_module = spec.op.split(":", 1)[0] if ":" in spec.op else spec.op.rsplit(".", 1)[0]
    return Family(
        name=spec.name, summary=f"{spec.op}, named by import path", sources=(), params=params,
        make_inputs=Lazy(spec.inputs, op_module), reference=Positional(spec.reference, op_module),
        variants=(Variant(spec.name, spec.op, bind, has_backward=backward, dtypes=spec.dtypes),),
        baselines=tuple(Baseline(subject_name(b), b, lambda b=b: Positional(b), has_backward=backward, dtypes=spec.dtypes)
                        for b in spec.baselines),
        grad_inputs=spec.grad_inputs, tolerance=spec.tolerance, dtypes=spec.dtypes, folder=folder)


def family_from_file(path: Path) -> Family:
    data = json.loads(Path(path).read_text())
    spec = OpSpec(**{**data, "shapes": tuple(tuple((k, int(v)) for k, v in s) for s in data["shapes"]),
                     **{k: tuple(data[k]) for k in ("baselines", "dtypes", "grad_inputs")}})
    return family_of(spec, Path(path).parent)


def write_family(spec: OpSpec, root: Optional[Path] = None) -> Path:
    """The kernels folder that holds `spec` as a family (made if missing): <cache>/ops/<content key>."""
    from cudabench.spec.build import cache_root

    kernels = (root or cache_root() / "ops") / spec.key()
    folder = kernels / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / SPEC_FILE, json.dumps(asdict(spec), indent=1) + "\n")  # another process may
    write_text_atomic(folder / "spec.py", SPEC_PY)                                       # be reading them
    return kernels
