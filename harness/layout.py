"""Where the sequence and head axes sit: written once for kernels and once for host tensors.

A layout names the order of a [batch, heads, seq, dim] tensor's axes in memory: "bhsd" (canonical)
or "bshd"; "thd" packs the sequences of a batch one after another ([total tokens, heads, dim],
varlen), so its batch and row arguments are absolute token offsets and its canonical form is one
batch of all tokens, [1, heads, total, dim]. Kernels call `shape`, `rows` and `at` while TileLang
traces them (plain Python indexing on a buffer, so every release parses it); the host side calls
`to_canonical` / `from_canonical`. A new layout is one more case in each function here.
"""
from __future__ import annotations

# Bytes: the widest vector copy of a mask or bias row, and a padded row's pitch (the masked families).
ROW_ALIGN = 16


def shape(layout, batch, seq, heads, dim) -> list:
    """`seq` is the total token count for "thd" (which has no batch axis)."""
    return {"bshd": [batch, seq, heads, dim], "thd": [seq, heads, dim]}.get(layout, [batch, heads, seq, dim])


def rows(buf, layout, b, h, start, n):
    """The [n, dim] tile of rows start..start+n of head h in batch b (a buffer region)."""
    if layout == "thd":
        return buf[start:start + n, h, :]
    return buf[b, start:start + n, h, :] if layout == "bshd" else buf[b, h, start:start + n, :]


def at(buf, layout, b, h, s, d):
    """One element."""
    if layout == "thd":
        return buf[s, h, d]
    return buf[b, s, h, d] if layout == "bshd" else buf[b, h, s, d]


def head_axis(layout) -> int:
    return 1 if layout in ("bhsd", "thd") else 2


def to_canonical(x, layout):
    """A host tensor in `layout` -> [batch, heads, seq, dim] (a view)."""
    if layout == "thd":
        return x.transpose(0, 1).unsqueeze(0)
    return x.transpose(1, 2) if layout == "bshd" else x


def from_canonical(x, layout):
    """[batch, heads, seq, dim] -> a contiguous host tensor in `layout`."""
    if layout == "thd":
        return x.squeeze(0).transpose(0, 1).contiguous()
    return (x.transpose(1, 2) if layout == "bshd" else x).contiguous()
