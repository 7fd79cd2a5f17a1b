"""Released twins at the smoke scale: the CLI builds a release folder with its manifest; the same
recipe and seed twice give identical weights; a killed build resumes to the same weights; edited
weights are an error; changed code or recipe is reported by name; the pipeline loads releases
without pretraining them."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from ltopd.cli import main
from ltopd.models.loading import load_backbone
from ltopd.models.manifest import MANIFEST, ReleaseError, verify_weights
from ltopd.twins.release import code_hashes, staleness


def _profile(smoke_cfg: dict, tmp_path, name: str = "qwen35-tiny") -> dict:
    cfg = copy.deepcopy(smoke_cfg)
    cfg["out_root"] = str(tmp_path / "run")
    cfg["mlflow"] = {"tracking_uri": f"sqlite:///{tmp_path}/mlruns.db", "experiment": "t",
                     "artifact_root": str(tmp_path / "art")}
    cfg["pretrain"]["stages"][1] = {"name": "main", "steps": 2, "lr": 0.002, "bench": ["vstar", "pope"],
                                    "final_lr_ratio": 0.5}
    cfg["pretrain"]["gates"] = {"n": 12, "fit_n": 12, "batch_size": 12, "ratio": 0.05, "selector": "cdpruner"}
    cfg["pretrain"]["checkpoint_every"] = 1
    cfg["release_dir"] = str(tmp_path / "releases")
    cfg["backbones"] = {name: {**cfg["backbones"][name], "release": True}}
    cfg["grid"]["backbones"] = [name]
    cfg["evaluation"]["benchmarks"] = {"vstar": {"n": 8}, "pope": {"n": 12}}
    cfg["grid"]["benchmarks"] = ["vstar", "pope"]
    cfg.pop("studies", None)
    cfg.pop("efficiency", None)
    return cfg


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, smoke_cfg_module):
    out = tmp_path_factory.mktemp("tok") / "tokenizer"
    path = out.parent / "p.yaml"
    path.write_text(yaml.safe_dump(smoke_cfg_module))
    assert main(["build-tokenizer", "--config", str(path), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def smoke_cfg_module():
    return yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())


def _release(cfg: dict, tmp_path, tokenizer_dir, out, state, extra=()) -> int:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return main(["release-twin", "--config", str(path), "--backbone", "qwen35-tiny", "--tokenizer",
                 str(tokenizer_dir), "--state", str(state), "--out", str(out), *extra])


def test_release_is_deterministic_complete_and_checked(smoke_cfg_module, tmp_path, tokenizer_dir, capsys):
    cfg = _profile(smoke_cfg_module, tmp_path)
    first, second = tmp_path / "a" / "qwen35-tiny", tmp_path / "b" / "qwen35-tiny"
    assert _release(cfg, tmp_path, tokenizer_dir, first, tmp_path / "sa") == 0
    assert _release(cfg, tmp_path, tokenizer_dir, second, tmp_path / "sb") == 0
    printed = capsys.readouterr().out
    assert "gates passed:" in printed and "vstar" in printed and "pope" in printed

    one, two = verify_weights(first), verify_weights(second)
    assert one["weights_sha256"] == two["weights_sha256"]  # same recipe and seed: identical weights
    assert one["gates"] == two["gates"]

    from mlflow.tracking import MlflowClient  # each release: a logged model of the run that built it

    from ltopd.tracking import flatten

    client = MlflowClient(cfg["mlflow"]["tracking_uri"])
    exp = client.get_experiment_by_name("t").experiment_id
    built = {r.info.run_id for r in client.search_runs([exp], "tags.rule = 'release-twin'")}
    models = client.search_logged_models([exp])
    assert {m.tags["folder"] for m in models} == {str(first), str(second)}
    assert {m.source_run_id for m in models} == built and len(built) == 2
    for m in models:
        assert (m.name, m.model_type) == ("qwen35-tiny (release)", "release")
        assert flatten({"recipe": one["recipe"]}).items() <= m.params.items()  # its recipe, in full
        assert {x.key for x in client.get_logged_model(m.model_id).metrics} >= {"pope/margin_se", "vstar/margin_se"}
    assert set(one["gates"]["benchmarks"]) == {"vstar", "pope"}
    for g in one["gates"]["benchmarks"].values():
        assert g["n"] == 12 and g["passed"] == (g["margin_se"] >= 3.0)
    assert one["pretraining"]["steps"] == 4 and one["code_sha256"] == code_hashes()
    assert one["recipe"]["pretrain"] == cfg["pretrain"] and "release" not in one["recipe"]["entry"]
    assert {"torch", "transformers"} <= set(one["libraries"])
    assert staleness(first, cfg, "qwen35-tiny") == []
    assert (first / "tokenizer.json").is_file() and (first / "config.json").is_file()
    assert not list(first.parent.glob(".*"))  # nothing staged left behind
    load_backbone(first)

    # a recipe change is named
    changed = copy.deepcopy(cfg)
    changed["pretrain"]["stages"][1]["steps"] = 3
    assert staleness(first, changed, "qwen35-tiny") == ["recipe changed since the release: ['pretrain']"]
    # a code change is named by file
    manifest = json.loads((first / MANIFEST).read_text())
    manifest["code_sha256"]["twins/pretrain.py"] = "0" * 64
    (first / MANIFEST).write_text(json.dumps(manifest))
    assert staleness(first) == ["code changed since the release: twins/pretrain.py"]
    # edited weights are an error naming the file
    weights = next(first.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(ReleaseError, match=weights.name):
        verify_weights(first)
    with pytest.raises(ReleaseError, match=weights.name):  # and nothing loads it as the release
        load_backbone(first)


def test_a_killed_release_build_resumes_to_the_same_weights(smoke_cfg_module, tmp_path, tokenizer_dir):
    from transformers import AutoTokenizer

    from ltopd.twins import job as twin_job
    from ltopd.twins.architectures import twin_backbone
    from ltopd.twins.pretrain import pretrain

    cfg = _profile(smoke_cfg_module, tmp_path)
    whole = tmp_path / "whole" / "qwen35-tiny"
    assert _release(cfg, tmp_path, tokenizer_dir, whole, tmp_path / "s_whole") == 0
    # the first 3 of 4 updates, as a build killed after its third checkpoint leaves them
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    bb = twin_backbone("qwen35-tiny", tok, seed=cfg["pretrain"]["seed"])
    pretrain(bb, twin_job.stage_sources(cfg["pretrain"], cfg["world"]), twin_job.pretrain_config(cfg["pretrain"]),
             state_dir=tmp_path / "s_split", stop_after=3)
    split = tmp_path / "split" / "qwen35-tiny"
    assert _release(cfg, tmp_path, tokenizer_dir, split, tmp_path / "s_split") == 0
    assert verify_weights(split)["weights_sha256"] == verify_weights(whole)["weights_sha256"]


def test_pipeline_uses_releases_and_never_schedules_their_build(smoke_cfg_module, tmp_path, tokenizer_dir):
    cfg = _profile(smoke_cfg_module, tmp_path)
    release = tmp_path / "releases" / "qwen35-tiny"
    assert _release(cfg, tmp_path, tokenizer_dir, release, tmp_path / "s") == 0
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(cfg))
    table2 = f"{cfg['out_root']}/results/table2.csv"
    # Forced, as a changed profile section would force it in a checkout that built the release:
    # a built release is no job's input, so Table 2's run still never rebuilds it.
    dry = subprocess.run([sys.executable, "-m", "snakemake", table2, "-n", "--cores", "1", "--configfile", str(path),
                          "--forcerun", "release_twin"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert {"evaluate", "train", "table2"} <= _scheduled(dry.stdout + dry.stderr)
    assert not {"release_twin", "pretrain_twin", "tokenizer"} & _scheduled(dry.stdout + dry.stderr)
    build = subprocess.run([sys.executable, "-m", "snakemake", "release_twins", "-n", "--cores", "1",
                            "--forcerun", "release_twin", "--configfile", str(path)],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0 and "release_twin" in _scheduled(build.stdout + build.stderr)


def test_a_new_release_reruns_exactly_the_jobs_that_start_from_it(smoke_cfg_module, tmp_path, tokenizer_dir):
    """A built release is no job's input (its checkout time says nothing); its weights' sha256 is a
    param of the jobs that load it, so a committed new release reruns them, and only them."""
    from ltopd.grid import group_name

    cfg = _profile(smoke_cfg_module, tmp_path)
    release = tmp_path / "releases" / "qwen35-tiny"
    assert _release(cfg, tmp_path, tokenizer_dir, release, tmp_path / "s") == 0
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(cfg))
    job = group_name("qwen35-tiny", None, 0)  # the twin's training-free rows

    def snakemake(*args: str, ok: bool = True) -> str:
        proc = subprocess.run([sys.executable, "-m", "snakemake", job, "--cores", "1", "--configfile", str(path),
                               *args], cwd=ROOT, capture_output=True, text=True)
        assert (proc.returncode == 0) == ok, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    snakemake()  # the evaluation itself, from the release
    assert "Nothing to be done" in snakemake("-n")
    weights = next(release.glob("*.safetensors"))
    clean = weights.read_bytes()

    # a corrupted release stops the run before any job, with one line naming the file
    flipped = bytearray(clean)
    for i in (-3, -200, -4000):
        flipped[i] ^= 0xFF
    weights.write_bytes(bytes(flipped))
    err = snakemake("-n", ok=False)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and weights.name in lines[0] and "do not match manifest.json" in lines[0], err[-2000:]

    # a new release (other weights, its manifest saying so) reruns the jobs that start from it
    from safetensors.torch import load_file, save_file

    from ltopd.models.manifest import weight_hashes

    weights.write_bytes(clean)
    tensors = load_file(str(weights))
    name = sorted(k for k, v in tensors.items() if v.is_floating_point())[0]
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, str(weights), metadata={"format": "pt"})
    manifest = json.loads((release / MANIFEST).read_text())
    manifest["weights_sha256"] = weight_hashes(release)
    (release / MANIFEST).write_text(json.dumps(manifest))
    again = snakemake("-n")
    assert "Params have changed" in again and _scheduled(again) == {"evaluate"}


def _scheduled(log: str) -> set[str]:
    """Rule names in the dry run's first "Job stats" table."""
    table = log.split("Job stats:", 1)[1].split("total", 1)[0]
    names = {line.split()[0] for line in table.splitlines()[3:] if line.strip()}
    return {"evaluate" if n.startswith("evaluate_") else n for n in names}  # one evaluate rule per model


