"""`e` / `E` on any screen that shows a table: what it shows, as CSV / Markdown in a new file in the
working folder (``report/export.py`` writes it; nothing is overwritten). A screen mixes this in and
says what it shows with ``export_table()``: (file stem, header, rows), or a str saying why there is
nothing to export yet."""
from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from tracetui.textsafe import visible

EXPORT_BINDINGS = [
    Binding("e", "export('csv')", "Export CSV", show=False),
    Binding("E", "export('md')", "Export Markdown", show=False),
]


def table_rows(table) -> tuple[list[str], list[list]]:
    """A ``report.export.Table`` as (header, rows), cells as plain numbers and names."""
    return list(table.columns), [["" if v is None else v for v in row] for row in table.rows]


class ExportsView:
    """``action_export(fmt)`` for a Screen with ``export_table()``; the path goes to ``last_export``."""

    last_export: Path | None = None

    def export_table(self) -> tuple[str, list[str], list[list]] | str:
        raise NotImplementedError

    def action_export(self, fmt: str) -> None:
        from tracetui.report.export import write
        got = self.export_table()
        if isinstance(got, str):  # nothing to write yet: say why rather than nothing at all
            self.notify(got, severity="warning", markup=False)
            return
        stem, header, rows = got
        try:
            path = write(Path.cwd(), stem, fmt, header, rows)
        except OSError as e:
            self.notify(f"export failed: {visible(str(e))}", severity="error", markup=False)
            return
        self.last_export = path
        self.notify(f"{len(rows):,} rows written to {visible(str(path))}", title="exported", timeout=8,
                    markup=False)


def stem_of(path) -> str:
    """A trace file's name without its suffixes (``mlp_eager.json.gz`` -> ``mlp_eager``)."""
    return Path(path).name.split(".")[0]
