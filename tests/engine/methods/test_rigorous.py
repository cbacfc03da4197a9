"""The rigorous method (engine.methods.rigorous) with a scripted fake context, a hand-computed
end-to-end score, failure handling, and the real bundles with the offline rules."""
from __future__ import annotations


import msgspec
import orjson
import pytest

from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods import get
from drscore.engine.methods.rigorous.method import KeywordRelevance, Rigorous, format_choices, rubric_verdict
from drscore.engine.runtime.models import Report, Task
from drscore.engine.methods.rigorous.rubrics import parse_rubric_item
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rules
from support.data import RIGOROUS as DATA

BUNDLE = {
    "uid": "05999", "query": "Compare alpha and beta.",
    "qsr": ["Does the report define alpha? Yes=2, No=0",
            "Does it compare alpha and beta? Yes=3, Partial=1 (one side only), No=0"],
    "tsl": ["https://a.org/x", "https://b.org/y"],
    "fak": ["alpha", "beta"], "fdk": ["gamma"],
}
REPORT = """# Alpha and beta

Alpha matters. Beta matters less [1]. Gamma appears once [2].

## References
[1] https://a.org/x/page?utm=1
[2] https://c.org/z
"""
SCRIPT = {"qsr[0]": "Yes", "qsr[1]": "Partial", "grr[0]": "Yes", "grr[1]": "No",
          "fak[0]": 5, "fak[1]": 3, "fdk[0]": 2}


class FakeContext:
    """ItemContext stand-in: answers from ``script`` by call label, else from the offline rules."""

    def __init__(self, task, report, script=None):
        self.task, self.report, self.method, self.options, self.seed, self.pages = task, report, "rigorous", {}, 0, None
        self.script = script
        self.calls = []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        self.calls.append((template, label, variables))
        if self.script is None:
            return msgspec.convert(rules()[template](variables, schema_of(verdict)), verdict)
        answer = self.script[label]
        if isinstance(answer, Exception):
            raise answer
        if template == "rigorous_keyword":
            return KeywordRelevance(reason="scripted", relevance=answer)
        return verdict(reason="scripted", label=answer)

    async def offload(self, fn, *args):
        return fn(*args)


@pytest.fixture
def grr_file(tmp_path):
    path = tmp_path / "grr.json"
    path.write_bytes(orjson.dumps([{"rule": "Is it clear? Yes=2, No=0", "max_points": 2},
                                   {"rule": "Does it use headings? Yes=1, No=0", "max_points": 1}]))
    return path


def _score(method, script, *, usage=None, bundle=BUNDLE, task_id="05999", report=REPORT):
    task = Task(task_id=task_id, prompt="Compare alpha and beta.", fields={"bundle": bundle} if bundle else {})
    ctx = FakeContext(task, Report(task_id=task_id, agent="a", report=report, usage=usage), script)
    import asyncio
    return asyncio.run(method.score(ctx)), ctx


def test_registered_with_options():
    cls = get("rigorous")
    assert cls is Rigorous
    assert [o.flag for o in cls.options] == ["bundles", "general-rubrics", "tsl-counting"]


