"""Python source rewritten by scope: which binding each name refers to, and modules merged into one namespace.

Two tools need to know what a name in Python source refers to. `harness export --flat` merges the kernel modules a
reproducer embeds into one file (no package, no imports of its own modules): a reference `layout.rows(...)`
becomes `rows(...)`, and a top-level name two modules define (or one that the file's own code, a builtin or an
import also binds) is renamed `<module>_<name>` where it is defined and wherever it is used. `harness reduce`
substitutes a function's parameters with the literal arguments of its one call, and inlines a function's body at a
call. Both rename only the names that resolve to the binding meant, by Python's scoping rules (a local of the same
name, a comprehension variable, a class body are told apart), so a rewrite never changes what another name means.
Standard library only: the reducer runs where only TileLang, torch and picire are installed.
"""
from __future__ import annotations

import ast
import builtins
import copy

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = _FUNCTIONS + (ast.ClassDef,) + _COMPREHENSIONS


class FlattenError(ValueError):
    """Modules that cannot be merged into one namespace, in one line."""


class _Scope:
    def __init__(self, node, parent):
        self.node, self.parent = node, parent
        self.bound: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.is_class = isinstance(node, ast.ClassDef)
        self.is_comprehension = isinstance(node, _COMPREHENSIONS)


def _outer_inner(node) -> tuple[list, list]:
    """A scope node's parts evaluated in the enclosing scope, and those evaluated in its own."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        params = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        outer = a.defaults + [d for d in a.kw_defaults if d is not None]
        if isinstance(node, ast.Lambda):
            return outer, params + [node.body]
        outer += node.decorator_list + [p.annotation for p in params if p.annotation] + ([node.returns] if node.returns else [])
        return outer, params + node.body
    if isinstance(node, ast.ClassDef):
        return node.decorator_list + node.bases + node.keywords, node.body
    first, *rest = node.generators
    elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    return [first.iter], [first.target, *first.ifs, *rest, *elts]


class Scopes:
    """Every name of a module's tree with the scope whose binding it refers to (Python's rules: a function's
    locals, declared globals and nonlocals, class bodies skipped by the functions inside them, comprehensions
    with their own targets). `binding(name_node)` is the scope node (the Module, a FunctionDef, ...) or None for
    a builtin or an undefined name."""

    def __init__(self, tree: ast.Module):
        self.module = _Scope(tree, None)
        self.scope_of = {id(tree): self.module}
        self._refs: list[tuple[ast.Name, _Scope]] = []
        self._walk(tree.body, self.module)
        self._resolved = {id(name): self._resolve(scope, name.id) for name, scope in self._refs}
        self.names = {id(name): name for name, _ in self._refs}

    def _walk(self, nodes, scope):
        for node in nodes:
            if isinstance(node, list):
                self._walk(node, scope)
            elif isinstance(node, _SCOPES):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    scope.bound.add(node.name)
                outer, inner = _outer_inner(node)
                self._walk(outer, scope)
                child = _Scope(node, scope)
                self.scope_of[id(node)] = child
                self._walk(inner, child)
            elif isinstance(node, ast.NamedExpr):  # binds in the nearest scope that is not a comprehension
                target = scope
                while target.is_comprehension:
                    target = target.parent
                target.bound.add(node.target.id)
                self._refs.append((node.target, target))
                self._walk([node.value], scope)
            else:
                self._visit(node, scope)
                self._walk(list(ast.iter_child_nodes(node)), scope)

    def _visit(self, node, scope):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                scope.bound.add(node.id)
            self._refs.append((node, scope))
        elif isinstance(node, ast.arg):
            scope.bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            scope.bound.update((a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bound.add(node.name)
        elif isinstance(node, ast.Global):
            scope.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocals.update(node.names)

    def _resolve(self, scope, name):
        if name in scope.globals:
            return self.module
        if name in scope.bound and name not in scope.nonlocals:
            return scope
        s = scope.parent
        while s is not None:
            if s is self.module:
                return s if name in s.bound else None
            if not s.is_class:
                if name in s.globals:
                    return self.module
                if name in s.bound:
                    return s
            s = s.parent
        return None

    def binding(self, name: ast.Name):
        scope = self._resolved.get(id(name))
        return scope.node if scope else None

    def references(self, scope_node, names=None) -> list[ast.Name]:
        """The Name nodes that refer to `scope_node`'s binding of one of `names` (all its names: None)."""
        target = self.scope_of[id(scope_node)]
        return [self.names[i] for i, s in self._resolved.items()
                if s is target and (names is None or self.names[i].id in names)]


def substitute(body: list, scopes: Scopes, scope_node, values: dict) -> None:
    """Replace, in the statements `body` (in place), every reference to `scope_node`'s binding of a name in
    `values` by a copy of the expression `values[name]`."""
    targets = {id(n) for n in scopes.references(scope_node, set(values))}

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if id(node) in targets and isinstance(node.ctx, ast.Load):
                return ast.copy_location(copy.deepcopy(values[node.id]), node)
            return node
    for i, stmt in enumerate(body):
        body[i] = Sub().visit(stmt)


