"""`ltopd table5 measure|build`: the Appendix E protocol on one backbone, then Table 5;
`ltopd prefill-costs`: the measured prefill of every Table 2 row (the Pareto figure's costs).

Wired into ltopd.cli as the `table5` and `prefill-costs` subcommands (add_parser + run):
``ltopd table5 build --config config/default.yaml --measurements ... --out ... --markdown ...``.
"""

from __future__ import annotations

import argparse
from typing import Any

# The profile sections of the student modules a measured row attaches (ltopd.efficiency.latency.MODULES).
MODULE_SECTIONS = ("llava_mini", "learnable_merge")

# Used when a profile has no `efficiency` section (the schema's defaults should say the same); its
# `methods` (Table 5's rows) the profile names.
DEFAULTS: dict[str, Any] = {
    "benchmark": "textvqa",
    "questions": 4,
    "min_answer_tokens": 6,
    "repeats": 5,
    "ref_tokens": 128,
    "warmup": 1,
    "analytic_config": "config/models/qwen3_5_4b.json",
    "device": "cpu",
    "dtype": "float32",
    "profile_flops": True,
    "torch_threads": 1,  # the twins' matrices are tiny: more threads only add contention to the timing
    "prefill_repeats": 3,  # timed prefills per question and Table 2 row (ltopd prefill-costs)
}


def settings(spec: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **(spec.get("efficiency") or {})}