def test_hand_computed_integrated_score(grr_file):
    method = Rigorous({"general_rubrics": str(grr_file)})
    result, ctx = _score(method, SCRIPT, usage={"total_tokens": 5000, "input_tokens": 1000, "retrieved_links": 9})
    s = result.subscores
    # QSR (2 + 1) / (2 + 3) = 0.6; GRR (2 + 0) / (2 + 1) = 0.666667; Quality 0.5*0.6 + 0.5*0.666667 = 0.633333
    assert s["qsr"] == pytest.approx(0.6) and s["grr"] == pytest.approx(2 / 3, abs=1e-6)
    assert s["quality"] == pytest.approx(0.633333, abs=1e-6)
    # Citations removed: "alpha" x2, "beta" x2 (heading + sentence), "gamma" x1.
    # FAK: 1 - (min(2/2,1)*5/5 + min(2/2,1)*3/5) / 2 = 1 - 0.8 = 0.2; FDK: min(1/1,1)*2/5 = 0.4
    assert s["fak_drift"] == pytest.approx(0.2) and s["fdk_drift"] == pytest.approx(0.4)
    # SemanticDrift 0.7*0.2 + 0.3*0.4 = 0.26
    assert s["semantic_drift"] == pytest.approx(0.26)
    # Cited: a.org/x/page, c.org/z -> full 1 (a.org/x), host 1 (a.org); 1 + 0.2*(0.7*1/2 + 0.3*0/3) = 1.07
    assert s["trustworthy_boost"] == pytest.approx(1.07)
    # 0.633333 * 0.74 * 1.07 * 100 = 50.147333
    assert result.score == pytest.approx(50.147333, abs=1e-5)
    # 50.147333 / (5000 - 1000) = 0.012537; 2 annotated (cited) / (9 + 1) = 0.2
    assert s["contribution_per_token"] == pytest.approx(0.01253683, abs=1e-7)
    assert s["retrieval_index"] == pytest.approx(0.2)
    assert (result.status, result.judged, result.expected, result.errors) == ("ok", 7, 7, [])
    d = result.details
    assert (d["domain"], d["qsr_max"], d["qsr_points"], d["grr_max"], d["grr_points"]) == ("05", 5, 3, 3, 2)
    assert d["qsr_labels"] == ["Yes", "Partial"] and d["grr_labels"] == ["Yes", "No"]
    assert d["fak"] == [{"keyword": "alpha", "freq": 2, "relevance": 5}, {"keyword": "beta", "freq": 2, "relevance": 3}]
    assert d["tsl"] == {"match_full": 1, "match_host": 1, "n_tsl": 2, "n_annotations": 2, "counting": "code"}
    assert d["comparable_with_published"] is True and method.notes() == []
    # Keyword calls see the report without citations; rubric calls see it whole.
    kw_vars = [v for t, _, v in ctx.calls if t == "rigorous_keyword"]
    assert all("https://" not in v["report"] and "[1]" not in v["report"] for v in kw_vars)
    rubric_vars = [v for t, _, v in ctx.calls if t == "rigorous_rubric"]
    assert all(v["report"] == REPORT for v in rubric_vars)
    assert rubric_vars[1]["choices"] == "- Yes: 3 points\n- Partial: 1 point (one side only)\n- No: 0 points"


def test_without_usage_the_efficiency_metrics_are_absent(grr_file):
    result, _ = _score(Rigorous({"general_rubrics": str(grr_file)}), SCRIPT)
    assert "contribution_per_token" not in result.subscores and "retrieval_index" not in result.subscores


def test_failed_items_count_in_coverage(grr_file):
    script = dict(SCRIPT, **{"qsr[1]": JudgeFailed("rate_limited", "gave up"), "fak[1]": JudgeFailed("decode")})
    result, _ = _score(Rigorous({"general_rubrics": str(grr_file)}), script)
    assert (result.status, result.judged, result.expected) == ("partial", 5, 7)
    assert result.errors == ["qsr[1]: rate_limited: gave up", "fak[1]: decode"]
    # QSR over the judged item only: 2/2 = 1.0; Quality 0.5*1 + 0.5*0.666667 = 0.833333
    assert result.subscores["qsr"] == 1.0
    assert result.subscores["quality"] == pytest.approx(0.833333, abs=1e-6)
    # FAK over alpha only: 1 - 1 = 0; SD = 0.3 * 0.4 = 0.12
    assert result.subscores["semantic_drift"] == pytest.approx(0.12)
    assert result.details["qsr_labels"] == ["Yes", None]
    # 0.833333 * 0.88 * 1.07 * 100 = 78.466667
    assert result.score == pytest.approx(78.466667, abs=1e-5)


def test_a_whole_failed_component_fails_the_report(grr_file):
    script = dict(SCRIPT, **{"qsr[0]": JudgeFailed("timeout"), "qsr[1]": JudgeFailed("timeout")})
    result, _ = _score(Rigorous({"general_rubrics": str(grr_file)}), script)
    assert result.score is None and result.status == "failed"
    assert result.subscores["qsr"] is None and result.subscores["grr"] == pytest.approx(2 / 3, abs=1e-6)
    assert result.errors == ["qsr[0]: timeout", "qsr[1]: timeout"]


