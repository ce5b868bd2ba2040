"""A campaign's corpus (harness.corpus): what it keeps, and the rounds that add its mutants, with a fake pool."""
import pytest

from harness.case import Case
from harness.corpus import Corpus, Feedback
from harness.programs import model
from harness.result import Result
from tests.test_mutate import FILL, LOAD, SCAN, STORE, _program

P = _program([LOAD, SCAN, FILL, STORE])


def _case(program=P, n=40):
    return Case(family="program", variant="default", layout="bhsd", head_dim=64, head_dim_v=64, heads=1, kv_heads=1,
                seqlen_q=n, seqlen_k=n, program=program).validate()


def _result(case, features):
    return Result.of(case, "COMPILED", "compile", features=tuple(features))


def test_a_program_is_kept_for_a_feature_or_a_pair_not_seen_before(tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    other = _program([LOAD, FILL, STORE])
    third = _program([LOAD, SCAN, STORE])
    assert corpus.offer(_result(_case(), ["a", "b"]))
    assert not corpus.offer(_result(_case(other), ["a"]))      # nothing new
    assert corpus.offer(_result(_case(other, 41), ["a", "c"]))  # c is new
    corpus.features.add("d")
    assert corpus.offer(_result(_case(third), ["c", "d"]))      # both seen, never together
    assert len(list((tmp_path / "corpus").glob("*.json"))) == 3 == len(corpus.entries)
    assert model.from_json((tmp_path / "corpus" / sorted(p.name for p in (tmp_path / "corpus").iterdir())[0]).read_text())


class FakePool:
    """Answers each batch in reverse order, its features the statement kinds of the case's program."""

    def __init__(self):
        self.batches = []

    def run(self, cases, deadline=None, more=None):
        """Each batch to its end, then `more()`: a pool whose queue runs low only once a batch is done."""
        while cases:
            self.batches.append([c.id for c in cases])
            for c in reversed(cases):
                ops = [s.op + str(i) for i, s in enumerate(c.program.body)]
                yield _result(c, ops)
            cases = more() if more else []


def _campaign(tmp_path, share=1 / 3, budget=6):
    appended = []
    todo = [_case(n=n) for n in (40, 41)] + [_case(_program([LOAD, FILL, STORE]), n) for n in (40, 41)] \
        + [_case(_program([LOAD, SCAN, STORE]), n) for n in (40, 41)]
    feedback = Feedback(Corpus(tmp_path / "corpus"), share, budget, seed=5, per_kernel=2, workers=1,
                        taken={c.id for c in todo}, append=appended.extend)
    feedback.size = 4
    pool = FakePool()
    results = list(feedback.run(pool, todo))
    return results, appended, pool.batches


def test_rounds_add_mutants_of_the_corpus_up_to_the_budget_the_same_for_a_seed(tmp_path):
    results, appended, batches = _campaign(tmp_path / "one")
    assert 0 < len(appended) <= 6 and len(results) == 6 + len(appended)
    assert [len(b) for b in batches][:2] == [4, 2 + 2]  # the first round's mutants (4 drawn cases' share: 2) run next
    parents = {P, _program([LOAD, FILL, STORE]), _program([LOAD, SCAN, STORE])}
    assert all(m.program not in parents and (m.seqlen_q, m.seed) in {(40, 0), (41, 0)} for m in appended)
    again = _campaign(tmp_path / "two")[1]
    assert [c.id for c in again] == [c.id for c in appended]


def test_without_a_share_the_cases_run_as_one_round_and_nothing_is_added(tmp_path):
    results, appended, batches = _campaign(tmp_path, share=0, budget=0)
    assert appended == [] and len(batches) == 1 and len(results) == 6


def test_a_mutating_campaign_resumes_with_the_mutants_its_cases_file_holds_after_the_drawn_ones(tmp_path):
    from harness import campaign
    opts = campaign.Options(out=tmp_path, families=("program",), cases=6, per_kernel=1, pairwise=False)
    drawn = campaign.plan(opts)
    assert len(drawn) == 6 - campaign.mutants(opts) == 4
    campaign.write_cases(tmp_path / "cases.jsonl", drawn)
    campaign.append_cases(tmp_path / "cases.jsonl", [_case()])
    assert [c.id for c in campaign.plan(opts)] == [c.id for c in drawn] + [_case().id]
    opts.mutate, opts.cases = 0, 4  # the same drawn cases; the extra one is now foreign
    with pytest.raises(campaign.CampaignError, match="holds another campaign"):
        campaign.plan(opts)


def test_a_resumed_run_with_no_drawn_case_left_goes_on_mutating_its_corpus(tmp_path):
    corpus = Corpus(tmp_path)
    corpus.offer(_result(_case(), ["a"]))
    appended = []
    feedback = Feedback(corpus, 1 / 3, 2, seed=5, per_kernel=1, workers=1, taken={_case().id}, append=appended.extend)
    results = list(feedback.run(FakePool(), []))
    assert len(results) == len(appended) == 2 and feedback.left == 0


def test_a_mutant_whose_values_outgrow_a_drawn_programs_bounds_is_not_run(tmp_path, monkeypatch):
    import random

    from harness.programs import mutate
    from tests.test_program_kinds import _mapped
    corpus = Corpus(tmp_path)
    corpus.offer(_result(_case(), ["a"]))
    big = ["mul", ["mul", ["mul", ["mul", ["buf", "R"], ["num", 8]], ["num", 8]], ["num", 8]], ["num", 8]]
    for child, kept in ((_mapped(["buf", "R"]), 1), (_mapped(big), 0)):
        monkeypatch.setattr(mutate, "mutate", lambda p, rng, insert=None, child=child: child)
        assert len(corpus.mutants(random.Random(0), 1, 1, set())) == kept