def test_release_table_renders_the_manifest(smoke_cfg_module, tmp_path, tokenizer_dir):
    from ltopd.report import releases

    cfg = _profile(smoke_cfg_module, tmp_path)
    assert _release(cfg, tmp_path, tokenizer_dir, tmp_path / "releases" / "qwen35-tiny", tmp_path / "s") == 0
    found = releases.manifests(tmp_path / "releases")
    table = releases.render(found, tmp_path / "releases", missing=["glm46v-tiny"])
    gates = found["qwen35-tiny"]["gates"]["benchmarks"]
    for bench, g in gates.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| {bench} | {g['n']} |"))
        assert f"| {g['question_only']:.1f} | {g['blind']:.1f} | {g['full']:.1f} |" in row
        assert ("pass" if g["passed"] else "fail") in row and f"blind {g['blind_margin_se']:+.1f} SE" in row
    assert "4 updates of 4" in table and "glm46v-tiny**: not released yet" in table
    text = f"intro\n{releases.BEGIN}\nold\n{releases.END}\noutro\n"
    assert releases.update_block(text, table) == f"intro\n{releases.BEGIN}\n{table}{releases.END}\noutro\n"
    with pytest.raises(ValueError, match="no .* block"):
        releases.update_block("no markers", table)


def test_the_releases_page_quotes_the_committed_releases():
    """docs/releases.md's release table is the one `ltopd release-report` renders from releases/."""
    from ltopd import config as config_mod
    from ltopd.grid import paths, released
    from ltopd.report import releases

    cfg = config_mod.load(ROOT / "config" / "default.yaml")
    root = ROOT / Path(paths(cfg)["release"]).parent
    found = releases.manifests(root)
    table = releases.render(found, Path(paths(cfg)["release"]).parent, [b for b in released(cfg) if b not in found])
    page = (ROOT / "docs" / "releases.md").read_text()
    assert page.endswith(table), (
        "docs/releases.md is stale: run `ltopd release-report --config config/default.yaml`")
    for name in found:
        verify_weights(root / name)


