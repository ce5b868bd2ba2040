"""The simplifications: transformations of the file's tree (a function specialized, a name propagated, a branch
taken, a call inlined, ...), each tried at each site and kept only if the result still reproduces."""
from __future__ import annotations

import ast
import copy
from concurrent.futures import ThreadPoolExecutor

from harness import pysource
from harness.reduce.candidates import SIGNAL
from harness.reduce.ddmin import _filled, spent, text_of

MAX_CHANGES = 2000  # simplifications accepted in one reduction (inlining could otherwise go on)
MAX_COPIES = 40     # characters a propagated expression may add by being copied to more than one use


def _literal(node) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _functions(tree):
    """{name: FunctionDef} of the module's top-level functions defined once."""
    defs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            defs[node.name] = node if node.name not in defs and isinstance(node, ast.FunctionDef) else None
    return {n: f for n, f in defs.items() if f is not None}


def _params(f):
    """[(name, default node or None)] of a function with plain parameters only (None if it has others)."""
    a = f.args
    if a.vararg or a.kwarg or a.posonlyargs:
        return None
    pos = [(p.arg, None) for p in a.args]
    for i, d in enumerate(a.defaults):
        pos[len(pos) - len(a.defaults) + i] = (pos[len(pos) - len(a.defaults) + i][0], d)
    return pos + [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults)]


def _bind(f, call):
    """{param: argument expression} of `call` to `f` (defaults filled in), or None where it cannot tell."""
    params = _params(f)
    if params is None or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    names = [n for n, _ in params]
    if len(call.args) > len(f.args.args):
        return None
    bound = dict(zip(names, call.args))
    for k in call.keywords:
        if k.arg not in names or k.arg in bound:
            return None
        bound[k.arg] = k.value
    for n, d in params:
        if n not in bound:
            if d is None:
                return None
            bound[n] = d
    return bound


def _stored(scopes, f, names):
    """The names among `names` that `f`'s body assigns (a parameter reassigned cannot be substituted)."""
    return {n.id for n in scopes.references(f, names) if not isinstance(n.ctx, ast.Load)}


