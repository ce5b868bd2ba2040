"""harness reduce (harness/reduce/) on stand-in reproducers: pure Python files that print REPRODUCED when some lines
are there, so that a reduction takes seconds. The result is syntactically valid and 1-minimal by lines, the outcome
cache runs no text twice (a python that notes each start counts them), and the simplifications keep the
file's check intact. The CLI refuses what it cannot reduce with one line."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import pysource
from harness.reduce import candidates, ddmin, reduction, simplify

STAND_IN = '''"""A stand-in reproducer: REPRODUCED (exit 1) iff KEY_A and KEY_B are both assigned."""
import sys
x = 1  # noise
KEY_A = 1


def unused(a, b):
    return a + b


y = unused(x, 2)
KEY_B = 2
z = [y] * 3
if "KEY_A" in globals() and "KEY_B" in globals():
    print("REPRODUCED: both keys")
    sys.exit(1)
print("NOT REPRODUCED")
'''


@pytest.fixture
def counting(tmp_path):
    """(a python that appends a line to runs.txt each time it starts, runs.txt)."""
    runs = tmp_path / "runs.txt"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho run >> {runs}\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return str(python), runs


def interesting(text: str, tmp_path: Path) -> bool:
    p = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, cwd=tmp_path)
    return p.returncode == 1 and candidates.reproduced_line(p.stdout) == "REPRODUCED: both keys" and "Traceback" not in p.stderr


def test_a_reduction_keeps_the_two_lines_that_matter_and_is_1_minimal_by_lines(tmp_path):
    r = reduction.reduce(STAND_IN, timeout=30, cache=tmp_path / "cache")
    text = r.after
    ast.parse(text)  # valid Python
    assert "KEY_A = 1" in text and "KEY_B = 2" in text and "unused" not in text and "noise" not in text
    assert interesting(text, tmp_path)
    lines = text.splitlines(keepends=True)
    for i in range(len(lines)):  # 1-minimal: no single line can go (but the blank lines ruff format puts in)
        assert not lines[i].strip() or not interesting("".join(lines[:i] + lines[i + 1:]), tmp_path), lines[i]
    assert r.line == "REPRODUCED: both keys" and r.runs > 0 and r.skipped > 0
    assert len(text.splitlines()) < len(r.before.splitlines())


def test_the_cache_runs_no_text_twice_and_a_rerun_with_it_runs_nothing(tmp_path, counting):
    python, runs = counting
    cache = tmp_path / "cache"
    first = reduction.reduce(STAND_IN, timeout=30, cache=cache, python=python)
    ran = len(runs.read_text().splitlines())
    assert ran == first.runs + 1  # each text run once, plus the unreduced file's probe
    again = reduction.reduce(STAND_IN, timeout=30, cache=cache, python=python)
    assert len(runs.read_text().splitlines()) == ran + 1  # the probe only
    assert again.after == first.after


def test_a_candidate_that_does_not_compile_is_never_run(tmp_path, counting):
    python, runs = counting
    test = candidates.Predicate(tmp_path / "cache", 30, python=python)
    assert not test("x = (\n")
    assert not runs.exists() and test.counts() == (0, 1)
    assert test(STAND_IN) and test(STAND_IN)  # the second answer is the cache's
    assert len(runs.read_text().splitlines()) == 1 and test.counts() == (1, 1)


def test_the_check_is_never_weakened(tmp_path):
    """`'REPRODUCED' if said in str(e) else ...` must not become 'REPRODUCED' (any exception would then do), nor
    the exit status `1 if said in str(e) else 0` a constant."""
    text = '''import sys
said = "the words"
try:
    raise ValueError("other words, not the ones recorded")
except Exception as e:
    print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED:", said)
    sys.exit(1 if said in str(e) else 0)
print("NOT REPRODUCED: no error")
'''
    with pytest.raises(reduction.ReduceError, match="does not print REPRODUCED here"):
        reduction.reduce(text, timeout=30, cache=tmp_path / "c")
    r = reduction.reduce(text.replace("other words, not the ones recorded", "the words, as recorded"), timeout=30,
                   cache=tmp_path / "c2")
    assert r.after.count("in str(e)") == 2 and "else 0" in r.after and "import sys" in r.after, r.after


def test_an_uncaught_exception_after_the_line_is_not_the_checks_exit_1(tmp_path):
    """Without `import sys`, `sys.exit(1)` raises NameError: exit 1 too, but not the check's."""
    r = reduction.reduce("import sys\nprint('REPRODUCED')\nsys.exit(1)\n", timeout=30, cache=tmp_path / "c")
    assert r.after == "import sys\nprint('REPRODUCED')\nsys.exit(1)\n" or "import sys" in r.after


