"""The profile's external students checked before any job: the Snakefile's parse and `ltopd
validate` (kept out of config.py, which every job imports: the check reads model architectures,
and a job's code inputs are what it can import)."""
from __future__ import annotations

from typing import Any


def external_student_problems(cfg: dict[str, Any]) -> list[str]:
    """One line per external student whose folder does not match its backbone's family (wrong
    architecture, missing weights, another vocabulary or processor than the backbone's folder where
    that exists: ltopd.models.external.check_student), naming its key. Empty without any."""
    students = cfg.get("external_students") or {}
    if not students:
        return []
    from ltopd.grid import model_path
    from ltopd.models.external import ExternalError, check_student

    out = []
    for name, e in students.items():
        try:
            check_student(e["path"], cfg["backbones"][e["backbone"]]["family"], model_path(cfg, e["backbone"]))
        except ExternalError as err:
            out.append(f"external_students.{name}: {err}")
    return out
