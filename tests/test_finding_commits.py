"""Which commit made each README number: read from the run folders' params files, the commit most runs share named
once, and a finding from a run made at another commit naming it."""

import json
from dataclasses import dataclass

from lib.run.facts import common_commit, run_commits
from lib.run.findings import readme_lines


@dataclass
class _Finding:
    text: str

    def readme(self) -> str:
        return self.text


def _run(folder, commit, **notebooks):
    folder.mkdir()
    (folder / "params.json").write_text(json.dumps({"git_commit": commit}))
    for name, c in notebooks.items():
        (folder / f"params_{name}.json").write_text(json.dumps({"git_commit": c}))
    return folder


def test_a_run_names_every_commit_its_params_files_record_and_keeps_dirty(tmp_path):
    a = _run(tmp_path / "a", "1234567" + "0" * 33, nb03="abcdef0" + "1" * 33 + "+dirty")
    assert run_commits(a) == ("1234567", "abcdef0+dirty")
    assert run_commits(_run(tmp_path / "b", "")) == ()


def test_the_common_commit_is_named_once_and_only_findings_from_other_commits_name_theirs():
    commits = {"old": ("aaaaaaa",), "new1": ("bbbbbbb",), "new2": ("bbbbbbb",)}
    assert common_commit(commits) == "bbbbbbb"
    assert common_commit({}) is None
    runs = dict.fromkeys(commits, {})
    lines = readme_lines(
        [_Finding("**A.** [0.9][new1] and [0.8][new2]."), _Finding("**B.** [0.7][old].")], runs, commits=commits
    )
    assert lines[0] == "Every number below was made at commit `bbbbbbb` unless its finding names another."
    assert "- **A.** [0.9][new1] and [0.8][new2]." in lines
    b = lines.index("- **B.** [0.7][old].")
    assert lines[b + 1] == "  *Made at `aaaaaaa`.*"
    same = readme_lines([_Finding("**A.** [0.9][new1].")], runs, commits={"new1": ("bbbbbbb",)})
    assert same[0].startswith("Every number below was made at commit `bbbbbbb`") and "Made at" not in "".join(same)
    assert readme_lines([_Finding("**A.** [0.9][new1].")], runs)[0] == "- **A.** [0.9][new1]."


def test_the_runs_later_code_re_ran_are_named_with_what_it_found():
    table = [{"table": "t.csv", "metric": "auc", "rows": 4, "missing": 0, "exact": 4, "max_drift": 0.0, "ok": True}]
    check = {
        "prefix": "one-seed",
        "notebooks": ["01", "03"],
        "rerun_at": ["ccccccc"],
        "tolerance": 1e-6,
        "table": table,
    }
    moved = {**check, "table": [{**table[0], "exact": 3, "max_drift": 2e-7}]}
    lines = readme_lines([_Finding("**A.** [0.9][new1].")], {"new1": {}}, checks={"new1": check, "old": moved})
    said = " ".join(lines[: lines.index("- **A.** [0.9][new1].")])
    assert "every metric equal to the last bit in `new1`; within 1e-06 in `old` (largest drift 2e-07)." in said
    far = {**check, "table": [{**table[0], "exact": 3, "max_drift": 2e-5, "ok": False}]}
    lines = readme_lines([_Finding("**A.** [0.9][new1].")], {"new1": {}}, checks={"far": far})
    assert "not all within it in `far` (0 of 1 metrics within 1e-06 (beyond it: auc 2e-05))." in " ".join(lines)
    assert "lib.run.reproduce" not in " ".join(readme_lines([_Finding("**A.**")], {}, checks={}))
