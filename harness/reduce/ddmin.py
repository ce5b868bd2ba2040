"""The deleting passes: picire's ddmin over the statements of each body, outermost first, and over the lines,
and the top-level definitions nothing reaches dropped at once."""
from __future__ import annotations

import ast
import sys


def _picire():
    """picire, imported. Its 21.8 reads its own version with pkg_resources, which setuptools no longer ships
    (from 81): where that import fails, a stand-in answering from importlib.metadata is in sys.modules while
    picire imports, and taken out again."""
    try:
        import picire
        return picire
    except ModuleNotFoundError as e:
        if e.name != "pkg_resources":
            raise
    import types
    from importlib import metadata

    shim = types.ModuleType("pkg_resources")
    shim.get_distribution = lambda name: types.SimpleNamespace(version=metadata.version(name))
    sys.modules["pkg_resources"] = shim
    try:
        for name in [m for m in sys.modules if m == "picire" or m.startswith("picire.")]:
            del sys.modules[name]  # the half-imported package of the failed attempt
        import picire
    finally:
        del sys.modules["pkg_resources"]
    return picire


def spent(test) -> bool:
    """Whether `test`'s budget is spent (a Predicate's; any other callable has none)."""
    return getattr(test, "spent", lambda: False)()


def ddmin(units: list, build, test, jobs: int = 1) -> list:
    """A 1-minimal sublist of `units` (order kept) whose text build(sublist) is interesting: picire's ddmin,
    its tests in `jobs` processes. `units` itself must be interesting."""
    picire = _picire()
    if not units or spent(test) or not test(build(units)):  # past a budget nothing more is tried
        return units
    if len(units) == 1:
        return [] if test(build([])) else units

    def tester(config, config_id):
        if spent(test):  # past a budget no config is built; picire's re-check of its current one ("assert") holds
            return picire.Outcome.FAIL if config_id[-1] == "assert" else picire.Outcome.PASS
        return picire.Outcome.FAIL if test(build([units[i] for i in config])) else picire.Outcome.PASS
    dd = picire.ParallelDD(tester, proc_num=jobs) if jobs > 1 else picire.DD(tester)
    kept = [units[i] for i in dd(list(range(len(units))))]
    if len(kept) == 1 and test(build([])):
        return []
    return kept


def text_of(tree: ast.Module) -> str:
    return ast.unparse(ast.fix_missing_locations(tree)).strip() + "\n" if tree.body else ""


def _bodies(node):
    """(owner, field) of each statement list directly inside statement `node`."""
    for field in ("body", "orelse", "finalbody"):
        value = getattr(node, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield node, field
    for handler in getattr(node, "handlers", None) or ():
        yield handler, "body"
    for case in getattr(node, "cases", None) or ():
        yield case, "body"


def _filled(owner, field, kept):
    """A body with nothing kept is `pass` where Python needs a statement."""
    return kept or ([] if isinstance(owner, ast.Module) or field in ("orelse", "finalbody") else [ast.Pass()])


def _defines(stmt) -> set[str] | None:
    """The module-level names a top-level definition binds (a def, a class, an assignment to names, an import),
    or None for a statement that does more (it stays)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)) and all(a.name != "*" for a in stmt.names):
        return {(a.asname or a.name.split(".")[0]) for a in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = [n for t in targets for n in ast.walk(t)]
        if all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store)) for n in names):
            return {n.id for n in names if isinstance(n, ast.Name)}
    return None


def dead_code(tree: ast.Module) -> ast.Module | None:
    """The module without the top-level definitions nothing reaches (from the statements that are not mere
    definitions, through the names each reached definition reads), or None if every one is reached. Names are
    matched by spelling, so a local of the same name keeps a definition alive: never too much is taken."""
    defs = [(s, _defines(s)) for s in tree.body]
    reads = [{n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} for s, _ in defs]
    live = set().union(*(r for r, (_, d) in zip(reads, defs) if d is None))
    kept = [d is None for _, d in defs]
    changed = True
    while changed:
        changed = False
        for i, (_, d) in enumerate(defs):
            if not kept[i] and d & live:
                kept[i], changed = True, True
                live |= reads[i]
    if all(kept):
        return None
    return ast.Module([s for (s, _), k in zip(defs, kept) if k], [])


def statements(tree: ast.Module, test, jobs: int = 1) -> ast.Module:
    """ddmin over each statement list, outermost first (in place); first, in one test, every top-level
    definition nothing reaches dropped (dead_code)."""
    dead = dead_code(tree)
    if dead is not None and test(text_of(dead)):
        tree.body = dead.body
    queue = [(tree, "body")]
    while queue:
        owner, field = queue.pop(0)
        stmts = getattr(owner, field)

        def build(kept, owner=owner, field=field, saved=stmts):
            setattr(owner, field, _filled(owner, field, kept))
            try:
                return text_of(tree)
            finally:
                setattr(owner, field, saved)
        kept = ddmin(stmts, build, test, jobs)
        setattr(owner, field, _filled(owner, field, kept))
        for s in kept:
            queue.extend(_bodies(s))
    return tree


def lines(text: str, test, jobs: int = 1) -> str:
    return "".join(ddmin(text.splitlines(keepends=True), "".join, test, jobs))