def _docless(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _calls_to(tree, scopes, name, f_node_scope):
    """The references to module-level `name`: [(Name node, Call node or None)]."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    refs = scopes.references(f_node_scope, {name})
    out = []
    for r in refs:
        p = parents.get(id(r))
        out.append((r, p if isinstance(p, ast.Call) and p.func is r else None))
    return out


def _specialize(tree):
    """A function whose every use is a call giving one parameter the same literal: that parameter substituted
    and dropped (defaults count as given)."""
    scopes = pysource.Scopes(tree)
    for name, f in _functions(tree).items():
        uses = _calls_to(tree, scopes, name, tree)
        if not uses or any(call is None for _, call in uses):
            continue
        binds = [_bind(f, call) for _, call in uses]
        if any(b is None for b in binds):
            continue
        params = [n for n, _ in _params(f)]
        stored = _stored(scopes, f, set(params))
        for p in params:
            values = {ast.dump(b[p]) for b in binds}
            if p in stored or len(values) != 1 or not _literal(binds[0][p]):
                continue
            yield f"specialize {name}({p}={ast.unparse(binds[0][p])})", (name, p)


def _drop_param(f, p, calls) -> None:
    """Parameter `p` taken out of `f`, and what each call in `calls` passes for it."""
    a = f.args
    positional = [x.arg for x in a.args]
    if p in positional:
        index = positional.index(p)
        first_default = len(a.args) - len(a.defaults)
        if index >= first_default:
            del a.defaults[index - first_default]
        del a.args[index]
    else:
        index = None
        k = [x.arg for x in a.kwonlyargs].index(p)
        del a.kwonlyargs[k]
        del a.kw_defaults[k]
    for call in calls:
        if index is not None and index < len(call.args):
            del call.args[index]
        call.keywords = [k for k in call.keywords if k.arg != p]


def _apply_specialize(tree, site):
    name, p = site
    scopes = pysource.Scopes(tree)
    f = _functions(tree)[name]
    calls = [call for _, call in _calls_to(tree, scopes, name, tree)]
    pysource.substitute(f.body, scopes, f, {p: _bind(f, calls[0])[p]})
    _drop_param(f, p, calls)
    return tree


def _defs(tree):
    """[(FunctionDef, the scope node it is defined in)] of every function, in walk order."""
    out = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((child, scope))
                visit(child, child)
            elif isinstance(child, (ast.Lambda, ast.ClassDef) + pysource._COMPREHENSIONS):
                visit(child, child)
            else:
                visit(child, scope)
    visit(tree, tree)
    return out


def _unused(tree):
    """A parameter nothing in its function reads: dropped, with what each call passes for it."""
    scopes = pysource.Scopes(tree)
    for k, (f, _) in enumerate(_defs(tree)):
        params = _params(f)
        if params is None:
            continue
        read = {n.id for n in scopes.references(f) if isinstance(n.ctx, ast.Load)}
        for name, _ in params:
            if name not in read:
                yield f"drop unused parameter {name} of {f.name}", (k, name)


def _apply_unused(tree, site):
    k, p = site
    scopes = pysource.Scopes(tree)
    f, scope = _defs(tree)[k]
    uses = _calls_to(tree, scopes, f.name, scope) if id(scope) in scopes.scope_of else []
    calls = [call for _, call in uses if call is not None]
    if any(_bind(f, call) is None for call in calls):
        return None
    _drop_param(f, p, calls)
    return tree


def _scopes_with_bodies(tree):
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _propagate(tree):
    """A name that one plain assignment binds in a scope (and nothing else binds): its uses replaced by the
    assigned expression, the assignment dropped (a literal first; any expression not reading the name; not
    where the copies would add more than MAX_COPIES characters: a long string used twice stays a name). A call
    moves to its one use but is never copied: `s = T.alloc_shared(...)` read twice is one buffer, and two
    `T.alloc_shared(...)` would be two (as would two `T.symbolic("n")`)."""
    scopes = pysource.Scopes(tree)
    found = []
    for i, scope in enumerate(_scopes_with_bodies(tree)):
        refs = scopes.references(scope)
        stores = {}
        for r in refs:
            if not isinstance(r.ctx, ast.Load):
                stores.setdefault(r.id, []).append(r)
        params = set() if scope is tree else {x.arg for x in ast.walk(scope.args) if isinstance(x, ast.arg)}
        for stmt in ast.walk(scope):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                n = stmt.targets[0].id
                reads_itself = any(isinstance(x, ast.Name) and x.id == n for x in ast.walk(stmt.value))
                uses = sum(1 for r in refs if r.id == n and isinstance(r.ctx, ast.Load))
                longer = (len(ast.unparse(stmt.value)) - len(n)) * (uses - 1)  # characters the copies add
                calls = any(isinstance(x, ast.Call) for x in ast.walk(stmt.value))
                if stores.get(n) == [stmt.targets[0]] and n not in params and not reads_itself and uses \
                        and longer <= MAX_COPIES and (uses == 1 or not calls):
                    found.append((not _literal(stmt.value), f"propagate {n} = {ast.unparse(stmt.value)[:60]}", (i, n)))
    for _, what, site in sorted(found, key=lambda x: x[0]):
        yield what, site


def _apply_propagate(tree, site):
    i, n = site
    scope = list(_scopes_with_bodies(tree))[i]
    scopes = pysource.Scopes(tree)
    stored = {id(r) for r in scopes.references(scope, {n}) if not isinstance(r.ctx, ast.Load)}
    assign = next(s for s in ast.walk(scope) if isinstance(s, ast.Assign) and len(s.targets) == 1
                  and id(s.targets[0]) in stored)
    pysource.substitute(scope.body, scopes, scope, {n: assign.value})
    _remove_stmt(tree, assign)
    return tree


def _remove_stmt(tree, stmt):
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            lst = getattr(node, field, None)
            if isinstance(lst, list) and any(s is stmt for s in lst):
                lst[:] = [s for s in lst if s is not stmt]
                if not lst and field == "body" and not isinstance(node, ast.Module):
                    lst.append(ast.Pass())
                return


def _statement_sites(tree):
    """(owner, field, index, statement) of every statement."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            lst = getattr(node, field, None)
            if isinstance(lst, list) and lst and isinstance(lst[0], ast.stmt):
                for i, s in enumerate(lst):
                    yield node, field, i, s


def _checks(node) -> bool:
    """Does `node` hold the REPRODUCED text (part of the file's check, which no transformation may weaken)?"""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and SIGNAL in n.value for n in ast.walk(node))