# ----------------------------------------------------------------------------- merging modules
def _local_imports(tree, package):
    """{alias: module} of `from PACKAGE import m`, {name: (module, name)} of `from PACKAGE.m import name`."""
    modules, names = {}, {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            rest = node.module[len(package) + 1:]
            for a in node.names:
                if rest:
                    names[a.asname or a.name] = (rest, a.name)
                else:
                    modules[a.asname or a.name] = a.name
    return modules, names


def _order(deps: dict[str, set[str]]) -> list[str]:
    """The modules, each after the modules it imports (names in order where nothing decides)."""
    done, order = set(), []

    def visit(m, path):
        if m in done:
            return
        if m in path:
            raise FlattenError(f"modules import each other: {' -> '.join(path + [m])}")
        for d in sorted(deps[m]):
            visit(d, path + [m])
        done.add(m)
        order.append(m)
    for m in sorted(deps):
        visit(m, [])
    return order


def _is_local(node, package) -> bool:
    return isinstance(node, ast.ImportFrom) and bool(node.module) and node.module.split(".")[0] == package


def merge(modules: dict[str, str], package: str, taken=()) -> tuple[list[str], list[tuple[str, str]], dict]:
    """Merge `modules` ({name: source}; they import one another as `from PACKAGE import m` or `from PACKAGE.m
    import x`) into one namespace. Returns (import lines hoisted from their top levels, each once;
    [(module, its code with no docstring, no imports at its top level and every name renamed)] with every module
    after those it imports; {(module, name): flat name} of their top-level definitions). A name is renamed
    `<module>_<name>` where two modules define it, or where it is in `taken` (the names the file's own code
    defines), a builtin, or an import's. FlattenError for what one namespace cannot hold: two imports binding
    one name, a module object used other than as `module.name`, a star import."""
    trees = {m: ast.parse(src) for m, src in modules.items()}
    locals_ = {m: _local_imports(t, package) for m, t in trees.items()}
    deps = {m: set(locals_[m][0].values()) | {src for src, _ in locals_[m][1].values()} for m in trees}
    unknown = sorted({d for ds in deps.values() for d in ds} - set(trees))
    if unknown:
        raise FlattenError(f"imported but not given: {', '.join(unknown)}")
    order = _order(deps)
    imports, bound_by = {}, {}  # import line -> None (ordered), bound name -> import line
    defined: dict[str, set[str]] = {}
    for m in order:
        tree = trees[m]
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if _is_local(node, package) or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                    continue
                for a in node.names:
                    if a.name == "*":
                        raise FlattenError(f"{m}: a star import ({ast.unparse(node)})")
                    line = ast.unparse(ast.Import([a]) if isinstance(node, ast.Import)
                                       else ast.ImportFrom(node.module, [a], node.level))
                    name = a.asname or a.name.split(".")[0]
                    if bound_by.setdefault(name, line) != line and not (isinstance(node, ast.Import) and not a.asname):
                        raise FlattenError(f"{m}: `{line}` binds {name}, which `{bound_by[name]}` binds too")
                    imports[line] = None
            else:
                scopes = Scopes(ast.Module([node], []))
                names |= scopes.module.bound
        defined[m] = names
    reserved = set(taken) | set(dir(builtins)) | set(bound_by)
    count: dict[str, int] = {}
    for names in defined.values():
        for n in names:
            count[n] = count.get(n, 0) + 1
    flat = {}
    for m in order:
        for n in sorted(defined[m]):
            new = n if count[n] == 1 and n not in reserved else f"{m}_{n}"
            if new != n and (new in reserved or count.get(new)):
                raise FlattenError(f"{m}: cannot rename {n}: {new} is taken too")
            flat[(m, n)] = new
    out = []
    for m in order:
        out.append((m, ast.unparse(_rewrite(trees[m], m, package, locals_[m], defined[m], flat)).strip() + "\n"))
    return list(imports), out, flat


def _rewrite(tree, module, package, local, defined, flat):
    aliases, imported = local
    scopes = Scopes(tree)
    refs = {id(n) for n in scopes.references(tree)}

    def new_name(name):
        if name in imported:
            return flat[imported[name]]
        return flat.get((module, name), name)

    class Rewrite(ast.NodeTransformer):
        def visit_Attribute(self, node):
            v = node.value
            if isinstance(v, ast.Name) and id(v) in refs and v.id in aliases:
                key = (aliases[v.id], node.attr)
                if key not in flat:
                    raise FlattenError(f"{module}: {v.id}.{node.attr}: {aliases[v.id]} defines no {node.attr}")
                return ast.copy_location(ast.Name(flat[key], node.ctx), node)
            self.generic_visit(node)
            return node

        def visit_Name(self, node):
            if id(node) in refs:
                if node.id in aliases:
                    raise FlattenError(f"{module}: module {node.id} used as a value (only {node.id}.name merges)")
                node.id = new_name(node.id)
            return node

        def visit_Global(self, node):
            node.names = [new_name(n) if n in defined else n for n in node.names]
            return node

    body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the module docstring
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = new_name(node.name)
    return Rewrite().visit(ast.Module(body, []))
