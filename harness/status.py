"""What a replay says of a recorded bug, and the exit status `git bisect run` reads from it.

One name per answer (`Status`), used by repro, bisect, matrix and minimize; the statuses of `git bisect run`
(0 good, 1 bad, 125 skip) are declared here once. A failure with another signature is bad to a bisect (the
program still fails there) but another bug to a release matrix: `FAILS_DIFFERENTLY` says so without anyone
reading the verdict's words.
"""
from __future__ import annotations

from enum import Enum

GOOD, BAD, SKIP = 0, 1, 125
WORDS = {GOOD: "good", BAD: "bad", SKIP: "skip"}


class Status(Enum):
    NOT_REPRODUCED = "not reproduced"
    REPRODUCED = "reproduced"
    FAILS_DIFFERENTLY = "fails differently"
    CANNOT_TEST = "cannot test"

    @property
    def exit(self) -> int:
        """The exit status of `harness repro`, as `git bisect run` reads it."""
        return _EXIT[self]

    def step(self, regress: str = "failure") -> int:
        """A bisect step's status: with `regress` "signature" only the recorded bug is bad, and a failure with
        another signature good (cargo-bisect-rustc's --regress: another bug hides this one on one side)."""
        if self is Status.FAILS_DIFFERENTLY and regress == "signature":
            return GOOD
        return self.exit


REGRESS = ("failure", "signature")  # what a bisect step counts as bad: any failure, or the recorded one only
_EXIT = {Status.NOT_REPRODUCED: GOOD, Status.REPRODUCED: BAD, Status.FAILS_DIFFERENTLY: BAD, Status.CANNOT_TEST: SKIP}
