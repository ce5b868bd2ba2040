"""Where the sequence and head axes sit: written once for kernels and once for host tensors.

A layout names the order of a [batch, heads, seq, dim] tensor's axes in memory: "bhsd" (canonical)
or "bshd". Kernels call `shape`, `rows` and `at` while TileLang traces them (plain Python indexing
on a buffer, so every release parses it); the host side calls `to_canonical` / `from_canonical`.
A new layout (e.g. packed varlen tokens) is one more case in each function here.
"""
from __future__ import annotations


def shape(layout, batch, seq, heads, dim) -> list:
    return [batch, seq, heads, dim] if layout == "bshd" else [batch, heads, seq, dim]


def rows(buf, layout, b, h, start, n):
    """The [n, dim] tile of rows start..start+n of head h in batch b (a buffer region)."""
    return buf[b, start:start + n, h, :] if layout == "bshd" else buf[b, h, start:start + n, :]


def at(buf, layout, b, h, s, d):
    """One element."""
    return buf[b, s, h, d] if layout == "bshd" else buf[b, h, s, d]


def head_axis(layout) -> int:
    return 2 if layout == "bshd" else 1


def to_canonical(x, layout):
    """A host tensor in `layout` -> [batch, heads, seq, dim] (a view)."""
    return x.transpose(1, 2) if layout == "bshd" else x


def from_canonical(x, layout):
    """[batch, heads, seq, dim] -> a contiguous host tensor in `layout`."""
    return (x.transpose(1, 2) if layout == "bshd" else x).contiguous()
