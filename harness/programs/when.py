"""when: an `if` around 1 to 6 statements whose condition every thread of a block agrees on: the block index
(`at: "bx"`) or, inside a loop, the trip (`at: "k"`) is the first (`test: "first"`), a later one, an even one,
or (blocks only) not the last. A barrier inside it is then one every thread reaches or none does, so the body
may hold anything a block runs but a loop, a stream or another `when`. What the body defines is not defined
after it (it may not run)."""
from harness.programs import model
from harness.programs.model import Scope, fields, need

TESTS = ("first", "later", "even", "not_last")
TRIP_TESTS = TESTS[:3]   # a trip does not know its loop's count


def check(s, p, scope):
    fields(s, at=("bx", "k"), test=TESTS, body=tuple)
    need(not scope.in_when, "no when inside a when")
    need(s["at"] != "k" or scope.in_loop, "at 'k' only inside a loop")
    need(s["at"] == "bx" or s["test"] in TRIP_TESTS, "a trip is tested first, later or even")
    need(1 <= len(s["body"]) <= 6, "a when's body holds 1 to 6 statements")
    inner = Scope(scope.threads, scope.defined, in_loop=scope.in_loop, in_when=True)
    model.check_body(p, s["body"], inner)


def reads(s):
    return []


def writes(s):
    return []


def full(s, p):
    return False


def condition(s, p, lang) -> str:
    v = s["at"]
    last = f"T.ceildiv(n, {p.block}) - 1" if lang == "tilelang" else f"-(-n // {p.block}) - 1"
    return {"first": f"{v} == 0", "later": f"{v} > 0", "even": f"{v} % 2 == 0", "not_last": f"{v} < {last}"}[s["test"]]


def tilelang(s, p, ind):
    from harness.programs.emit import body_lines
    return [f"{ind}if {condition(s, p, 'tilelang')}:"] + body_lines(s["body"], p, ind + "    ", "tilelang")


def torch(s, p, ind):
    from harness.programs.emit import body_lines
    return [f"{ind}if {condition(s, p, 'torch')}:"] + body_lines(s["body"], p, ind + "    ", "torch")


def access(s, p):
    """None of its own: its body's statements make them."""
    return []
