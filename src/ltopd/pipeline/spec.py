"""What every job reads first: its config sections and its MLflow settings."""
from __future__ import annotations

import argparse
import json
from typing import Any

from ltopd.tracking import Settings


def job_inputs(args: argparse.Namespace, sections: tuple[str, ...],
               optional: tuple[str, ...] = ()) -> tuple[dict[str, Any], Settings]:
    """(spec, MLflow settings) from --spec (Snakemake) or --config (by hand); ``optional``
    sections a profile may leave out read as {}."""
    from ltopd import config as config_mod

    if getattr(args, "config", None):
        cfg = config_mod.load(args.config)
        spec, settings = {"profile": cfg["profile"], **{k: cfg[k] for k in sections}}, Settings.from_config(cfg)
        return {**spec, **{k: cfg.get(k) or {} for k in optional}}, settings
    if not args.spec:
        raise SystemExit("give --config PROFILE.yaml or --spec JSON")
    spec = json.loads(args.spec)
    missing = [k for k in ("profile", *sections) if k not in spec]
    if missing:
        raise SystemExit(f"--spec lacks section(s) {missing}")
    return {**spec, **{k: spec.get(k) or {} for k in optional}}, Settings.from_env()


def numbers(d: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a (nested) metrics dict, keys joined with '/' (MLflow metric names)."""
    out: dict[str, float] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(numbers(v, f"{name}/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[name] = float(v)
    return out


def add_source(s: argparse.ArgumentParser, rule: str) -> None:
    """The arguments every pipeline job takes: its settings from a profile (`--config`, by hand) or
    from Snakemake (`--spec`: the config sections the job depends on), and its MLflow rule name."""
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--config", help="profile YAML (run by hand)")
    g.add_argument("--spec", help="JSON of the config sections the job depends on (from Snakemake)")
    s.add_argument("--rule", default=rule)
