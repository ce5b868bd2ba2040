"""`harness export`: a reproducer as one Python file that needs tilelang and torch, not the harness.

A compiler engineer can run it without this repository. The program is the harness's own: the
family's build is run once with compiles stubbed out, recording each TileLang builder call (which
function, with which static values) and each compile (kernel name, knobs); the modules those
builders need are embedded as source text (TileLang reads a @T.prim_func's source with `inspect`,
so the file writes them into a temporary package at run time). Inputs, the float64 reference and
the tolerance rule are written inline (harness/export_template.py), as the harness computes them.

`--flat` writes the same program as plain code instead: the embedded modules merged into the file's own
namespace (harness.pysource.merge: `blocks.softmax_step(...)` becomes `softmax_step(...)`, a name two modules
define is renamed), so that every line is the program's and a reducer (harness reduce) can delete any of them.
A compile error's flat file only compiles, and says REPRODUCED when the error has the recorded words (another
error is no reproduction): it needs no GPU. A numerical one carries the run, the bands and the judgement.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import pprint
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from harness import case as case_mod
from harness import kernels, pysource

TEMPLATE = Path(__file__).with_name("export_template.py")
# Families whose run the file carries (the glue in export_template.py); any family exports a compile error.
RUNS = {"fwd": "forward", "ws": "forward", "bwd": "backward", "ws_bwd": "backward"}
_ALLOWED = ("tilelang", "tvm", "torch", "__future__")


class ExportError(ValueError):
    """What cannot be exported, in one line."""


@dataclass
class Call:
    """One compile of the family's build: the kernel's name, the builder call that made its prim_func."""
    kernel: str
    module: str
    function: str
    args: dict
    knobs: list
    func: object = None  # the harness's prim_func (for --check-program)
    flat_function: str = ""  # its name in a flat compile-only file (flat_source)


# ----------------------------------------------------------------------------- recording the build
def record_build(case) -> list[Call]:
    """The compiles `case`'s build makes, in order, each with the builder call behind it. Nothing is
    compiled: harness.compat.compile is replaced while the build runs."""
    from harness import compat

    fam = kernels.family(case.family)
    root = str(Path(sys.modules[type(fam).__module__].__file__).resolve().parent.parent)
    calls, made, frames = [], {}, {}

    def profile(frame, event, arg):
        # Pass-throughs are no builders: a lambda handing a builder call on, and harness.kernels' own
        # helpers (kernels.written, which only turns a parser's refusal into UNSUPPORTED).
        if frame.f_code.co_name == "<lambda>" or frame.f_globals.get("__name__") == kernels.__name__:
            return
        if event == "call" and frame.f_code.co_filename.startswith(root):
            code = frame.f_code
            frames[id(frame)] = {n: frame.f_locals[n] for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]}
        elif event == "return" and id(frame) in frames:
            args = frames.pop(id(frame))
            if type(arg).__name__ == "PrimFunc":  # the outermost builder returns last and wins
                made[id(arg)] = (frame.f_globals["__name__"], frame.f_code.co_name, args)

    def fake_compile(func, target, knobs=(), kernel=None, pass_configs=None):
        if pass_configs:
            raise ExportError(f"kernel {kernel} has its own pass configs; not exported")
        if id(func) not in made:
            raise ExportError(f"kernel {kernel}: no builder function in {root} made its prim_func")
        module, function, args = made[id(func)]
        calls.append(Call(kernel, module, function, _literal(args, kernel), list(knobs), func))
        return kernel

    real = compat.compile
    compat.compile = fake_compile
    sys.setprofile(profile)
    try:
        fam.runner.build(case, "sm_90a")
    finally:
        sys.setprofile(None)
        compat.compile = real
    return calls


def _literal(args: dict, kernel) -> dict:
    """Builder arguments that Python literals write down exactly, or ExportError."""
    for name, value in args.items():
        try:
            same = ast.literal_eval(repr(value)) == value
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise ExportError(f"kernel {kernel}: builder argument {name}={value!r} is not a literal")
    return args


# ----------------------------------------------------------------------------- the module bundle
def bundle(modules) -> dict[str, str]:
    """{short name: source} of `modules` and every module of their package they import, with those
    imports rewritten to the flat package `_PACKAGE_` (replaced when the file is written)."""
    found: dict[str, str] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        short = name.rsplit(".", 1)[-1]
        if short in found:
            continue
        source, local = _read(name)
        found[short] = source
        todo += local
    return found


def _read(module: str) -> tuple[str, list[str]]:
    """A module's source with its local imports rewritten, and the local modules it imports."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py") or spec.submodule_search_locations:
        raise ExportError(f"{module} is not a module file that can be embedded")
    root = module.split(".")[0]
    source = Path(spec.origin).read_text()
    lines, local = source.splitlines(keepends=True), []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
            bad = [n for n in names if n.split(".")[0] == root or n.split(".")[0] not in _ALLOWED + _stdlib()]
            if bad:
                raise ExportError(f"{module} imports {bad[0]}, which the exported file cannot carry")
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top != root:
                if top not in _ALLOWED + _stdlib():
                    raise ExportError(f"{module} imports {node.module}, which the exported file cannot carry")
                continue
            local += _local(module, node)
            lines[node.lineno - 1] = _rewrite(lines[node.lineno - 1], node.module)
    return "".join(lines), local


