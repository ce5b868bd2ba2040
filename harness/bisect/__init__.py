"""Bisect a reproducer across TileLang releases or commits: which one changed its behaviour.

One job per module:
- `search`: the search alone, a pure function of an ordered list and a test callback (no I/O);
- `environments`: one install directory per release or built commit, and a replay or a campaign run there;
- `inside`: what runs there, in a subprocess with that release on its path: one typed request, one JSON answer;
- `steps`: one reproducer's bisect: its steps kept in a state file as they end, so an interrupted bisect
  resumes there, and its ready-to-paste report;
- `matrix`: every reproducer, or a campaign's cases, on every release listed.

Every step's status follows `git bisect run`: 0 good, 1 bad, 125 skip (the release does not install or
import, or cannot test the case), as harness.status declares them. Here: the errors the modules share.
"""
from __future__ import annotations


class BisectError(ValueError):
    """Bad input or a bisect that cannot go on; the message is one line."""


class Pending(BisectError):
    """The next step cannot run on this machine: its release is not at hand (no index, no wheel),
    or the reproducer needs a GPU. The state file keeps every step so far, so the same command
    continues wherever that step can run (one release per machine, say)."""