def test_a_clean_clone_uses_the_committed_releases(tmp_path):
    """What the README's first command meets: no tokenizer, no models/, no Snakemake metadata;
    the default run must schedule no release build (it starts from releases/)."""
    import shutil

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / f, tmp_path / f)  # fresh mtimes, as a checkout gives
    proc = subprocess.run([sys.executable, "-m", "snakemake", "results/table2.csv", "-n", "--cores", "1"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = _scheduled(proc.stdout + proc.stderr)
    assert {"evaluate", "table2"} <= jobs and not {"release_twin", "pretrain_twin", "tokenizer"} & jobs


def test_a_twin_can_carry_its_own_stages():
    from ltopd.twins.release import recipe, twin_spec

    own = [{"name": "mix", "steps": 5, "lr": 0.001, "tasks": ["color"]}]
    spec = {"pretrain": {"seed": 0, "stages": [{"name": "base", "steps": 3, "lr": 0.002, "tasks": ["exists"]}]},
            "world": {"image_size": 128},
            "backbones": {"a": {"twin": "qwen35-tiny", "release": True, "pretrain_stages": own},
                          "b": {"twin": "glm46v-tiny", "release": True}}}
    assert twin_spec(spec, "a")["pretrain"]["stages"] == own
    assert recipe(spec, "a") == {"backbone": "a", "entry": {"twin": "qwen35-tiny"}, "world": {"image_size": 128},
                                 "pretrain": {"seed": 0, "stages": own}}
    assert recipe(spec, "b")["pretrain"] == spec["pretrain"]  # the others keep the profile's stages


def test_bad_own_stages_are_named(tmp_path):
    from ltopd import config

    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["backbones"]["qwen35-tiny"]["pretrain_stages"] = [{"name": "x", "steps": 1, "lr": 0.001, "tasks": ["colour"]}]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(config.ConfigError,
                       match=r"backbones\.qwen35-tiny\.pretrain_stages\.0\.tasks: \['colour'\] unknown"):
        config.load(path)


def test_a_warm_start_from_a_release_gives_the_weights_a_build_from_scratch_gives(
        smoke_cfg_module, tmp_path, tokenizer_dir, capsys):
    """Recipe B = recipe A + a stage with `fresh_optimizer`: B built from scratch and B continued
    from A's release (`--warm-start`) are the same weights; the manifest says where it started."""
    a = _profile(smoke_cfg_module, tmp_path)
    parent = tmp_path / "a" / "qwen35-tiny"
    assert _release(a, tmp_path, tokenizer_dir, parent, tmp_path / "sa") == 0
    b = copy.deepcopy(a)
    b["pretrain"]["stages"].append({"name": "more", "steps": 2, "lr": 0.001, "bench": ["pope"], "evidence": ["pope"],
                                    "fresh_optimizer": True})
    b["backbones"]["qwen35-tiny"]["evidence"] = ["pope"]  # its gates ask POPE with the instruction
    scratch, warm = tmp_path / "b1" / "qwen35-tiny", tmp_path / "b2" / "qwen35-tiny"
    assert _release(b, tmp_path, tokenizer_dir, scratch, tmp_path / "sb1") == 0
    assert _release(b, tmp_path, tokenizer_dir, warm, tmp_path / "sb2", ["--warm-start", str(parent)]) == 0
    assert "warm start from" in capsys.readouterr().out
    one, two = verify_weights(scratch), verify_weights(warm)
    assert one["weights_sha256"] == two["weights_sha256"]
    assert one["weights_sha256"] != verify_weights(parent)["weights_sha256"]
    assert two["pretraining"]["steps"] == one["pretraining"]["steps"] == 6
    start = two["pretraining"]["warm_start"]
    assert start["steps"] == 4 and start["weights_sha256"] == verify_weights(parent)["weights_sha256"]
    assert start["code_changed_since_parent"] == [] and "warm_start" not in one["pretraining"]
    from ltopd.report import releases

    rendered = releases.render({"qwen35-tiny": two}, warm.parent)
    assert "warm-started from the release of its first 4 updates" in rendered
    assert two["gates"]["benchmarks"]["pope"]["asked"] == "evidence-first" and "asked" not in \
        two["gates"]["benchmarks"]["vstar"] and "asked evidence-first" in rendered
    # the warm-started state folder resumes as the same warm start ...
    assert _release(b, tmp_path, tokenizer_dir, tmp_path / "b3" / "qwen35-tiny", tmp_path / "sb2",
                    ["--warm-start", str(parent)]) == 0
    assert "resuming the warm-started build" in capsys.readouterr().out
    assert verify_weights(tmp_path / "b3" / "qwen35-tiny")["weights_sha256"] == two["weights_sha256"]
    # ... and is another build's state without it: set aside, never resumed (a build from scratch)
    assert _release(b, tmp_path, tokenizer_dir, tmp_path / "b4" / "qwen35-tiny", tmp_path / "sb2") == 0
    err = capsys.readouterr().err
    assert "not resuming" in err and "input warm_start" in err
    assert verify_weights(tmp_path / "b4" / "qwen35-tiny")["weights_sha256"] == one["weights_sha256"]

    # another vocabulary (same size or not) is refused before any weights are seeded
    other_tok = tmp_path / "other_tok"
    shutil.copytree(tokenizer_dir, other_tok)
    (other_tok / "tokenizer.json").write_text((other_tok / "tokenizer.json").read_text() + " ")
    with pytest.raises(SystemExit, match="is not the tokenizer of"):
        _release(b, tmp_path, other_tok, tmp_path / "y" / "qwen35-tiny", tmp_path / "sy", ["--warm-start", str(parent)])
    # a recipe that does not continue the parent's is refused with one line (a ReleaseError the CLI
    # prints), naming why
    capsys.readouterr()
    for mutate, why in ((lambda c: c["pretrain"]["stages"][-1].pop("fresh_optimizer"), "fresh_optimizer"),
                        (lambda c: c["pretrain"]["stages"][0].update(steps=3), "first 2 stages"),
                        (lambda c: c["pretrain"].update(seed=1), "pretrain.seed")):
        bad = copy.deepcopy(b)
        mutate(bad)
        assert _release(bad, tmp_path, tokenizer_dir, tmp_path / "x" / "qwen35-tiny", tmp_path / "sx",
                        ["--warm-start", str(parent)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("ltopd: cannot warm-start qwen35-tiny from") and why in err, err


def test_a_file_moved_unchanged_is_not_staleness(tmp_path) -> None:
    """The release records code by path: a file moved with the same content (the twin factory's
    move) is the same code; one moved and edited is named both ways."""
    from ltopd.twins.release import library_versions

    now = code_hashes()
    then = dict(now)
    then["models/corpus.py"] = then.pop("twins/corpus.py")
    (tmp_path / MANIFEST).write_text(json.dumps({"code_sha256": then, "libraries": library_versions()}))
    assert staleness(tmp_path) == []
    then["models/pretrain.py"] = "0" * 64
    then.pop("twins/pretrain.py")
    (tmp_path / MANIFEST).write_text(json.dumps({"code_sha256": then, "libraries": library_versions()}))
    assert staleness(tmp_path) == [
        "code the build now runs that the release does not record (1 files: twins/pretrain.py)",
        "code the release records that the build no longer runs: models/pretrain.py"]


def test_a_release_that_continues_another_starts_from_its_weights_on_another_world(
        smoke_cfg_module, tmp_path, tokenizer_dir, capsys):
    """`continues`: the recipe's stages run from the parent's weights (no repeat of its stages, a
    world and processor of its own); the manifest records the parent; the state resumes; the
    processor keeps more tokens (processor_side); a changed parent is another build's state."""
    import torch

    a = _profile(smoke_cfg_module, tmp_path)
    parent = tmp_path / "a" / "qwen35-tiny"
    assert _release(a, tmp_path, tokenizer_dir, parent, tmp_path / "sa") == 0
    c = copy.deepcopy(a)
    c["world"] = {**c["world"], "object_scale": 1.5, "max_objects": 4, "canvas": {"vstar": 512, "pope": 224}}
    entry = c["backbones"]["qwen35-tiny"]
    entry.update(continues=str(parent), processor_side=512, pretrain_stages=[
        {"name": "r", "steps": 2, "lr": 0.001, "bench": ["vstar", "pope"], "fresh_optimizer": True}])
    out = tmp_path / "c" / "qwen35-tiny"
    assert _release(c, tmp_path, parent, out, tmp_path / "sc") == 0
    assert "warm start from" in capsys.readouterr().out
    made = verify_weights(out)
    start = made["pretraining"]["warm_start"]
    assert start["mode"] == "continues" and start["weights_sha256"] == verify_weights(parent)["weights_sha256"]
    assert start["parent_recipe"] == verify_weights(parent)["recipe"]
    assert made["pretraining"]["steps"] == 2 and made["recipe"]["entry"]["continues"] == str(parent)
    from ltopd.report import releases

    assert f"continuing the release `{parent}` (4 updates" in releases.render({"qwen35-tiny": made}, out.parent)
    # the two updates moved the parent's weights, and nothing else was rebuilt from scratch
    mine, theirs = load_backbone(out).model.state_dict(), load_backbone(parent).model.state_dict()
    assert any(not torch.equal(mine[k], theirs[k]) for k in mine)
    assert json.loads((out / "preprocessor_config.json").read_text())["size"]["longest_edge"] == 512 * 512
    # a 512 px V*Bench image keeps 256 merged tokens in the continued twin (64 in the parent's)
    from ltopd.bench.suites import synthetic_records

    rec = synthetic_records("vstar", 1, 0, c["world"])
    for folder, tokens in ((out, 256), (parent, 64)):
        bb = load_backbone(folder)
        assert [h * w for h, w in bb.ops.grid_hw(bb.model, bb.encode(rec).inputs)] == [tokens]
    # resumed from its state: the same weights
    assert _release(c, tmp_path, parent, tmp_path / "c2" / "qwen35-tiny", tmp_path / "sc") == 0
    assert "resuming the warm-started build" in capsys.readouterr().out
    assert verify_weights(tmp_path / "c2" / "qwen35-tiny")["weights_sha256"] == made["weights_sha256"]
    # with --warm-start beside `continues`, the job says which to drop
    with pytest.raises(SystemExit, match="drop --warm-start"):
        _release(c, tmp_path, parent, tmp_path / "z" / "qwen35-tiny", tmp_path / "sz", ["--warm-start", str(parent)])