def _local(module, node) -> list[str]:
    """The modules a `from <local> import ...` line needs; ExportError for a name that is not a module."""
    if importlib.util.find_spec(node.module).submodule_search_locations is None:
        return [node.module]  # from harness.layout import ROW_ALIGN
    found = []
    for alias in node.names:
        spec = importlib.util.find_spec(f"{node.module}.{alias.name}")
        if spec is None or spec.submodule_search_locations:
            raise ExportError(f"{module} imports {alias.name} from {node.module}: not a module the file can carry")
        found.append(f"{node.module}.{alias.name}")
    return found


def _rewrite(line: str, module: str) -> str:
    if f"from {module} import" not in line:
        raise ExportError(f"cannot rewrite an import split over lines: {line.strip()}")
    short = module.rsplit(".", 1)[-1]
    package = importlib.util.find_spec(module).submodule_search_locations is not None
    return line.replace(f"from {module} import", "from _PACKAGE_ import" if package else f"from _PACKAGE_.{short} import")


def _stdlib() -> tuple[str, ...]:
    return tuple(sys.stdlib_module_names)


# ----------------------------------------------------------------------------- the file
def source(rep, calls) -> str:
    """The standalone file's text."""
    seen = rep.result
    verdict = seen.verdict
    if verdict != "COMPILE_ERROR" and rep.case.family not in RUNS:
        raise ExportError(f"{rep.case.family}: only compile errors export yet (the file carries the run of "
                          f"{', '.join(RUNS)}); recorded {verdict}")
    if verdict not in ("COMPILE_ERROR", "MISMATCH", "NONFINITE", "OOB_WRITE", "CRASH", "HANG"):
        raise ExportError(f"a recorded {verdict} is judged by rerunning with other band contents, which the file "
                          "does not do")
    modules = bundle(sorted({c.module for c in calls} | {"harness.compat"}))
    package = f"repro_{rep.id}"
    case = {**case_mod.to_dict(rep.case), "bounds": list(rep.case.bounds),
            "tensors": [list(t) for t in kernels.family(rep.case.family).judge.tensors(rep.case)]}
    values = {
        "ID": rep.id, "TITLE": rep.title, "RUN": RUNS.get(rep.case.family, ""), "PACKAGE": package,
        "CASE": case, "RECORDED": {"verdict": seen.verdict, "stage": seen.stage, "tensor": seen.tensor, "message": seen.message},
        "RECORDED_ON": {k: rep.environment.get(k, "?") for k in ("tilelang", "gpu")},
        "BUILDS": [{"kernel": c.kernel, "module": c.module.rsplit(".", 1)[-1], "function": c.function,
                    "args": c.args, "knobs": c.knobs} for c in calls],
    }
    _, imports, _, code, tail = re.split(r"^# ---- \w+\n", TEMPLATE.read_text(), flags=re.M)
    assigned = "".join(f"{name} = {_pretty(value)}\n" for name, value in values.items())
    embedded = "MODULES = {\n" + "".join(f"    {name!r}: {_quote(src.replace('_PACKAGE_', package))},\n"
                                         for name, src in sorted(modules.items())) + "}\n"
    return _docstring(rep) + imports + assigned + code + tail.replace("MODULES = {}\n", embedded, 1)


