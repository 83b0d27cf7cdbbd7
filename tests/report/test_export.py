"""tracetui.report.export: CSV and Markdown from rows of text (shared by the app and the CLI)."""
import csv
import io

from tracetui.report.export import free_path, to_csv, to_markdown, write


def test_csv_round_trips_awkward_names():
    rows = [["aten::add_", 'a "quoted", name', "1,234.5"], ["x\ny", "esc\x1b[2J", "7"]]
    got = list(csv.reader(io.StringIO(to_csv(["name", "other", "µs"], rows))))
    assert got[0] == ["name", "other", "µs"]
    assert got[1] == rows[0]
    assert got[2] == ["x y", "esc\\x1b[2J", "7"]  # one line per row, no escape reaches a terminal


def test_markdown_escapes_pipes_and_right_aligns_numbers():
    md = to_markdown(["name", "µs"], [["a|b", "1,234.5"], ["c\\d", "7"]]).splitlines()
    assert md[1] == "|---|---:|"
    assert md[2] == "| a\\|b | 1,234.5 |" and md[3] == "| c\\\\d | 7 |"


def test_write_never_overwrites(tmp_path):
    (tmp_path / "t.csv").write_text("mine")
    p = write(tmp_path, "t", "csv", ["a"], [["1"]])
    assert p.name == "t-2.csv" and (tmp_path / "t.csv").read_text() == "mine"
    assert free_path(tmp_path, "t", "md").name == "t.md"