def _main_guard(node) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'", "'__main__' == __name__")


def _check_tests(tree) -> set[int]:
    """The nodes of the check's conditions: the test of an `if` holding the REPRODUCED text, and of any `if`
    testing the same (the exit status). Replacing a part of them by an operand would weaken the check."""
    ifs = [n for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp))]
    checking = {ast.dump(n.test) for n in ifs if _checks(n) and not _main_guard(n)}
    return {id(x) for n in ifs if ast.dump(n.test) in checking for x in ast.walk(n.test)}


def _branches(tree):
    """An `if` statement replaced by its body or its else; an `x if c else y` by x or y. Not the check's: an
    `if` holding the REPRODUCED text (but `if __name__ == "__main__":`), nor one testing what such an `if` tests
    (`sys.exit(1 if said in str(e) else 0)` is the check's exit status)."""
    ifs = [n for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp))]
    checking = {ast.dump(n.test) for n in ifs if _checks(n) and not _main_guard(n)}
    k = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)) and ast.dump(node.test) in checking:
            k += 1
        elif isinstance(node, (ast.If, ast.IfExp)):
            yield f"if -> its body (line {getattr(node, 'lineno', '?')})", (k, "body")
            if not isinstance(node, ast.If) or node.orelse:
                yield f"if -> its else (line {getattr(node, 'lineno', '?')})", (k, "orelse")
            k += 1


def _apply_branch(tree, site):
    k, which = site
    node = [n for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp))][k]
    if isinstance(node, ast.IfExp):
        new = getattr(node, which)

        class Swap(ast.NodeTransformer):
            def visit_IfExp(self, n):
                return new if n is node else self.generic_visit(n)
        return Swap().visit(tree)
    for owner, field, i, s in _statement_sites(tree):
        if s is node:
            lst = getattr(owner, field)
            lst[i:i + 1] = getattr(node, which)
            if not lst:
                lst[:] = _filled(owner, field, [])
            return tree
    return None


def _inlinable(tree, scopes, f):
    """`statement` (a body with no return), `expression` (one return expression) or None."""
    body = _docless(f.body)
    params = _params(f)
    if params is None or not body or _stored(scopes, f, {n for n, _ in params}):
        return None
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)) for n in ast.walk(f)):
        return None
    if any(isinstance(n, ast.Name) and n.id == f.name for n in ast.walk(f)):
        return None  # recursive
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return "expression"
    returns = [n for n in ast.walk(ast.Module(body, [])) if isinstance(n, ast.Return)]
    nested = [r for node in ast.walk(ast.Module(body, [])) if isinstance(node, (ast.FunctionDef, ast.Lambda))
              for r in ast.walk(node) if isinstance(r, ast.Return)]
    return "statement" if len(returns) == len(nested) else None


def _inline_sites(tree):
    scopes = pysource.Scopes(tree)
    k = 0
    funcs = _functions(tree)
    for name, f in funcs.items():
        kind = _inlinable(tree, scopes, f)
        if kind is None:
            continue
        for _, call in _calls_to(tree, scopes, name, tree):
            if call is not None and _bind(f, call) is not None:
                yield f"inline {name} ({kind})", (name, k)
            k += 1