def _docstring(rep) -> str:
    on, seen = rep.environment, rep.result
    recorded = f"Recorded on TileLang {on.get('tilelang', '?')} ({on.get('gpu', '?')}): {seen.verdict} {seen.message}"
    return ('"""' + _wrap(f"{rep.id} without the harness: {_about(rep)}") + "\n\n" + _wrap(recorded) + "\n\n"
            "    python THIS_FILE [--timeout SECONDS]\n\n"
            "Exit 1: the recorded failure is here; 0: it is not; 125: cannot test here (a numerical failure needs\n"
            "a GPU). The TileLang programs are the harness's (harness/kernels, embedded below with their imports\n"
            "rewritten), built with the case's static values and its knobs as pass configs; inputs, the float64\n"
            "reference and the tolerance (max|t - ref| <= k * max|base - ref| + atol) as the harness computes them.\n"
            '"""\n')


def _about(rep) -> str:
    """The title and the description: a file read on its own carries what the record says of the bug."""
    return " ".join(x.rstrip(".") + "." for x in (rep.title, rep.description) if x)


def _wrap(text: str) -> str:
    """Docstring lines of at most 100 characters, with nothing that would end the docstring early."""
    return textwrap.fill(text.replace("\\", "/").replace('"""', "'''"), 100)


def _pretty(value) -> str:
    return pprint.pformat(value, width=110, sort_dicts=False)


def _quote(text: str) -> str:
    """A module's text as a readable literal: raw triple quotes where they hold it exactly."""
    if "'''" not in text and not text.endswith("\\"):
        return "r'''" + text + "'''"
    return repr(text)


def program_source(rep) -> str:
    """A generated program's standalone (harness.programs.standalone): the program itself, its meaning in torch,
    and the check its verdict needs, with the twin's knobs as the control when a twin disagreed."""
    from harness import compat
    from harness.programs import standalone

    seen, case = rep.result, rep.case
    failing = next((c for c in seen.checks or [] if c.get("tensor") == seen.tensor), {})
    header = f"{rep.id}: {_about(rep)}\n\nRecorded on TileLang {rep.environment.get('tilelang', '?')} " \
             f"({rep.environment.get('gpu', '?')}): {seen.verdict} {seen.message}"
    # A crash while the twin's control ran is the knob-free kernel's.
    knobs = () if seen.stage == "twin" else case.knobs
    return standalone.text(case.program, case.seqlen_q, case.seed,
                           [compat.KNOBS[k] for k in knobs], seen.verdict, _wrap(header),
                           failing.get("tolerance", 0.0), control=seen.region.startswith("twin:"),
                           error=_words(seen.message))


def _words(message: str) -> str:
    """The longest run of a compile error's message free of numbers and names the compile makes up (paths,
    addresses): what the same error says again on another machine."""
    text = message.split(": ", 1)[-1]
    return max(re.split(r"[0-9]|0x|/\S+", text), key=len).strip()


# ----------------------------------------------------------------------------- the flat file
_MAIN_NAMES = {"sm90", "target", "e", "said", "sys", "torch", "tilelang", "types", "FLAT"}  # what the flat file's own code binds


