"""A campaign's corpus of generated programs, and the rounds that feed it back into the campaign's cases.

A program whose compiled CUDA shows a code feature (harness.cuda_features, a result's `features`), or a pair of
features, that no program before it in the campaign showed is kept: its JSON in <out>/corpus/, one file per program
named by a hash of its text. Later cases mutate corpus programs (harness.programs.mutate) besides the drawn ones:
a mutant runs at the lengths, input seeds and knobs of its parent's cases.

The campaign runs its cases in rounds (`Feedback.run`). After each round its results are offered to the corpus in the
order of its cases, not of their completion, and the next round's mutants come from a random.Random seeded by the
campaign's seed and the round's number: a seed gives the same corpus and the same mutants wherever the compiler gives
the same code. Mutants are appended to cases.jsonl before they run, as drawn cases are written before theirs; a
resumed campaign offers the results it holds first, and draws its later mutants anew.
"""
from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Callable
from pathlib import Path

from harness.case import Case
from harness.pool import Workers
from harness.programs import generate, interpret, model, mutate
from harness.result import Result

SHARE = 1 / 3          # of a campaign's program cases: mutants
ROUND_PROGRAMS = 4     # programs per worker in a round (fewer rounds: less waiting for a round's last compile)


class Corpus:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.features: set[str] = set()
        self.pairs: set[tuple[str, str]] = set()
        self.entries: dict[model.Program, list[Case]] = {}  # kept program -> its cases run so far, in order

    def offer(self, result: Result) -> bool:
        """Take in a program case's result; True if its program joins the corpus (a feature or pair not seen yet)."""
        program = result.case.program
        if program is None or result.features is None:
            return False
        if program in self.entries:
            self.entries[program].append(result.case)
            return False
        features = set(result.features)
        pairs = {(a, b) for a in features for b in features if a < b}
        new = bool(features - self.features or pairs - self.pairs)
        self.features |= features
        self.pairs |= pairs
        if new:
            self.entries[program] = [result.case]
            self.folder.mkdir(parents=True, exist_ok=True)
            text = model.to_json(program)
            (self.folder / f"{hashlib.sha1(text.encode()).hexdigest()[:12]}.json").write_text(text + "\n")
        return new

    def mutants(self, rng: random.Random, count: int, per_kernel: int, taken: set) -> list[Case]:
        """Up to `count` new cases (ids not in `taken`, which they join): mutants of corpus programs, each at up to
        `per_kernel` of its parent's cases (those with the knobs of the first)."""
        out, parents = [], list(self.entries)
        for _ in range(3 * count):  # a parent may have no valid mutant, or one already run
            if len(out) >= count or not parents:
                break
            parent = rng.choice(parents)
            child = mutate.mutate(parent, rng, generate.insert)
            if child is None:
                continue
            cases = self.entries[parent]
            for c in [c for c in cases if c.knobs == cases[0].knobs][:per_kernel]:
                if interpret.out_of_range(child, c.seqlen_q, c.seed):  # its values outgrew the bounds of a drawn one
                    continue
                m = c.replace(program=child).validate()
                if m.id not in taken and len(out) < count:
                    taken.add(m.id)
                    out.append(m)
        return out


class Feedback:
    """Runs a campaign's cases in rounds, adding mutants of its corpus between them until `budget` mutant cases ran
    (SHARE of the campaign's cases; `share` 0: one round of the drawn cases, nothing added)."""

    def __init__(self, corpus: Corpus, share: float, budget: int, seed: int, per_kernel: int, workers: int,
                 taken: set, append: Callable[[list[Case]], None]):
        self.corpus, self.share, self.left, self.seed = corpus, share, budget, seed
        self.per_kernel, self.taken, self.append = per_kernel, taken, append
        self.size = max(1, ROUND_PROGRAMS * workers * per_kernel)

    def run(self, pool: Workers, todo: list[Case], deadline=None):
        """Yield each case's result as pool.run does: `todo`'s in rounds of `size`, each round after the first led by
        its share of mutants of the corpus, handed to the pool whenever its queue runs low (no worker waits for a
        round's last case); each result is offered to the corpus as it comes."""
        fresh, rounds, last = list(todo), itertools.count(), [0]
        size = self.size if self.share else max(1, len(fresh))

        def more() -> list[Case]:
            """The share of mutants the previous round's drawn cases call for (`size` once none is left), then the
            next round's drawn cases."""
            want = round(last[0] * self.share / (1 - self.share)) if fresh else size
            mutants = self._draw(min(want, self.left), next(rounds)) if self.share else []
            drawn, fresh[:] = fresh[:size], fresh[size:]
            last[0] = len(drawn)
            return mutants + drawn

        for r in pool.run(more(), deadline, more=more):
            self.corpus.offer(r)
            yield r

    def _draw(self, count: int, round_: int) -> list[Case]:
        rng = random.Random(f"{self.seed}/{round_}")
        cases = self.corpus.mutants(rng, count, self.per_kernel, self.taken) if count > 0 else []
        self.left -= len(cases)
        if cases:
            self.append(cases)
        return cases
