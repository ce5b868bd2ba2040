"""The run report: markdown, CSV and one self-contained HTML page with plots."""
from harness import cli, report
from harness.case import Case
from harness.result import Result
from tests.test_mutate import FILL, LOAD, SCAN, STORE, _program


def results():
    check = {"tensor": "O", "ok": True, "verdict": "PASS", "error": 1e-3, "tolerance": 1e-2}
    return [Result.of(Case(seqlen_q=n), "PASS", "judge", checks=[check], seconds={"compile": 2.0, "run": 0.1})
            for n in (1, 65, 300)] + [
        Result.of(Case(seqlen_q=70, causal=True), "MISMATCH", "judge", "O: max error 0.5 > tolerance 0.004",
               tensor="O", region="tail_q_tile", checks=[dict(check, ok=False, verdict="MISMATCH", error=0.5)])]


def test_frame_has_the_error_ratio_and_the_verdict_table_no_empty_column():
    df = report.frame(results())
    assert list(df["error_ratio"]) == [0.1, 0.1, 0.1, 50.0]
    assert list(report.verdict_table(df).columns) == ["family", "variant", "MISMATCH", "PASS", "total"]


def test_the_time_table_sums_each_stage_per_family():
    df = report.frame(results())
    t = report.time_table(df)
    assert list(t.columns) == ["family", "cases", "start_s", "compile_s", "inputs_s", "run_s", "judge_s"]
    assert t.iloc[0][["cases", "compile_s", "run_s", "judge_s"]].tolist() == [4, 6.0, 0.3, 0.0]
    assert "## Worker seconds by stage" in report.summary(results())


def test_a_run_over_several_gpus_has_their_time_table_in_both_reports(tmp_path):
    assert "by GPU" not in report.summary(results())  # one GPU: the pool names none
    spread = [r.replace(gpu=str(i % 2)) for i, r in enumerate(results())]
    t = report.time_table(report.frame(spread), "gpu")
    assert t[["gpu", "cases", "run_s"]].values.tolist() == [["0", 2, 0.2], ["1", 2, 0.1]]  # the mismatch (on 1) has no seconds
    report.write(tmp_path, spread)
    for name in ("summary.md", "report.html"):
        assert "Worker seconds by GPU" in (tmp_path / name).read_text()


def test_html_is_self_contained_with_tables_and_plots(tmp_path):
    text = report.write(tmp_path, results())
    page = (tmp_path / "report.html").read_text()
    assert "## Distinct failures" in text and "tail_q_tile" in page
    assert page.count("data:image/png;base64,") == 2 and "http" not in page.split("<body>")[1]
    assert (tmp_path / "results.csv").read_text().startswith("case_id,family")


def test_report_command(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"harness report: no {tmp_path / 'results.jsonl'}\n"
    import json
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in results()))
    assert cli.main(["report", str(tmp_path), "--reproducers", str(tmp_path / "none")]) == 0
    assert (tmp_path / "report.html").exists()


def test_both_reports_say_what_the_run_was_and_harness_report_says_it_again(tmp_path):
    about = {"tilelang": "0.1.15", "target": "sm_90a", "gpu": None, "compile_only": True, "families": ["fwd", "bwd"],
             "seed": 3, "cases_from": None, "peer": False, "shard": "2/4"}
    line = "Run: TileLang 0.1.15, compile-only for sm_90a (no GPU: numerics not run), seed 3, shard 2/4, families fwd, bwd"
    assert report.describe(about) == line
    assert report.describe(dict(about, compile_only=False, target="sm_90", gpu="NVIDIA H100 x1", seed=None,
                                cases_from="c.jsonl", shard=None)) == \
        "Run: TileLang 0.1.15, on NVIDIA H100 x1 (sm_90), cases from c.jsonl, families fwd, bwd"
    assert report.write(tmp_path, results(), about=about).startswith(line + "\n\n## Verdicts")
    assert line in (tmp_path / "report.html").read_text()
    report.write(tmp_path, results())  # harness report: the run as run.json recorded it
    assert (tmp_path / "summary.md").read_text().startswith(line + "\n")
    assert report.summary(results()).startswith("Run: not recorded (no run.json)\n")


def test_the_summary_counts_the_cuda_features_and_pairs_seen_per_program_and_plots_them(tmp_path):
    def ran(program, features):
        return Result.of(Case(family="program", program=program), "COMPILED", "compile", features=features)
    one, two = (_program(body) for body in ([LOAD, SCAN, STORE], [LOAD, FILL, STORE]))
    runs = [ran(one, ("a", "b")), ran(one, ("a", "b", "c")), ran(two, ("b", "c")), Result.of(Case(), "PASS", "judge")]
    assert report.feature_growth(runs) == [(1, 2, 1), (2, 3, 2)]  # a program counts once, at its first result
    text = report.write(tmp_path, runs)
    assert "CUDA features seen: 3 (pairs: 2) in 2 programs" in text and (tmp_path / report.FEATURES_PLOT).is_file()
    assert "CUDA features seen" not in report.summary(results())
