"""The study pages are their rows rendered (`make reports` rewrites nothing), and every comparative sentence on them
carries a claim id whose test exists: studies/STUDY/test_claims.py::test_claim_ID, run by pytest with the rest."""
import ast
from pathlib import Path

import pytest

from config import UserError
from studies import report

ROOT = Path(__file__).resolve().parents[1]


def claim_tests() -> dict[str, set[str]]:
    """{study: the ids of its test_claim_* functions, underscores read as dashes}."""
    out = {}
    for tests in sorted((ROOT / "studies").glob("*/test_claims.py")):
        names = [n.name for n in ast.walk(ast.parse(tests.read_text())) if isinstance(n, ast.FunctionDef)]
        out[tests.parent.name] = {n[len("test_claim_"):].replace("_", "-") for n in names if n.startswith("test_claim_")}
    return out


def page_claims() -> dict[str, set[str]]:
    """{study: every claim id its own page and the front page (as STUDY.ID) write}."""
    out: dict[str, set[str]] = {}
    for page, own in report.pages().items():
        for found in report.CLAIM.findall(page.read_text()):
            study, _, claim = found.rpartition(".") if "." in found else (own, "", found)
            assert study, f"{page.name}: claim {found!r} names no study (write STUDY.ID on the front page)"
            out.setdefault(study, set()).add(claim.replace("_", "-"))
    return out


def test_every_page_and_evaluator_table_is_its_rows_rendered():
    files = report.rendered()
    assert ROOT / "README.md" in files
    assert [str(p.relative_to(ROOT)) for p, text in files.items() if p.read_text() != text] == []


def test_every_claim_on_a_page_has_its_test_and_every_claim_test_its_sentence():
    written, tested = page_claims(), claim_tests()
    for study in sorted(set(written) | set(tested)):
        assert sorted(written.get(study, set()) - tested.get(study, set())) == [], f"{study}: claims without a test"
        assert sorted(tested.get(study, set()) - written.get(study, set())) == [], f"{study}: tests of no sentence"


def test_marks_are_filled_and_a_name_the_study_lacks_is_one_clear_error(tmp_path):
    study = report.Study(str(tmp_path / "values.py"))
    study.value(lambda: "12.5")
    study.tables["ppl"] = lambda: "| a |\n|---|\n| 1 |"
    study.values["gap"] = study.values.pop("<lambda>")
    page = tmp_path / "README.md"
    page.write_text("Lead.\n\n<!-- table: ppl -->\nold\n<!-- /table -->\n\nA gap of <!--v:gap-->9<!--/v--> nats."
                    "<!--claim:gap-positive-->\n")
    text = report.filled(page, study.name, {study.name: study})
    assert text == ("Lead.\n\n<!-- table: ppl -->\n| a |\n|---|\n| 1 |\n<!-- /table -->\n\n"
                    "A gap of <!--v:gap-->12.5<!--/v--> nats.<!--claim:gap-positive-->\n")
    page.write_text("<!--v:lost-->1<!--/v-->")
    with pytest.raises(UserError, match="no value 'lost'"):
        report.filled(page, study.name, {study.name: study})


def test_check_names_a_file_that_differs_and_exits_1(monkeypatch, tmp_path, capsys):
    page = tmp_path / "README.md"
    page.write_text("typed over")
    monkeypatch.setattr(report, "rendered", lambda only=None: {page: "rendered"})
    monkeypatch.setattr(report, "ROOT", tmp_path)
    with pytest.raises(SystemExit) as e:
        report.main(["--check"])
    assert e.value.code == 1 and "differs from its rows: README.md" in capsys.readouterr().out
    report.main([])
    assert page.read_text() == "rendered"
