"""loop: T.serial, T.Pipelined (num_stages 0 to 3) or T.unroll over `k`, a constant trip count (0 and 1 included)
or the symbolic T.ceildiv(n, block) or one fewer (0 when n fits one block); its body (no loop inside) may index
global tiles at row k * block. What the body defines is defined after the loop only if it surely runs (a constant
trip count of 1 or more)."""
from harness.programs import model
from harness.programs.model import Scope, fields, need

KINDS = ("serial", "pipelined", "unroll")
MAX_TRIPS = 8


def check(s, p, scope):
    fields(s, kind=KINDS, trips=(0, 1, 2, 3, 4, 5, 8) + model.SYMBOLIC_TRIPS, stages=(0, 1, 2, 3), body=tuple)
    need(not scope.in_loop, "no loop inside a loop")
    need(not scope.in_when, "no loop inside a when")
    need(s["kind"] == "pipelined" or s["stages"] == 0, "only a pipelined loop has stages")
    need(s["kind"] != "unroll" or s["trips"] not in model.SYMBOLIC_TRIPS, "an unrolled loop has a constant trip count")
    need(1 <= len(s["body"]) <= 12, "a loop's body holds 1 to 12 statements")
    inner = Scope(scope.threads, scope.defined, in_loop=True)
    model.check_body(p, s["body"], inner)
    if model.surely_runs(s["trips"]):
        scope.defined |= inner.defined


def reads(s):
    return []


def writes(s):
    return []


def full(s, p):
    return False


def tilelang(s, p, ind):
    from harness.programs.emit import body_lines
    count = model.trips(s["trips"], p.block, "tilelang")
    head = {"serial": f"T.serial({count})", "unroll": f"T.unroll({count})",
            "pipelined": f"T.Pipelined({count}, num_stages={s['stages']})"}[s["kind"]]
    return [f"{ind}for k in {head}:"] + body_lines(s["body"], p, ind + "    ", "tilelang")


def torch(s, p, ind):
    from harness.programs.emit import body_lines
    count = model.trips(s["trips"], p.block, "torch")
    return [f"{ind}for k in range({count}):"] + body_lines(s["body"], p, ind + "    ", "torch")