def test_missing_and_invalid_bundles_fail_with_a_reason(tmp_path):
    result, ctx = _score(Rigorous(), SCRIPT, bundle=None)
    assert result.status == "failed" and "--bundles" in result.errors[0] and ctx.calls == []
    result, _ = _score(Rigorous(), SCRIPT, bundle=dict(BUNDLE, qsr=["no values here?"]))
    assert result.errors[0].startswith("task 05999: field 'bundle': qsr[0]: no allowed values")
    path = tmp_path / "b.jsonl"
    path.write_bytes(orjson.dumps(dict(BUNDLE, qsr=["broken"])) + b"\n")
    result, _ = _score(Rigorous({"bundles": str(path)}), SCRIPT, bundle=None)
    assert result.errors == [f"bundle for task 05999 is invalid: {path}:1: qsr[0]: "
                             "no allowed values (like 'Yes=2, No=0') at the end of: 'broken'"]
    result, _ = _score(Rigorous({"bundles": str(path)}), SCRIPT, bundle=None, task_id="01001")
    assert result.errors == [f"no bundle with uid '01001' in {path}"]
    with pytest.raises(FileNotFoundError):
        Rigorous({"bundles": str(tmp_path / "missing.jsonl")})
    with pytest.raises(ValueError, match="tsl-counting"):
        Rigorous({"tsl_counting": "hosts"})


def test_rubric_verdict_schema_allows_only_the_item_labels():
    item = parse_rubric_item("Q? Full=4, Partial (1–3)=1–3, No=0")
    verdict = rubric_verdict(item.labels)
    assert verdict is rubric_verdict(item.labels)  # one class per label set
    schema = schema_of(verdict)
    assert sorted(schema["properties"]["label"]["enum"]) == sorted(item.labels)
    assert schema["required"] == ["reason", "label"] and schema["additionalProperties"] is False
    assert msgspec.json.decode(b'{"reason": "r", "label": "Partial-2"}', type=verdict).label == "Partial-2"
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"reason": "r", "label": "Partial"}', type=verdict)
    assert format_choices(item).splitlines()[1] == "- Partial-3: 3 points (1–3)"


REAL_REPORT = """# The QUIC standardization path

## Introduction
QUIC was originally proposed by Google and standardized by the IETF QUIC working group.

## Drafts
Draft-13/14 established the QUIC + TLS 1.3 model. Draft-17 introduced independent packet
number spaces. Draft-29 became the widely used baseline for interoperability testing, and
draft-34 (2021) was the final draft. 0-RTT rules and the Long Header changed across drafts.

## The RFCs
- RFC 8999 defines version-independent invariants: fields that must remain consistent across versions [1].
- RFC 9000 is the transport [2]; RFC 9001 covers TLS usage [3].
- RFC 9002 defines loss detection with a Probe Timeout (PTO) and NewReno-style congestion control [4].
In May 2023 the IETF published RFC 9369 (QUIC version 2).

## Conclusion
QUIC integrates transport design and encryption, an evolution of the TCP/IP stack.

## References
[1] https://www.rfc-editor.org/rfc/rfc8999
[2] https://www.rfc-editor.org/rfc/rfc9000
[3] https://www.rfc-editor.org/rfc/rfc9001
[4] https://www.rfc-editor.org/rfc/rfc9002
"""


def test_real_bundles_with_offline_rules():
    method = Rigorous({"bundles": str(DATA / "bundles.jsonl"),
                       "general_rubrics": str(DATA / "general_rubrics.json")})
    good, ctx = _score(method, None, bundle=None, task_id="07001", report=REAL_REPORT)
    thin, _ = _score(method, None, bundle=None, task_id="07001", report="QUIC is a protocol.\n")
    # 17 QSR + 48 GRR + 5 FAK + 5 FDK calls, all answered.
    assert (good.status, good.judged, good.expected) == ("ok", 75, 75)
    assert len(ctx.calls) == 75
    assert good.details["qsr_max"] == 30 and good.details["grr_max"] == 73
    assert good.details["tsl"]["match_full"] == 4  # rfc8999..rfc9002 cited exactly
    assert thin.score == 0.0 < good.score <= 120  # the one-line report earns no rubric point
    assert good.subscores["qsr"] > thin.subscores["qsr"]
    assert good.subscores["fak_drift"] < thin.subscores["fak_drift"]
    nonstandard, _ = _score(method, None, bundle=None, task_id="10502", report=REAL_REPORT)
    assert nonstandard.details["qsr_max"] == 22 and nonstandard.details["qsr_max_standard"] is False


# --------------------------------------------------------------------------- end to end

E2E_UIDS = ("07001", "05002", "10502")