def test_simplifications_specialize_inline_and_take_branches(tmp_path):
    text = '''import sys


def build(n, mode, scale=2.0):
    """A builder called once with literals."""
    if mode == "fast":
        total = n * scale
    else:
        total = -1
    return total


def check(v):
    if v == 8.0:
        print("REPRODUCED")
        sys.exit(1)


check(build(4, "fast"))
print("NOT REPRODUCED")
'''
    r = reduction.reduce(text, timeout=30, cache=tmp_path / "c")
    assert "def build" not in r.after and "mode" not in r.after and "def check" not in r.after, r.after
    assert len(r.after.splitlines()) <= 5, r.after  # the program is a constant: its check may fold to `if True:`


# What the simplifications meet in a flat export: builders, macros, tuple fragments, layout tables, compat's Tensor.
SAMPLE = '''import sys
import tilelang
import tilelang.language as T
ACCUM = "float32"
Tensor = getattr(T, "Tensor", None) or T.Buffer


def shape(layout, b, s, h, d):
    return {"bshd": [b, s, h, d], "thd": [s, h, d]}.get(layout, [b, h, s, d])


def visible(value, fill, qi, kj, left, right):
    value = T.if_then_else(kj < 100, value, fill)
    value = T.if_then_else(kj <= qi + right, value, fill)
    if left >= 0:
        value = T.if_then_else(kj >= qi - left, value, fill)
    return value


def fragments(m, n):
    return (T.alloc_fragment([m, n], ACCUM), *(T.alloc_fragment([m], ACCUM) for _ in range(2 + True)))


@T.macro
def init(acc, m):
    T.fill(acc, 0)


def program(heads, left, right=-1, block=64, variant="default"):
    if variant not in ("default",):
        raise ValueError(variant)
    seq = T.symbolic("seq")
    q_shape, k_shape = (shape("bhsd", 1, seq, heads, 64), shape("bhsd", 1, seq, heads, 64))

    @T.prim_func
    def main(Q: Tensor(q_shape, "float16"), K: Tensor(k_shape, "float16")):
        with T.Kernel(T.ceildiv(seq, block), heads, threads=128) as (bx, by):
            acc, m1, m2, m3 = fragments(block, block)
            init(acc, block)
            q0 = bx * block
            for k in T.Pipelined(T.max(0, 2 // 2), 4, num_stages=2):
                for i, j in T.Parallel(block, block):
                    acc[i, j] = visible(acc[i, j], -T.infinity(ACCUM), q0 + i, k * block + j, left, right)
    return main


if __name__ == "__main__":
    try:
        tilelang.compile(program(2, 64), target="cuda")
    except Exception as e:
        said = "the words"
        print("REPRODUCED:" if said in str(e) else "NOT REPRODUCED:", said)
        sys.exit(1 if said in str(e) else 0)
'''


def test_every_simplification_applies_where_it_offers_to_and_leaves_valid_python():
    import copy

    tree = ast.parse(SAMPLE)
    offered = {}
    for sites, apply in simplify.TRANSFORMS:
        for what, site in sites(tree):
            new = apply(copy.deepcopy(tree), site)
            assert new is not None, what
            compile(ddmin.text_of(new), "candidate", "exec")
            offered[sites.__name__] = offered.get(sites.__name__, 0) + 1
    assert set(offered) == {s.__name__ for s, _ in simplify.TRANSFORMS}, offered  # each kind has a site here
    protected = [w for w, _ in simplify._branches(tree)]
    assert not any("REPRODUCED" in w for w in protected)
    texts = {ddmin.text_of(apply(copy.deepcopy(tree), site)) for sites, apply in simplify.TRANSFORMS for _, site in sites(tree)}
    # The check is never made a constant: what it prints and how it exits still depend on the error.
    assert all("'REPRODUCED:' if said in str(e)" in t or "'REPRODUCED:' if 'the words' in str(e)" in t for t in texts)
    assert not any("sys.exit(1)" in t for t in texts)


