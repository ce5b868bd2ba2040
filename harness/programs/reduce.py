"""reduce: max, min, sum, abs-sum or abs-max of a 2-D fragment over one dimension into a 1-D fragment (T.reduce_*),
clearing it first or folding into what it holds (abs-sum and abs-max always clear: TileLang's reduce_abssum takes no
clear, and whether a folded abs-max takes the absolute value of what the destination held is not documented)."""
from harness.programs.model import fields, local, need

KINDS = ("max", "min", "sum", "abssum", "absmax")
CLEARING = ("abssum", "absmax")  # always clear


def check(s, p, scope):
    fields(s, src=str, dst=str, kind=KINDS, dim=(0, 1), clear=bool)
    src, dst = local(p, s["src"], 2, ("fragment",)), local(p, s["dst"], 1, ("fragment",))
    need(src.dtype == dst.dtype == "float32", "a reduce runs over float32 fragments")
    need(dst.shape[0] == src.shape[1 - s["dim"]], f"{dst.name} must hold {src.shape[1 - s['dim']]} values")
    need(s["clear"] or s["kind"] not in CLEARING, f"{s['kind']} always clears")
    # TileLang's all-reduce is an XOR butterfly over a power-of-two number of threads (its own check says so).
    need(scope.threads & (scope.threads - 1) == 0, f"a reduce runs with a power-of-two thread count, not {scope.threads}")


def reads(s):
    return [s["src"]] + ([] if s["clear"] else [s["dst"]])


def writes(s):
    return [s["dst"]]


def full(s, p):
    return True


def tilelang(s, p, ind):
    clear = "" if s["kind"] == "abssum" else f", clear={s['clear']}"
    return [f"{ind}T.reduce_{s['kind']}({s['src']}, {s['dst']}, dim={s['dim']}{clear})"]


def torch(s, p, ind):
    x = {"max": f"{s['src']}.amax(dim={s['dim']})", "min": f"{s['src']}.amin(dim={s['dim']})",
         "sum": f"{s['src']}.sum(dim={s['dim']})", "abssum": f"{s['src']}.abs().sum(dim={s['dim']})",
         "absmax": f"{s['src']}.abs().amax(dim={s['dim']})"}[s["kind"]]
    if not s["clear"]:
        fold = {"max": f"torch.maximum({s['dst']}, {x})", "min": f"torch.minimum({s['dst']}, {x})"}
        x = fold.get(s["kind"], f"{s['dst']} + {x}")
    return [f'{ind}{s["dst"]}[:] = rnd({x}, "float32")']


def access(s, p):
    """The source read whole; the destination read (when folded into) and written whole."""
    from harness.programs.access import whole
    folded = [] if s["clear"] else [whole(p, s["dst"], "read")]
    return [whole(p, s["src"], "read"), *folded, whole(p, s["dst"], "write")]
