"""Text / JSON / CSV / Markdown renderings of model, compare and jobs results. No Textual here."""