def test_a_call_moves_to_its_one_use_but_is_never_copied():
    tree = ast.parse("def f():\n    s = T.alloc_shared([8], 'f')\n    T.copy(a, s)\n    T.copy(s, b)\n    n = 4 + 1\n"
                     "    g(n, n)\n    o = T.alloc_fragment([8], 'f')\n    T.copy(o, b)\n")
    assert [w for w, _ in simplify._propagate(tree)] == ["propagate n = 4 + 1", "propagate o = T.alloc_fragment([8], 'f')"]


def test_a_tuple_assignment_splits_up_to_a_starred_value():
    import copy

    tree = ast.parse("acc, m1, m2, m3 = (T.alloc_fragment([8, 8], A), *(T.alloc_fragment([8], A) for _ in range(3)))\n")
    (_, site), = simplify._split_sites(tree)
    assert ddmin.text_of(simplify._apply_split(copy.deepcopy(tree), site)) == (
        "acc = T.alloc_fragment([8, 8], A)\nm1, m2, m3 = (*(T.alloc_fragment([8], A) for _ in range(3)),)\n")


def test_parallel_jobs_give_a_1_minimal_result_too(tmp_path):
    r = reduction.reduce(STAND_IN, jobs=2, timeout=30, cache=tmp_path / "cache")
    assert "KEY_A = 1" in r.after and "KEY_B = 2" in r.after and interesting(r.after, tmp_path)


def test_dead_code_drops_the_definitions_nothing_reaches_in_one_go():
    tree = ast.parse("import os\nimport sys\nA = 1\nB = A + 1\n\n\ndef f():\n    return B\n\n\ndef g():\n"
                     "    return os.sep\n\n\nprint(f())\nsys.exit(1)\n")
    left = ddmin.text_of(ddmin.dead_code(tree))
    assert "def g" not in left and "import os" not in left
    assert all(s in left for s in ("import sys", "A = 1", "B = A + 1", "def f", "print(f())"))
    assert ddmin.dead_code(ast.parse(left)) is None