@pytest.fixture
def rigorous_inputs(tmp_path):
    """A slice of the real bundles, a task file (task_id = uid, prompt = query) and one
    short hand-written report per task."""
    bundles = {orjson.loads(line)["uid"]: orjson.loads(line)
               for line in (DATA / "bundles.jsonl").read_bytes().splitlines()}
    picked = [bundles[u] for u in E2E_UIDS]
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("bundles", "tasks", "reports")}
    paths["bundles"].write_bytes(b"".join(orjson.dumps(b) + b"\n" for b in picked))
    paths["tasks"].write_bytes(b"".join(orjson.dumps({"task_id": b["uid"], "prompt": b["query"]}) + b"\n"
                                        for b in picked))
    reports = []
    for b in picked:
        text = (f"# Report\n\n{b['query']}\n\n## Findings\n\n" + ", ".join(b["fak"]) +
                f" are discussed here [1].\n\n## References\n[1] {b['tsl'][0]}\n")
        reports.append({"task_id": b["uid"], "agent": "demo", "report": text})
    paths["reports"].write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in reports))
    # Judge calls per report: every QSR item, the 30 default GRR items, 5 FAK + 5 FDK.
    calls = sum(len(b["qsr"]) + 30 + 10 for b in picked)
    return paths, calls


def _run_cli(paths, out, *extra):
    from drscore.cli import main

    return main(["run", "--methods", "rigorous", "--tasks", str(paths["tasks"]), "--reports",
                 str(paths["reports"]), "--bundles", str(paths["bundles"]), "--out", str(out), *extra])


def _rows(out):
    return {r["task_id"]: r for r in map(orjson.loads, (out / "scores.jsonl").read_bytes().splitlines())}


def test_run_end_to_end_with_the_offline_judge(rigorous_inputs, tmp_path, capsys):
    paths, calls = rigorous_inputs
    assert _run_cli(paths, tmp_path / "run", "--no-cache") == 0
    rows = _rows(tmp_path / "run")
    assert sorted(rows) == sorted(E2E_UIDS)
    assert sum(r["calls"] for r in rows.values()) == calls == 167
    for uid, r in rows.items():
        assert (r["method"], r["status"], r["judge"], r["coverage"]) == ("rigorous", "ok", "offline", 1.0)
        assert r["details"]["domain"] == uid[:2]
        assert r["details"]["tsl"]["match_full"] == 1  # each report cites its first TSL
        assert 0 <= r["score"] <= 120
    assert rows["10502"]["details"]["qsr_max"] == 22 and rows["07001"]["details"]["qsr_max"] == 30
    # No --general-rubrics: the leaderboard and summary.json say the scores are not comparable.
    board = capsys.readouterr().out
    assert "NOTE: rigorous: no --general-rubrics file was given" in board and "NOT comparable" in board
    summary = orjson.loads((tmp_path / "run" / "summary.json").read_bytes())
    assert "NOT comparable" in summary["notes"]["rigorous"][0]
    assert all(r["details"]["comparable_with_published"] is False for r in rows.values())

    from drscore.cli import main

    assert main(["tasks", "domains", str(tmp_path / "run")]) == 0
    table = orjson.loads(capsys.readouterr().out)
    assert sorted(table["demo"]) == ["05", "07", "10"]
    assert table["demo"]["07"]["score"] == pytest.approx(rows["07001"]["score"])


def test_run_end_to_end_with_the_mock_judge(rigorous_inputs, tmp_path):
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    paths, calls = rigorous_inputs
    with MockServerProcess(MockConfig(seed=3)) as mock:
        judge = ["--judge-url", mock.url, "--judge-model", "mock", "--cache", str(tmp_path / "cache")]
        assert _run_cli(paths, tmp_path / "run1", *judge) == 0
        assert mock.stats()["ok"] == calls
        # Warm re-run: everything from the cache, no request reaches the server.
        assert _run_cli(paths, tmp_path / "run2", *judge) == 0
        assert mock.stats()["requests"] == calls
    first, second = _rows(tmp_path / "run1"), _rows(tmp_path / "run2")
    for uid in E2E_UIDS:
        r = first[uid]
        assert (r["status"], r["judge"], r["judged"], r["expected"]) == ("ok", "mock", r["expected"], r["expected"])
        assert r["score"] == second[uid]["score"] and second[uid]["cache_hits"] == r["expected"]
        # The mock answers from the schema: every label is one the item allows.
        assert set(r["details"]["qsr_labels"]) <= {"Yes", "No", "Partial"}
