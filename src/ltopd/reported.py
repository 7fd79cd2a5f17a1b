"""The paper's reported numbers (paper_numbers.yaml), the rows we print beside our own."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml


@cache
def paper_numbers() -> dict[str, Any]:
    return yaml.safe_load(resources.files("ltopd").joinpath("paper_numbers.yaml").read_text())


def paper_rows(table: str) -> list[dict[str, Any]]:
    """The paper's rows of ``table`` (e.g. 'table2'), each a dict with method, budget, values."""
    tables = paper_numbers()
    if table not in tables:
        raise KeyError(f"no reported numbers for {table!r}; known: {sorted(tables)}")
    return [dict(r) for r in tables[table]["rows"]]


def paper_backbone(table: str) -> str:
    """The backbone the paper's ``table`` reports."""
    return paper_numbers()[table].get("backbone", "Qwen3.5-4B")
