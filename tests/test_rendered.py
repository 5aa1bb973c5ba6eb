"""The committed report tables are their rows rendered (render.reports, `make reports`): none has drifted."""
import json
import shutil
from pathlib import Path

import pytest

from render import reports

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def test_every_committed_table_is_its_rows_rendered():
    tables = reports.rendered(REPORTS)
    assert len(tables) >= 30 and REPORTS / "smollm2" / "report.md" in tables  # every evaluator's tables are in it
    assert REPORTS.parent / "README.md" in tables  # and the headline table of the front page
    assert [str(p.relative_to(REPORTS)) for p, text in tables.items() if p.read_text() != text] == []


def test_a_drifted_table_is_named_then_rendered_again(tmp_path, capsys):
    folder = tmp_path / "reports"
    shutil.copytree(REPORTS / "tasks" / "context" / "logn", folder / "logn")
    table = folder / "logn" / "results.md"
    committed = table.read_text()
    table.write_text(committed.replace("100 ± 0", "99 ± 0", 1))  # a number typed over the rendered one
    assert table.read_text() != committed
    with pytest.raises(SystemExit) as e:
        reports.main([str(folder), "--check"])
    assert e.value.code == 1 and f"differs from its rows: {table}" in capsys.readouterr().out
    reports.main([str(folder)])
    assert table.read_text() == committed
    with pytest.raises(SystemExit) as e:
        reports.main([str(folder), "--check"])
    assert e.value.code == 0


def test_a_readme_table_is_rendered_between_its_markers_and_a_lost_marker_is_named(tmp_path):
    from config import UserError
    page = REPORTS / "extrapolation-gpu" / "README.md"
    block = reports.BLOCKS["reports/extrapolation-gpu/README.md"]["ppl-seeds-1-4"](REPORTS)
    assert f"<!-- rendered: ppl-seeds-1-4 -->\n{block}\n<!-- /rendered -->" in page.read_text()
    assert block.count("\n") == 11 and "| alibi | none | 51.65 ± 0.24 |" in block  # ALiBi's mean at L over seeds 1-4
    lost = tmp_path / "README.md"
    lost.write_text(page.read_text().replace("<!-- /rendered -->", ""))
    with pytest.raises(UserError, match="rendered blocks"):
        reports.with_blocks(lost, reports.BLOCKS["reports/extrapolation-gpu/README.md"], REPORTS)


def test_a_sentence_the_rows_no_longer_support_stops_the_rendering(tmp_path, capsys):
    folder = tmp_path / "reports"
    shutil.copytree(REPORTS / "smollm2", folder / "smollm2")
    rows = json.loads((folder / "smollm2" / "results.json").read_text())
    for r in rows:
        if r["run"] == "smollm2-yarn" and r["length"] == 32768:
            r["ppl"] *= 2  # the YaRN fine-tune would fail at 4x its context
    (folder / "smollm2" / "results.json").write_text(json.dumps(rows))
    with pytest.raises(SystemExit) as e:
        reports.main([str(folder), "--check"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and "the rows no longer support" in err and "reads 16,384 tokens as well as 8,192" in err


def test_the_cpu_bench_page_says_only_what_its_measurements_hold(tmp_path):
    from render import bench_report
    from render.prose import FalseClaim
    shutil.copytree(REPORTS / "bench" / "cpu", tmp_path / "bench" / "cpu")
    bench = tmp_path / "bench" / "cpu" / "bench.json"
    results = json.loads(bench.read_text())
    rows = {r["position"]: r for r in results["rows"]}
    at_16x = lambda name: next(e for e in rows[name]["eval"] if e["multiple"] == 16)  # noqa: E731
    share = at_16x("t5")["tokens_per_s"] / at_16x("rope")["tokens_per_s"]
    assert f"t5 at {100 * share:.0f}% of RoPE's evaluation tokens/s" in bench_report.cpu_latest(tmp_path)
    at_16x("t5")["tokens_per_s"] = 1.1 * at_16x("rope")["tokens_per_s"]  # its T x S mask no longer costs anything
    bench.write_text(json.dumps(results))
    with pytest.raises(FalseClaim, match="t5 at 110%"):
        bench_report.cpu_latest(tmp_path)