def methods(names: list[str], budget: float, train_selector: str | None) -> list[Any]:
    """Table rows: `full` keeps everything; a selector name keeps `budget` with that selector;
    `ltopd` (or any trained method) is the student's inference: its training selector (the
    profile's, ltopd.grid.reduction_defaults) at `budget`, with the student module it runs
    (LLaVA-Mini's, the learnable merge: a method named as its module)."""
    from ltopd.efficiency.latency import MODULES, Method
    from ltopd.grid import eval_setting

    out = []
    for name in names:
        ratio, selector = eval_setting(name, 1.0 if name == "full" else budget, train_selector)
        out.append(Method(name, ratio, selector, name if name in MODULES else None))
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from ltopd.pipeline.spec import add_source

    p = subparsers.add_parser("table5", help="efficiency (Table 5): measure one backbone, or build the table")
    actions = p.add_subparsers(dest="table5_action", required=True)
    for name, help in (("measure", "run the Appendix E protocol on one backbone -> JSON"),
                       ("build", "results/table5.csv/.md from measurements + the analytic Qwen3.5-4B rows")):
        s = actions.add_parser(name, help=help)
        add_source(s, f"table5_{name}")
        if name == "measure":
            s.add_argument("--backbone", required=True)
            s.add_argument("--model", required=True, help="model folder (twin or checkpoint)")
            s.add_argument("--records", required=True, help="TextVQA records folder (build-bench output)")
            s.add_argument("--budget", type=float, required=True, help="reduced rows keep this fraction")
            s.add_argument("--seed", type=int, default=0)
            s.add_argument("--out", required=True, help="measurement JSON")
            s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
        else:
            s.add_argument("--measurements", nargs="*", default=[], help="JSON files of `table5 measure`")
            s.add_argument("--analytic-config", help="HF-style config of the analytic rows (default: profile's)")
            s.add_argument("--out", required=True, help="CSV")
            s.add_argument("--markdown", required=True)
    p.set_defaults(func=run)

    s = subparsers.add_parser("prefill-costs", help="the measured prefill time and KV cache of every Table 2 row "
                              "(method x budget) on one backbone -> JSON (the Pareto figure's costs)")
    add_source(s, "prefill_costs")
    s.add_argument("--backbone", required=True)
    s.add_argument("--model", required=True, help="model folder (twin or checkpoint): Table 2's base model")
    s.add_argument("--records", required=True, help="records folder of efficiency.benchmark (build-bench output)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="measurement JSON")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    s.set_defaults(func=prefill_costs)
    return p


def table2_rows(spec: dict[str, Any]) -> list[tuple[str, float]]:
    """Table 2's (method, budget) rows on its backbone (the grid's first), in grid order; the
    blind twin, which sees no image, is no point of a cost curve."""
    from ltopd.catalog import METHODS
    from ltopd.grid import grid_jobs, table2_methods

    first, keep = spec["grid"]["backbones"][0], set(table2_methods(spec))
    return list(dict.fromkeys((j.method, j.budget) for j in grid_jobs(spec)
                              if j.backbone == first and j.method in keep and METHODS[j.method].images))


def computation(point: Any) -> str:
    """A cost point in words (the CSV's `computation`: rows that share one share its cost)."""
    what = (f"resized to {point.ratio:g} of the tokens" if point.resized
            else f"{point.selector} keeps {point.ratio:g}" if point.selector else "all tokens")
    return what + (f" + {point.module} module" if point.module else "")


def _inputs(args: argparse.Namespace, sections: tuple[str, ...]):
    """(spec, MLflow settings) as for every ltopd job; a missing `efficiency` section means DEFAULTS."""
    from ltopd.pipeline.spec import job_inputs as _job_inputs

    return _job_inputs(args, sections, optional=("efficiency", "training", *MODULE_SECTIONS))


def _student_selector(spec: dict[str, Any]) -> str:
    """The students' selector (Table 5's LT-OPD rows) from the spec's training section."""
    from ltopd.grid import reduction_defaults

    selector = reduction_defaults(spec).selector
    if selector is None:
        raise SystemExit("Table 5's LT-OPD rows reduce with training.selector: the profile (or --spec) has none")
    return selector


def _device(eff: dict[str, Any]) -> str:
    """The protocol's device: the profile's, or CUDA when "auto" finds one."""
    import torch

    return eff["device"] if eff["device"] != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def _load_measured(args: argparse.Namespace, run: Any, eff: dict[str, Any]) -> tuple[Any, list[dict], str]:
    """The model on the protocol's device and dtype, and its records, both logged as the run's
    inputs (the cost measured is the model's): (backbone, records, logged model id)."""
    import torch

    from ltopd.bench.store import load_saved
    from ltopd.lineage import records_name, use_dataset, use_model
    from ltopd.models.loading import load_backbone

    backbone = load_backbone(args.model)
    backbone.model.to(device=_device(eff), dtype=getattr(torch, eff["dtype"]))
    records = load_saved(args.records)
    use_dataset(run, records_name(args.records), args.records, "efficiency", {"rows": len(records)})
    return backbone, records, use_model(run, args.model)


def measure(args: argparse.Namespace) -> int:
    import torch

    from ltopd.atomic import write_json
    from ltopd.efficiency.analytic import TextArch, kv_cache, prefill_flops
    from ltopd.efficiency.latency import Protocol
    from ltopd.efficiency.latency import measure as run_protocol
    from ltopd.grid import reduction_defaults
    from ltopd.tracking import job_run

    torch.set_num_threads(args.threads)
    spec, tracking = _inputs(args, ("reduction",))
    eff = settings(spec)
    protocol = Protocol.from_config(eff)
    defaults = reduction_defaults(spec)  # the floor; the students' selector for trained rows (LT-OPD)
    rows = methods(list(eff["methods"]), args.budget, defaults.selector)
    floor = defaults.floor
    key = {"backbone": args.backbone}
    with job_run(tracking, args.rule, key, spec, inputs={"model": args.model, "records": args.records}) as run:
        backbone, records, model_id = _load_measured(args, run, eff)
        device = _device(eff)
        results = run_protocol(backbone, records, rows, protocol, floor=floor, seed=args.seed,
                               profile_flops=bool(eff["profile_flops"]), sections=spec)
        arch = TextArch.from_config(backbone.model.config, name=args.backbone)
        element = torch.tensor([], dtype=getattr(torch, eff["dtype"])).element_size()
        out = []
        for r in results:
            d = r.as_dict()
            d["analytic_flops"] = (sum(prefill_flops(arch, n).total for n in r.per_question_tokens)
                                   / len(r.per_question_tokens))
            d["analytic_kv_bytes"] = kv_cache(arch, r.prefill_tokens, element).kv_bytes
            out.append(d)
            run.log_metrics({f"{r.method.name}/latency_ms": r.latency_ms, f"{r.method.name}/kv_bytes": r.kv_bytes,
                             f"{r.method.name}/prefill_tokens": r.prefill_tokens}, model_id=model_id)
        write_json(args.out, {"backbone": args.backbone, "model": args.model, "device": str(device),
                              "dtype": eff["dtype"], "budget": args.budget, "floor": floor,
                              "protocol": protocol.__dict__, "arch": {k: v for k, v in arch.__dict__.items()
                                                                       if k != "extra"},
                              "results": out})
    for d in out:
        print(f"{args.backbone} {d['method']} (keep {d['ratio']:g}): {d['latency_ms']:.1f} ms over "
              f"{d['questions']} questions, {d['prefill_tokens']:.1f} prefill tokens, KV {d['kv_bytes']:.0f} B")
    return 0


def build(args: argparse.Namespace) -> int:
    from ltopd.atomic import atomic_file
    from ltopd.efficiency import table5
    from ltopd.efficiency.analytic import TextArch
    from ltopd.tracking import job_run

    spec, tracking = _inputs(args, ())
    eff = settings(spec)
    arch = TextArch.from_file(args.analytic_config or eff["analytic_config"])
    selector = _student_selector(spec)
    with job_run(tracking, args.rule, {}, spec) as run:
        rows = table5.build(arch, table5.load_measurements(args.measurements), selector)
        with atomic_file(args.out) as fh:
            fh.write(table5.to_csv(rows))
        md = table5.to_markdown(rows, table5.notes(rows, arch))
        with atomic_file(args.markdown) as fh:
            fh.write(f"# Table 5 ({spec['profile']} profile)\n\n" + md)
        for r in rows:
            if r["source"] != "paper" and r["flops_ratio"] is not None:
                run.log_metrics({f"{r['source']}/{r['backbone']}/{r['method']}/flops_ratio": r["flops_ratio"]})
        run.log_artifact(args.out)
        run.log_artifact(args.markdown)
    print(md)
    return 0


def prefill_costs(args: argparse.Namespace) -> int:
    import torch

    from ltopd.atomic import write_json
    from ltopd.efficiency.latency import Protocol
    from ltopd.efficiency.prefill import clock_name, cost_point
    from ltopd.efficiency.prefill import measure as run_prefill
    from ltopd.grid import reduction_defaults
    from ltopd.tracking import job_run

    torch.set_num_threads(args.threads)
    spec, tracking = _job_inputs(args, ("grid", "seeds", "reduction"),
                                 optional=("efficiency", "training", *MODULE_SECTIONS))
    eff = settings(spec)
    protocol = Protocol.from_config(eff)
    defaults = reduction_defaults(spec)
    rows = table2_rows(spec)
    points = {row: cost_point(*row, defaults.selector) for row in rows}
    key = {"backbone": args.backbone}
    with job_run(tracking, args.rule, key, spec, inputs={"model": args.model, "records": args.records}) as run:
        backbone, records, model_id = _load_measured(args, run, eff)
        device = _device(eff)
        costs = run_prefill(backbone, records, list(points.values()), protocol, floor=defaults.floor,
                            repeats=int(eff["prefill_repeats"]), seed=args.seed, sections=spec)
        by_point = {c.point: c.as_dict() for c in costs}
        out = [{"method": m, "budget": b, "computation": computation(points[(m, b)]), **by_point[points[(m, b)]]}
               for m, b in rows]
        for r in out:
            run.log_metrics({f"{r['method']}/{r['budget']:g}/prefill_ms": r["prefill_ms"],
                             f"{r['method']}/{r['budget']:g}/kv_bytes": r["kv_bytes"]}, model_id=model_id)
        write_json(args.out, {"backbone": args.backbone, "model": args.model, "device": str(device),
                              "dtype": eff["dtype"], "clock": clock_name(torch.device(device)), "floor": defaults.floor,
                              "repeats": int(eff["prefill_repeats"]), "protocol": protocol.__dict__,
                              "distinct_computations": len(costs), "rows": out})
    for r in out:
        print(f"{args.backbone} {r['method']} at {r['budget']:g} ({r['computation']}): "
              f"prefill {r['prefill_ms']:.2f} ms over {r['questions']} questions, "
              f"{r['prefill_tokens']:.1f} tokens, KV {r['kv_bytes']:.0f} B")
    return 0


def _job_inputs(args: argparse.Namespace, sections: tuple[str, ...], optional: tuple[str, ...]):
    from ltopd.pipeline.spec import job_inputs

    return job_inputs(args, sections, optional=optional)


def run(args: argparse.Namespace) -> int:
    return {"measure": measure, "build": build}[args.table5_action](args)