def _apply_inline(tree, site):
    name, k = site
    scopes = pysource.Scopes(tree)
    f = _functions(tree)[name]
    kind = _inlinable(tree, scopes, f)
    refs = []
    for n, fn in _functions(tree).items():
        if _inlinable(tree, scopes, fn) is not None:
            refs += [(n, call) for _, call in _calls_to(tree, scopes, n, tree)]
    target_name, call = refs[k]
    if target_name != name or call is None:
        return None
    binding = _bind(f, call)
    body = copy.deepcopy(_docless(f.body))
    copied = ast.Module(body, [])
    wrapper = ast.FunctionDef(name=f.name, args=f.args, body=body, decorator_list=[], returns=None)
    scopes_copy = pysource.Scopes(ast.Module([wrapper], []))
    func_copy = scopes_copy.module.node.body[0]
    pysource.substitute(copied.body, scopes_copy, func_copy, binding)
    if kind == "expression":
        value = copied.body[0].value

        class Swap(ast.NodeTransformer):
            def visit_Call(self, n):
                return value if n is call else self.generic_visit(n)
        return Swap().visit(tree)
    for owner, field, i, s in _statement_sites(tree):
        if isinstance(s, ast.Expr) and s.value is call:
            getattr(owner, field)[i:i + 1] = copied.body
            return tree
    return None


def _keyword_sites(tree):
    funcs = _functions(tree)
    guarded = _check_tests(tree)
    k = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) in guarded:
            k += 1
        elif isinstance(node, ast.Call):
            root = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            tile = isinstance(node.func, ast.Attribute) and isinstance(root, ast.Name) and root.id in ("T", "tilelang")
            own = isinstance(node.func, ast.Name) and node.func.id in funcs and _params(funcs[node.func.id]) is not None
            defaults = {n for n, d in (_params(funcs[node.func.id]) if own else []) if d is not None}
            for j, kw in enumerate(node.keywords):
                if kw.arg is not None and (tile or kw.arg in defaults):
                    yield f"drop {kw.arg}= of {ast.unparse(node.func)}", (k, j)
            k += 1


def _apply_keyword(tree, site):
    k, j = site
    call = [n for n in ast.walk(tree) if isinstance(n, ast.Call)][k]
    del call.keywords[j]
    return tree


def _nodes(tree, kinds):
    return [n for n in ast.walk(tree) if isinstance(n, kinds)]


def _replace(tree, old, new):
    """`tree` with the expression node `old` replaced by `new`."""
    class Swap(ast.NodeTransformer):
        def generic_visit(self, node):
            return new if node is old else super().generic_visit(node)
    return Swap().visit(tree)


_FOLDABLE = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call)


