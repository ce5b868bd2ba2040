"""Window masking shared by the attention kernels: Python helpers called from @T.prim_func bodies.

Why helpers: in older TileLang releases (0.1.6.post2) an assignment under a Python-level `if`
inside a prim_func is scoped to that `if` and silently lost after it, so a bound written as
`lo = 0; if left >= 0: lo = ...` stays 0. Each helper returns one expression instead.
Semantics (FlashAttention, bottom-right aligned): with shift = seq_k - seq_q, query i sees key j
iff i + shift - left <= j <= i + shift + right; a bound of -1 is unbounded.
"""
import tilelang.language as T


def visible(value, fill, qi, kj, shift, seq_k, left, right):
    """`value` where query qi sees key kj (kj < seq_k and inside the window), else `fill`."""
    value = T.if_then_else(kj < seq_k, value, fill)
    if left >= 0:
        value = T.if_then_else(kj >= qi + shift - left, value, fill)
    if right >= 0:
        value = T.if_then_else(kj <= qi + shift + right, value, fill)
    return value


def first_key_block(q0, shift, left, block_n):
    """The first key block that a row of the query block starting at q0 may see."""
    return T.max(0, T.floordiv(q0 + shift - left, block_n)) if left >= 0 else 0


def end_key_block(q0, shift, right, block_m, block_n, seq_k):
    """One past the last key block that a row of the query block starting at q0 may see."""
    end = T.ceildiv(seq_k, block_n)
    return T.max(0, T.min(end, T.ceildiv(q0 + block_m + shift + right, block_n))) if right >= 0 else end


def first_query_block(k0, shift, right, block_m):
    """The first query block with a row that may see a key of the block starting at k0."""
    return T.max(0, T.floordiv(k0 - shift - right, block_m)) if right >= 0 else 0


def end_query_block(k0, shift, left, block_n, block_m, seq_q):
    """One past the last query block with a row that may see a key of the block starting at k0."""
    end = T.ceildiv(seq_q, block_m)
    return T.max(0, T.min(end, T.ceildiv(k0 + block_n - shift + left, block_m))) if left >= 0 else end