def flat_source(rep, calls) -> str:
    """The flat standalone file's text: the modules merged into one namespace, then a compile-only check (a
    compile error) or the run and judgement of export_template.py (a numerical failure, on a GPU)."""
    seen = rep.result
    compile_only = seen.verdict == "COMPILE_ERROR"
    if not compile_only:
        source(rep, calls)  # what the embedded file refuses, the flat one refuses too
    modules = bundle(sorted({c.module for c in calls} | {"harness.compat"}))
    _, imports, values_part, code, tail = re.split(r"^# ---- \w+\n", TEMPLATE.read_text(), flags=re.M)
    taken = set(_MAIN_NAMES)
    if not compile_only:
        taken |= {n for part in (imports, values_part, code) for n in pysource.Scopes(ast.parse(part)).module.bound}
    try:
        hoisted, merged, flat = pysource.merge(modules, "_PACKAGE_", taken)
    except pysource.FlattenError as e:
        raise ExportError(f"cannot flatten {rep.case.family}'s modules: {e}") from None
    program = "".join(f"\n\n# ---- harness {name} (flat)\n{text}" for name, text in merged)
    header = (f"{rep.id}: {_about(rep)}\n\nRecorded on TileLang {rep.environment.get('tilelang', '?')} "
              f"({rep.environment.get('gpu', '?')}): {seen.verdict} {seen.message}")
    if compile_only:
        from harness import compat

        lines = ['"""' + _wrap(header) + "\n\n    python THIS_FILE   # REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)\n"
                 '"""', "import sys", *sorted(set(hoisted) | {"import tilelang", "import torch"})]
        main = ["", "", 'if __name__ == "__main__":',
                '    sm90 = tilelang.tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})',
                '    target = "auto" if torch.cuda.is_available() else sm90', "    try:"]
        for c in calls:
            configs = "{" + ", ".join(f"tilelang.PassConfigKey.{compat.KNOBS[k]}: True" for k in c.knobs) + "}"
            args = ", ".join(f"{k}={v!r}" for k, v in c.args.items())
            c.flat_function = flat[(c.module.rsplit(".", 1)[-1], c.function)]
            main.append(f"        tilelang.compile({c.flat_function}({args}), "
                        f"target=target, pass_configs={configs})  # kernel {c.kernel}")
        main += ["    except Exception as e:", f"        said = {_words(seen.message)!r}",
                 "        print('REPRODUCED:' if said in str(e) else 'NOT REPRODUCED, another error:', type(e).__name__, said)",
                 "        sys.exit(1 if said in str(e) else 0)", "    print('NOT REPRODUCED: it compiles')"]
        return "\n".join(lines) + program + "\n".join(main) + "\n"
    head, _, _ = source(rep, calls).partition("\nMODULES = {\n")
    lines = head.splitlines(keepends=True)
    for node in reversed(ast.parse(head).body):  # the embedded file's package loader: FLAT's replaces it
        if getattr(node, "name", None) == "load_modules" or ast.unparse(node).startswith("_HOLD ="):
            del lines[node.lineno - 1 - len(getattr(node, "decorator_list", [])):node.end_lineno]
    head = "".join(lines)
    used = {"compat": {"compile", "VERSION"}}
    for c in calls:
        used.setdefault(c.module.rsplit(".", 1)[-1], set()).add(c.function)
    table = {m: {n: flat[(m, n)] for n in sorted(names)} for m, names in sorted(used.items())}
    hoisted = "".join(f"{line}  # noqa: E402\n" for line in sorted(hoisted))
    tail = ("\n\n# ---- the programs are this file's own functions: FLAT names them as the harness's modules do\n"
            f"FLAT = {_pretty(table)}\n\n\n"
            "def load_modules() -> dict:\n"
            "    g = globals()\n"
            "    return {m: types.SimpleNamespace(**{n: g[f] for n, f in names.items()}) for m, names in FLAT.items()}\n"
            '\n\nif __name__ == "__main__":\n    sys.exit(main())\n')
    return head.rstrip() + "\n\n\nimport types  # noqa: E402\n" + hoisted + program + tail


def export(rep, to: Path, flat: bool = False) -> tuple[Path, list[Call]]:
    """Write `rep`'s standalone file to `to` (`flat`: its modules merged into the file, flat_source); the
    recorded calls come back for check_program (none for a generated program, whose file is its own text
    and flat already)."""
    if rep.case.program:
        to.parent.mkdir(parents=True, exist_ok=True)
        to.write_text(program_source(rep))
        return to, []
    fam = kernels.family(rep.case.family)
    if fam.runner.module is not None:
        raise ExportError(f"{rep.case.family} is an outside kernel (TileLang's {fam.runner.module}); not exported yet")
    calls = record_build(rep.case)
    if not calls:
        raise ExportError(f"{rep.case.family}'s build compiled nothing through harness.compat")
    text = flat_source(rep, calls) if flat else source(rep, calls)
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(text)
    return to, calls


def check_program(path: Path, calls) -> list[str]:
    """One line per kernel: does the file build the same prim_func (TIR script) as the harness did?"""
    spec = importlib.util.spec_from_file_location(f"standalone_{path.stem.replace('.', '_')}", path)
    standalone = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standalone)
    if hasattr(standalone, "programs"):
        built = standalone.programs(standalone.load_modules())
    else:  # a flat compile-only file: the builders are its own functions
        built = [(c.kernel, getattr(standalone, c.flat_function)(**c.args)) for c in calls]
    lines = []
    for call, (kernel, func) in zip(calls, built):
        same = func.script() == call.func.script()
        lines.append(f"{'same' if same else 'DIFFERENT'} TIR script: {kernel} ({call.module}.{call.function})")
    return lines
