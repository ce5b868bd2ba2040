"""overrun: a program made invalid on purpose, a region that reaches past its buffer's end. TileLang should refuse
it at compile time; when it compiles one, the verdict is ACCEPTS_INVALID (harness.oracle.invalid), and when it
refuses one (any compile error) REFUSES_INVALID, which is right.

    fill   T.fill(X[r:r + h, c:c + w], v)   of a shared buffer, the region past X's end (or larger than X)
    copy   T.copy(S, X[r:r + h, c:c + w])   a local tile into a region of another shared buffer, past its end
    store  T.copy(S, G[bx * block + r:... + h, c:c + w])   a local tile into an n-row global, past its last column

The statement says so itself (`invalid: true`), and `check` accepts it only where the region does reach past
the end, so a program loaded from a file says whether it is invalid (`reason`). An invalid program has no
meaning; its torch text does the region's in-bounds part (Python's slices stop at the end), which no verdict
reads: it keeps the interpreter total over what the generator draws. What an overrun writes is not defined
after it: its buffer is the program's own, and no rule relies on it.
"""
from dataclasses import dataclass

from harness.programs.model import Statement, base, fields, local, need, walk


@dataclass(frozen=True, kw_only=True)
class Overrun(Statement):
    op = "overrun"
    form: str
    dst: str
    region: list       # [row, col, rows, cols]
    invalid: bool
    src: str | None = None                 # copy and store
    value: int | float | None = None       # fill


STATEMENT = Overrun

FORMS = ("fill", "copy", "store")
VALUES = (1, -1, 2)
PLACES = {"top": 1}


def check(s, p, scope):
    need(s.form in FORMS, f"form is one of {list(FORMS)}")
    own = {"value": VALUES} if s.form == "fill" else {"src": str}
    fields(s, form=FORMS, dst=str, region=list, invalid=(True,), **own)
    region = s.region
    need(len(region) == 4 and all(type(x) is int for x in region), f"region is [row, col, rows, cols], got {region!r}")
    r, c, h, w = region
    if s.form == "store":
        g, t = p.buffer(s.dst), local(p, s.src, 2)
        need(g.scope == "global" and g.rows == "n", f"{g.name} must be an n-row global")
        need((h, w) == t.shape, f"the region is {t.name}'s shape {list(t.shape)}")
        need(0 <= r and r + h <= p.block, "within the block's own rows (row + rows <= block)")
        need(0 <= c < g.shape[1] < c + w, f"columns {c}..{c + w} start in {g.name} and end past its {g.shape[1]}")
        return
    d = local(p, s.dst, 2, scopes=("shared",))
    if s.form == "copy":
        t = local(p, s.src, 2)
        need(t.name != d.name and (h, w) == t.shape, f"the region is {t.name}'s shape {list(t.shape)}")
    need(h >= 1 and w >= 1 and 0 <= r < d.shape[0] and 0 <= c < d.shape[1], f"region {region} starts inside {d.name}")
    need(r + h > d.shape[0] or c + w > d.shape[1], f"region {region} lies inside {d.name}'s {list(d.shape)}: not an overrun")


def reason(p) -> str:
    """Why `p` is invalid ("" when it is not): its first overrun, in words."""
    for s in walk(p.body):
        if s.op == "overrun":
            r, c, h, w = s.region
            return f"{s.form} of {s.dst}[{r}:{r + h}, {c}:{c + w}] reaches past {list(p.buffer(s.dst).shape)}"
    return ""


def without(p):
    """`p` without its overruns (and buffers only they name), or None if that breaks a rule (no output left, say)."""
    import dataclasses

    from harness.programs.model import ProgramError, check, kind

    def keep(body):
        return tuple(dataclasses.replace(s, body=keep(s.body)) if hasattr(s, "body") else s for s in body if s.op != "overrun")
    body = keep(p.body)
    named = {n for s in walk(body) for n in kind(s).reads(s) + kind(s).writes(s)}
    try:
        return check(dataclasses.replace(p, body=body, buffers=tuple(b for b in p.buffers if b.name in named)))
    except ProgramError:
        return None


def reads(s):
    return [s.src] if s.src is not None else []


def writes(s):
    return [s.dst]


def full(s, p):
    return False


def _slices(s, p) -> str:
    r, c, h, w = s.region
    row = f"{base('bx', p.block)} + {r}" if s.form == "store" else str(r)
    return f"{row}:{row} + {h}, {c}:{c + w}"


def tilelang(s, p, ind):
    target = f"{s.dst}[{_slices(s, p)}]"
    if s.form == "fill":
        return [f"{ind}T.fill({target}, {float(s.value)!r})"]
    return [f"{ind}T.copy({s.src}, {target})"]


def torch(s, p, ind):
    view = f"{s.dst}[{_slices(s, p)}]"   # the in-bounds part: a global's rows past n, too, are not there
    if s.form == "fill":
        return [f"{ind}{view}.fill_({float(s.value)!r})"]
    return [f'{ind}{view} = rnd({s.src}[:{view}.shape[0], :{view}.shape[1]], "{p.buffer(s.dst).dtype}")']


def draw(c, b, at):
    """An overrun of a defined local tile into a shared buffer or a new global, or a fill past a shared one's end."""
    tiles = [n for n in b.locals() if len(b.buffers[n].shape) == 2 and b.buffers[n].shape[0] <= b.block]
    form = c.one(FORMS)
    if form == "fill" or not tiles:
        shared = [n for n in b.locals(scope="shared", defined=False) if len(b.buffers[n].shape) == 2]
        if not shared:
            return
        dst = c.one(shared)
        h, w = b.buffers[dst].shape
        if h > 1 and c.flip():  # the buffer's own shape, moved down: its elements spread over the threads as X's do
            r, col, rows, cols = c.between((1, h - 1)), 0, h, w
        else:
            r, col = c.between((0, h - 1)), c.between((0, w - 1))
            rows, cols = c.between((1, h + 8)), c.between((1, w + 8))
            if r + rows <= h and col + cols <= w:
                rows = h - r + c.between((1, 8))
        form = "fill"
    else:
        src = c.one(tiles)
        rows, cols = b.buffers[src].shape
        if form == "store":
            if cols < 2:
                return
            dst = b.new("global", b.buffers[src].dtype, ("n", cols - c.between((1, cols - 1))))
            r, col = c.between((0, b.block - rows)), 0
        else:
            shared = [n for n in b.locals(scope="shared", defined=False) if n != src and len(b.buffers[n].shape) == 2]
            if not shared:
                return
            dst = c.one(shared)
            h, w = b.buffers[dst].shape
            r, col = c.between((0, h - 1)), c.between((0, w - 1))
            if r + rows <= h and col + cols <= w:
                return
    own = {"value": c.one(VALUES)} if form == "fill" else {"src": src}
    b.emit([Overrun(form=form, dst=dst, region=[r, col, rows, cols], invalid=True, **own)])



def access(s, p):
    """The region written (past the buffer's end: the program is invalid on purpose), the source read whole."""
    from harness.programs.access import region, whole
    r, col, rows, cols = s.region
    return [whole(p, n, "read") for n in reads(s)] + [region(p, s.dst, "write", (r, col), (rows, cols))]
