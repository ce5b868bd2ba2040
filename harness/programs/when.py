"""when: an `if` around 1 to 6 statements whose condition every thread of a block agrees on: the block index
(`at: "bx"`) or, inside a loop, the trip (`at: "k"`) is the first (`test: "first"`), a later one, an even one,
or (blocks only) not the last. A barrier inside it is then one every thread reaches or none does, so the body
may hold anything a block runs but a loop, a stream or another `when`. What the body defines is not defined
after it (it may not run)."""
from dataclasses import dataclass, replace

from harness.programs import model
from harness.programs.model import Scope, Statement, fields, need


@dataclass(frozen=True, kw_only=True)
class When(Statement):
    op = "when"
    at: str
    test: str
    body: tuple


STATEMENT = When

TESTS = ("first", "later", "even", "not_last")
TRIP_TESTS = TESTS[:3]   # a trip does not know its loop's count


def check(s, p, scope):
    fields(s, at=("bx", "k"), test=TESTS, body=tuple)
    need(not scope.in_when, "no when inside a when")
    need(s.at != "k" or scope.in_loop, "at 'k' only inside a loop")
    need(s.at == "bx" or s.test in TRIP_TESTS, "a trip is tested first, later or even")
    need(1 <= len(s.body) <= 6, "a when's body holds 1 to 6 statements")
    inner = Scope(scope.threads, scope.defined, in_loop=scope.in_loop, in_when=True)
    model.check_body(p, s.body, inner)


def reads(s):
    return []


def writes(s):
    return []


def full(s, p):
    return False


def condition(s, p, lang) -> str:
    v = s.at
    last = f"T.ceildiv(n, {p.block}) - 1" if lang == "tilelang" else f"-(-n // {p.block}) - 1"
    return {"first": f"{v} == 0", "later": f"{v} > 0", "even": f"{v} % 2 == 0", "not_last": f"{v} < {last}"}[s.test]


def tilelang(s, p, ind):
    from harness.programs.emit import body_lines
    return [f"{ind}if {condition(s, p, 'tilelang')}:"] + body_lines(s.body, p, ind + "    ", "tilelang")


def torch(s, p, ind):
    from harness.programs.emit import body_lines
    return [f"{ind}if {condition(s, p, 'torch')}:"] + body_lines(s.body, p, ind + "    ", "torch")


# ------------------------------------------------------------------------------------------- drawing
PLACES = {"top": 1, "trip": 1}


def draw(c, b, at):
    """1 to 3 statements under a condition every thread of the block agrees on: the block, or the trip."""
    test = c.one(TESTS if at == "bx" else TRIP_TESTS)
    outer_defined = set(b.defined)
    inner = b.nested(c, at, "guarded", c.between((1, 3)))
    b.defined = outer_defined   # what the body defines may not be
    if inner:
        b.emit([When(at=at, test=test, body=inner)])


def wrap(c, statements, at) -> When:
    """`statements` (1 to 3 of a body at `at`) under a drawn condition."""
    return When(at=at, test=c.one(TESTS if at == "bx" else TRIP_TESTS), body=tuple(statements))


def shrink(s, where):
    """Unwrapped: its statements take its stage in a scheduled loop."""
    return [(f"unwrap when {where}", tuple(replace(x, stage=s.stage) if s.stage is not None else x for x in s.body))]


def access(s, p):
    """None of its own: its body's statements make them."""
    return []
