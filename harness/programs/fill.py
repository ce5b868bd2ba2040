"""fill: T.fill of a whole shared/fragment buffer with a constant (T.clear for 0)."""
from harness.programs.model import fields, local, need

VALUES = (0, 1, -1, 2, -3, 0.5)


def check(s, p, scope):
    fields(s, dst=str, value=(0, 1, -1, 2, -3, 0.5))
    local(p, s["dst"])
    need(type(s["value"]) in (int, float), "value must be a number")


def reads(s):
    return []


def writes(s):
    return [s["dst"]]


def full(s, p):
    return True


def tilelang(s, p, ind):
    return [f"{ind}T.clear({s['dst']})" if s["value"] == 0 else f"{ind}T.fill({s['dst']}, {float(s['value'])!r})"]


def torch(s, p, ind):
    return [f"{ind}{s['dst']}.fill_({float(s['value'])!r})"]
