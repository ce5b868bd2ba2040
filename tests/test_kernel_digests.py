"""The kernel-digest benchmark compares what two trees generate: a run cut short still compares by
the parts it wrote, and a kernel that fails in both trees is never counted as the same."""
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("kernel_digests", ROOT / "benchmarks" / "kernel_digests.py")
digests = sys.modules["kernel_digests"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(digests)


def test_a_run_cut_short_compares_by_its_parts(tmp_path, capsys):
    before = tmp_path / "before.json"
    before.write_text(json.dumps({"a": "11", "b": "22", "c": "error: InternalError: x"}))
    after = tmp_path / "after.json"  # never written: the run was killed; two processes left their parts
    parts = tmp_path / "after.json.parts"
    parts.mkdir()
    (parts / "0.jsonl").write_text(json.dumps(["a", "11"]) + "\n")
    (parts / "1.jsonl").write_text(json.dumps(["c", "error: InternalError: x"]) + "\n")
    assert digests.load(after) == {"a": "11", "c": "error: InternalError: x"}
    assert digests.compare(before, after) == 1  # c fails in both: not a match
    out = capsys.readouterr().out
    assert out.startswith("1 / 2 kernels digest the same (3 before, 2 after)") and "  c: error" in out


def test_equal_digests_compare_clean(tmp_path, capsys):
    for name in ("x.json", "y.json"):
        (tmp_path / name).write_text(json.dumps({"a": "11", "b": "22"}))
    assert digests.compare(tmp_path / "x.json", tmp_path / "y.json") == 0
    assert "2 / 2 kernels digest the same" in capsys.readouterr().out