@pytest.fixture
def slow(tmp_path):
    """A python that takes half a second more to start, so that a reduction outlasts a short budget."""
    python = tmp_path / "slowpython"
    python.write_text(f"#!/bin/sh\nsleep 0.5\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return str(python)


def test_a_budget_stops_the_passes_and_leaves_the_smallest_reproducing_file(tmp_path, slow):
    best = tmp_path / "out" / "best.py"
    big = STAND_IN.replace("x = 1  # noise\n", "x = 1\n" + "".join(f"noise_{i} = {i}\n" for i in range(300)))
    r = reduction.reduce(big, timeout=30, cache=tmp_path / "cache", python=slow, budget=3, best=best)
    assert r.stopped and "stopped at the budget" in r.summary("s")  # it stopped, and not 1-minimal yet:
    assert any(line.startswith("noise_") for line in r.after.splitlines())
    assert [p.name for p in best.parent.iterdir()] == ["best.py"]  # nothing else beside it
    assert interesting(r.after, tmp_path) and interesting(best.read_text(), tmp_path)
    assert len(best.read_text()) <= len(r.after) <= len(big)
    # the runs the deadline cut short were not kept: the same cache, no budget, goes on to the 1-minimal result
    done = reduction.reduce(big, timeout=30, cache=tmp_path / "cache", best=best)
    assert not done.stopped and "KEY_A = 1" in done.after and "noise" not in done.after
    assert interesting(best.read_text(), tmp_path) and len(best.read_text()) <= len(done.after)


def test_the_best_file_holds_the_file_itself_before_any_candidate_reproduces(tmp_path):
    best = tmp_path / "best.py"
    r = reduction.reduce(STAND_IN, timeout=30, cache=tmp_path / "cache", budget=0.0, best=best)
    assert r.stopped and r.after == STAND_IN and best.read_text() == STAND_IN


def test_a_timeout_is_no_reproduction(tmp_path):
    test = candidates.Predicate(tmp_path / "cache", 1)
    assert not test("import time\ntime.sleep(30)\nprint('REPRODUCED')\n")


# ----------------------------------------------------------------------------- scopes (harness.pysource)
def test_merge_renames_what_two_modules_define_and_only_where_it_means_that():
    a = "import math\n\n\ndef shape(x):\n    return x\n\n\ndef twice(shape):\n    return shape * 2\n"
    b = ("from _P_ import a\n\n\ndef shape(y):\n    return a.shape(y) + 1\n\n\n"
         "def use(v):\n    return [shape(i) for i in v] + [a.twice(3)]\n")
    imports, merged, flat = pysource.merge({"a": a, "b": b}, "_P_")
    assert imports == ["import math"] and [m for m, _ in merged] == ["a", "b"]
    assert flat[("a", "shape")] == "a_shape" and flat[("b", "shape")] == "b_shape" and flat[("a", "twice")] == "twice"
    code = "\n".join(text for _, text in merged)
    assert "def twice(shape):\n    return shape * 2" in code  # the parameter is not the module's function
    assert "return a_shape(y) + 1" in code and "[b_shape(i) for i in v] + [twice(3)]" in code
    namespace = {}
    exec("\n".join(imports) + "\n" + code, namespace)
    assert namespace["use"]([1, 2]) == [2, 3, 6]


def test_merge_refuses_a_module_used_as_a_value():
    with pytest.raises(pysource.FlattenError, match="module a used as a value"):
        pysource.merge({"a": "X = 1\n", "b": "from _P_ import a\nY = a\n"}, "_P_")


# ----------------------------------------------------------------------------- the flat export (harness export --flat)
@pytest.mark.parametrize("rid", ["59a003a61bcc", "54d466153e16"])  # a compile error (compile-only); a MISMATCH (a run)
def test_the_flat_export_is_plain_code_and_builds_the_harnesss_program(rid, tmp_path):
    pytest.importorskip("tilelang")
    from harness import export, reproducer_files, reproducer_loading

    rep = reproducer_loading.load(reproducer_files.find(rid, ROOT / "reproducers"))
    path, calls = export.export(rep, tmp_path / f"{rid}.py", flat=True)
    text = path.read_text()
    assert "import harness" not in text and "from harness" not in text and "MODULES" not in text
    assert "def softmax_step(" in text and "blocks." not in text  # the macros are the file's own functions
    assert all(line.startswith("same TIR script") for line in export.check_program(path, calls))
    if rep.result.verdict == "COMPILE_ERROR":
        assert "torch.cuda.is_available() else sm90" in text and "said in str(e)" in text


# ----------------------------------------------------------------------------- the command
def _cli(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "harness.cli", "reduce", *map(str, argv)], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "HOME": str(cwd)}, timeout=120)


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("what", ["missing.py", "0123456789ab"])
def test_reduce_of_a_missing_file_or_id_is_one_line_and_exit_2(what, tmp_path):
    p = _cli(what, "--dir", ROOT / "reproducers", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("harness reduce: "), p.stderr


def test_reduce_of_a_file_that_does_not_reproduce_is_125(tmp_path):
    (tmp_path / "fine.py").write_text("print('NOT REPRODUCED')\n")
    p = _cli("fine.py", cwd=tmp_path)
    assert p.returncode == 125 and p.stderr.count("\n") == 1 and "does not print REPRODUCED here" in p.stderr
    assert not (tmp_path / "fine.min.py").exists()


def test_reduce_writes_the_result_and_a_line_of_sizes(tmp_path):
    (tmp_path / "s.standalone.py").write_text(STAND_IN)
    p = _cli("s.standalone.py", "--jobs", "1", "--timeout", "30", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"reduced s.standalone.py: {len(STAND_IN.splitlines())} -> " in p.stdout and "tests run" in p.stdout
    assert "KEY_A = 1" in (tmp_path / "s.min.py").read_text()
