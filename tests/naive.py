"""Shared by the loop-by-loop references in the tests: which keys query i sees, written out
plainly (FlashAttention bottom-right alignment, -1 = unbounded), independent of harness code."""


def visible_keys(i, seqlen_q, seqlen_k, left, right):
    shift = seqlen_k - seqlen_q
    return [j for j in range(seqlen_k)
            if (left < 0 or j >= i + shift - left) and (right < 0 or j <= i + shift + right)]