def _folded(node):
    """What an expression of literals evaluates to (as a literal node), `getattr(x, "name", default)` as
    `x.name`, `{...}.get(key, default)` of constant keys as the value it picks; else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
            and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
            and node.args[1].value.isidentifier() and not node.keywords:
        return ast.Attribute(node.args[0], node.args[1].value, ast.Load())
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and isinstance(node.func.value, ast.Dict) and len(node.args) in (1, 2) and not node.keywords \
            and _literal(node.args[0]) and all(k is not None and _literal(k) for k in node.func.value.keys):
        table = dict(zip([ast.literal_eval(k) for k in node.func.value.keys], node.func.value.values))
        key = ast.literal_eval(node.args[0])
        return table.get(key, node.args[1] if len(node.args) == 2 else ast.Constant(None))
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare)) \
            and all(_literal(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)):
        try:
            value = eval(compile(ast.Expression(node), "<fold>", "eval"), {"__builtins__": {}})  # literals only
        except Exception:
            return None
        if isinstance(value, (bool, int, float, str)) and len(repr(value)) <= 40:
            return ast.Constant(value)
    return None


def _fold_sites(tree):
    """An expression of literals folded, `getattr(x, "name", ...)` written `x.name`, a dict literal's .get
    with a constant key replaced by the value it picks."""
    for k, node in enumerate(_nodes(tree, _FOLDABLE)):
        new = _folded(node)
        if new is not None:
            yield f"fold {ast.unparse(node)[:60]} -> {ast.unparse(new)[:40]}", k


def _apply_fold(tree, k):
    node = _nodes(tree, _FOLDABLE)[k]
    return _replace(tree, node, _folded(node))


def _split_sites(tree):
    """`a, b = (x, y)` written as `a = x` and `b = y` (then each can go on its own); with a starred value
    (`a, b, c, d = (x, *g)`), the names before it (`a = x`, then `b, c, d = (*g,)`)."""
    for k, node in enumerate(_nodes(tree, ast.Assign)):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple):
            names, values = node.targets[0].elts, node.value.elts
            read = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            plain = next((i for i, v in enumerate(values) if isinstance(v, ast.Starred)), len(values))
            whole = plain == len(values) == len(names)
            if all(isinstance(n, ast.Name) and n.id not in read for n in names) and (whole or 0 < plain < len(names)):
                yield f"split {ast.unparse(node.targets[0])[:60]} = (...)", k


def _apply_split(tree, k):
    node = _nodes(tree, ast.Assign)[k]
    names, values = node.targets[0].elts, node.value.elts
    plain = next((i for i, v in enumerate(values) if isinstance(v, ast.Starred)), len(values))
    parts = [ast.Assign([ast.Name(n.id, ast.Store())], v) for n, v in zip(names[:plain], values[:plain])]
    if plain < len(values):
        parts.append(ast.Assign([ast.Tuple(names[plain:], ast.Store())], ast.Tuple(values[plain:], ast.Load())))
    for owner, field, i, s in _statement_sites(tree):
        if s is node:
            getattr(owner, field)[i:i + 1] = parts
            return tree
    return None


def _fold_assign_sites(tree):
    """`x = a` followed by `x = b(x)` (or `return x`) merged into `x = b(a)` (or `return a`)."""
    k = 0
    for owner, field, i, s in _statement_sites(tree):
        nxt = getattr(owner, field)[i + 1] if i + 1 < len(getattr(owner, field)) else None
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and nxt is not None:
            x = s.targets[0].id
            merged = isinstance(nxt, ast.Return) and isinstance(nxt.value, ast.Name) and nxt.value.id == x \
                or isinstance(nxt, ast.Assign) and len(nxt.targets) == 1 and isinstance(nxt.targets[0], ast.Name) \
                and nxt.targets[0].id == x
            if merged and not any(isinstance(n, pysource._SCOPES) for n in ast.walk(nxt.value)):
                yield f"merge {x} = ... into the next statement", k
        k += 1


def _apply_fold_assign(tree, k):
    owner, field, i, s = list(_statement_sites(tree))[k]
    body = getattr(owner, field)
    nxt, x = body[i + 1], s.targets[0].id

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            return copy.deepcopy(s.value) if node.id == x and isinstance(node.ctx, ast.Load) else node
    nxt.value = Sub().visit(nxt.value)
    del body[i]
    return tree


def _builder_sites(tree):
    """A call to a function of the file whose body ends in `return value` (a builder: statements, then what they
    made), in a simple statement: its statements put before that statement, the call replaced by the value."""
    scopes = pysource.Scopes(tree)
    for name, f in _functions(tree).items():
        body = _docless(f.body)
        returns = [n for n in ast.walk(f) if isinstance(n, ast.Return)]
        nested = {id(r) for node in ast.walk(f) if node is not f and isinstance(node, (ast.FunctionDef, ast.Lambda))
                  for r in ast.walk(node) if isinstance(r, ast.Return)}
        simple = len(body) > 1 and isinstance(body[-1], ast.Return) and body[-1].value is not None \
            and len([r for r in returns if id(r) not in nested]) == 1 and _params(f) is not None \
            and not _stored(scopes, f, {n for n, _ in _params(f)})
        for k, (_, call) in enumerate(_calls_to(tree, scopes, name, tree)):
            if simple and call is not None and _bind(f, call) is not None:
                yield f"unwrap builder {name}", (name, k)


def _apply_builder(tree, site):
    name, k = site
    scopes = pysource.Scopes(tree)
    f = _functions(tree)[name]
    call = [c for _, c in _calls_to(tree, scopes, name, tree)][k]
    body = copy.deepcopy(_docless(f.body))
    wrapper = ast.FunctionDef(name=f.name, args=f.args, body=body, decorator_list=[], returns=None)
    inner = pysource.Scopes(ast.Module([wrapper], []))
    pysource.substitute(body, inner, wrapper, _bind(f, call))
    value = body.pop().value
    for owner, field, i, s in _statement_sites(tree):
        if isinstance(s, (ast.Expr, ast.Assign, ast.AugAssign, ast.Return)) and any(n is call for n in ast.walk(s)):
            _replace(s, call, value)
            getattr(owner, field)[i:i] = body
            return tree
    return None


def _hoist_sites(tree):
    """An expression replaced by one of its operands or arguments (`T.max(0, x)` by `x`, `a or b` by `b`): not
    the check's (nothing holding the REPRODUCED text, nothing in the check's conditions)."""
    guarded = _check_tests(tree)
    for k, node in enumerate(_nodes(tree, (ast.Call, ast.BinOp, ast.BoolOp, ast.UnaryOp))):
        if _checks(node) or id(node) in guarded:
            continue
        kids = _operands(node)
        for j, kid in enumerate(kids):
            if not isinstance(kid, ast.Starred):
                yield f"{ast.unparse(node)[:50]} -> {ast.unparse(kid)[:40]}", (k, j)


def _operands(node):
    if isinstance(node, ast.Call):
        return node.args + [kw.value for kw in node.keywords]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.BoolOp):
        return node.values
    return [node.operand]


def _apply_hoist(tree, site):
    k, j = site
    node = _nodes(tree, (ast.Call, ast.BinOp, ast.BoolOp, ast.UnaryOp))[k]
    return _replace(tree, node, _operands(node)[j])


# Transformations, the most unlocking first: (sites of a tree, apply(tree copy, site) -> tree or None).
TRANSFORMS = ((_specialize, _apply_specialize), (_propagate, _apply_propagate), (_fold_sites, _apply_fold),
              (_split_sites, _apply_split), (_fold_assign_sites, _apply_fold_assign), (_branches, _apply_branch),
              (_inline_sites, _apply_inline), (_builder_sites, _apply_builder), (_unused, _apply_unused),
              (_keyword_sites, _apply_keyword), (_hoist_sites, _apply_hoist))


# The transformations offering a site nearly everywhere (every operand): tried once the others are done.
LATE = (_hoist_sites,)


def simplify(tree: ast.Module, test, jobs: int = 1, budget: list | None = None, late: bool = False) \
        -> tuple[ast.Module, int]:
    """Each transformation tried at each site in turn, `jobs` at once; a change kept when the result compiles
    and reproduces (`late`: the LATE ones only, else the others). Returns the tree and how many were kept."""
    budget = budget if budget is not None else [MAX_CHANGES]
    kept = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for sites_of, apply in TRANSFORMS:
            if (sites_of in LATE) != late:
                continue
            start = 0
            while budget[0] > 0 and not spent(test):
                sites = list(sites_of(tree))[start:start + jobs]
                if not sites:
                    break
                candidates = []
                for _, site in sites:
                    try:
                        new = apply(copy.deepcopy(tree), site)
                        candidates.append((new, text_of(new)) if new is not None else None)
                    except Exception:  # a transformation that does not fit this site: not a candidate
                        candidates.append(None)
                outcomes = list(pool.map(lambda c: c is not None and test(c[1]), candidates))
                won = next((i for i, ok in enumerate(outcomes) if ok), None)
                if won is None:
                    start += len(sites)
                    continue
                tree = ast.parse(candidates[won][1])
                start += won  # the site changed; those before it were tried and failed
                kept += 1
                budget[0] -= 1
    return tree, kept
