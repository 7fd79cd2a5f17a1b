"""Loaders of the real benchmarks from local files into records the official scorers read.

Formats (chosen by the path):
* a VLMEvalKit TSV (``.tsv``): columns ``index``, ``image`` (base64; a short number instead
  refers to the row of that index, VLMEvalKit's way of not repeating an image; a list literal
  of base64 strings for multi-image rows), ``question``, option columns ``A``, ``B``, ...,
  ``answer``, ``category``, ``l2-category``, ``split``, ``hint``, ...;
* a ``datasets`` dataset saved with ``save_to_disk`` (first split of a DatasetDict), or
  ``.parquet`` files / a folder of them (lmms-eval style): images in ``image``, ``images``,
  ``image_list``, ``frames`` or ``image_1`` .. ``image_7``; options in ``options`` /
  ``choices`` / ``candidates`` (a list or its string literal) or letter columns.

Per benchmark, the columns the scorer needs are mapped onto record fields (stored in ``meta``);
a missing one raises :class:`RealFormatError` naming the file and the column.
"""

from __future__ import annotations

import ast
import base64
import csv
import io
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

IMAGE_COLUMNS = ("image", "images", "image_list", "frames")
OPTION_COLUMNS = ("options", "choices", "candidates")
POPE_SPLITS = ("adversarial", "popular", "random")
GROUP_MODULUS = 1_000_000
LETTER_BENCHMARKS = ("vstar", "hrbench4k", "mmbench", "muirbench", "mvbench")


class RealFormatError(ValueError):
    """A benchmark file is unreadable or lacks a column its scorer needs (one line: the file, the
    row and the field; `ltopd.cli` prints it without a traceback)."""

    one_line = True


# ------------------------------------------------------------------ reading rows

def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a TSV, a saved dataset, or parquet file(s), as dicts."""
    path = Path(path)
    if not path.exists():
        raise RealFormatError(f"{path}: no such file or folder")
    if path.is_file() and path.suffix.lower() == ".tsv":
        csv.field_size_limit(sys.maxsize)  # base64 images exceed csv's default field limit
        with path.open(newline="", encoding="utf-8") as f:
            return [dict(row) for row in csv.DictReader(f, delimiter="\t")]
    import datasets

    if path.is_file() and path.suffix.lower() == ".parquet":
        files = [str(path)]
    elif path.is_dir() and not (path / "dataset_info.json").exists() \
            and not (path / "dataset_dict.json").exists():
        files = sorted(str(p) for p in path.rglob("*.parquet"))
        if not files:
            raise RealFormatError(f"{path}: neither a saved dataset nor a folder of .parquet files")
    else:
        if path.is_file():
            raise RealFormatError(f"{path}: unknown format (expected .tsv, .parquet or a folder)")
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            ds = ds[next(iter(ds))]
        return [dict(row) for row in ds]
    return [dict(row) for row in datasets.load_dataset("parquet", data_files=files, split="train")]


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value) \
        or (isinstance(value, str) and value.strip().lower() in ("", "nan", "none"))


def _present(value: Any) -> bool:
    return isinstance(value, (list, tuple, Image.Image, dict, bytes, bytearray)) \
        or not _blank(value)


def _as_list(value: Any) -> list:
    """A list from a list, a tuple, or a string holding a Python / JSON list literal."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = json.loads(value)
        return list(parsed)
    return [value]


def _decode(value: Any, where: str) -> Image.Image:
    """The image a cell holds, decoded now (a file that does not decode fails here, naming the row
    and the field, not in an evaluation job hours later)."""
    try:
        return _open(value, where).convert("RGB")
    except RealFormatError:
        raise
    except Exception as e:  # noqa: BLE001 -- PIL's errors for bytes that are no image, or cut short
        raise RealFormatError(f"{where}: image does not decode ({type(e).__name__}: {str(e)[:120]})") from e


def _open(value: Any, where: str) -> Image.Image:
    if isinstance(value, Image.Image):
        img = value
    elif isinstance(value, dict) and value.get("bytes"):
        img = Image.open(io.BytesIO(value["bytes"]))
    elif isinstance(value, dict) and value.get("path"):
        img = Image.open(value["path"])
    elif isinstance(value, (bytes, bytearray)):
        img = Image.open(io.BytesIO(value))
    elif isinstance(value, str):
        try:
            img = Image.open(io.BytesIO(base64.b64decode(value)))
        except Exception as e:  # noqa: BLE001 -- any decoding failure is a format error
            raise RealFormatError(f"{where}: image does not decode (neither base64 of an image nor a row "
                                  "reference)") from e
    else:
        raise RealFormatError(f"{where}: cannot read an image from a {type(value).__name__}")
    return img


class _Images:
    """Images of each row, following VLMEvalKit's short-number references to other rows."""

    def __init__(self, rows: list[dict], where: str) -> None:
        self.rows, self.where = rows, where
        self.by_index = {str(r.get("index")): r for r in rows if "index" in r}
        sample = rows[0]
        self.columns = [c for c in IMAGE_COLUMNS if c in sample] or \
            sorted(c for c in sample if c.startswith("image_") and c[6:].isdigit())
        if not self.columns:
            raise RealFormatError(f"{where}: missing column 'image' (or images / image_list / "
                                  f"frames / image_1..); available: {sorted(sample)}")

    def owner(self, row: dict) -> str | None:
        """Index of the row whose image ``row`` points to (its own if it holds one)."""
        cell = row.get(self.columns[0])
        if isinstance(cell, str) and cell.strip().isdigit() and len(cell.strip()) <= 64:
            return cell.strip()
        return None if _blank(row.get("index")) else str(row.get("index"))

    def of(self, row: dict, where: str | None = None) -> list[Image.Image]:
        out: list[Image.Image] = []
        for col in self.columns:
            cell = row.get(col)
            if not _present(cell):
                continue
            if isinstance(cell, str) and cell.strip().isdigit() and len(cell.strip()) <= 64:
                target = self.by_index.get(cell.strip())
                if target is None:
                    raise RealFormatError(f"{self.where}: image refers to missing index {cell}")
                cell = target[col]
            out += [_decode(v, f"{where or self.where}, field '{col}'") for v in _as_list(cell) if _present(v)]
        if not out:
            raise RealFormatError(f"{where or self.where}: row {row.get('index')} has no image")
        return out


def _options(row: dict) -> list[str]:
    letters = []
    for i in range(26):
        value = row.get(chr(ord("A") + i))
        if _blank(value):
            break
        letters.append(str(value))
    if letters:
        return letters
    for col in OPTION_COLUMNS:
        if _present(row.get(col)):
            return [str(o) for o in _as_list(row[col])]
    return []


def _letter(answer: Any, options: list[str], where: str) -> str:
    """The answer as an option letter ("B", "(B)", "B." or the text of option B)."""
    text = str(answer).strip()
    core = text.strip("().").strip()
    if len(core) == 1 and core.isalpha() and ord(core.upper()) - ord("A") < max(1, len(options)):
        return core.upper()
    for i, option in enumerate(options):
        if text.lower() == option.strip().lower():
            return chr(ord("A") + i)
    raise RealFormatError(f"{where}, field 'answer': {text!r} is neither an option letter nor an option")


def _answer(row: dict, name: str, where: str) -> Any:
    """The reference answer: text (or a list of texts for TextVQA's answers), of the type the
    benchmark's scorer reads."""
    col = _need(row, ("answer", "answers"), where, "the reference")
    value = row[col]
    single = name in LETTER_BENCHMARKS or name == "pope"
    if isinstance(value, bool) or not isinstance(value, (str, int, list, tuple)) \
            or (isinstance(value, (list, tuple)) and (single or not all(isinstance(v, str) for v in value))):
        raise RealFormatError(f"{where}, field '{col}': expected {'text' if single else 'text or a list of texts'}, "
                              f"got {type(value).__name__} {str(value)[:40]!r}")
    if name == "pope" and str(value).strip().lower() not in ("yes", "no"):
        raise RealFormatError(f"{where}, field '{col}': POPE's answer must be yes or no, got {str(value)[:40]!r}")
    return value


def _need(row: dict, columns: tuple[str, ...], where: str, purpose: str) -> str:
    """The first of ``columns`` present in ``row`` (error naming them otherwise)."""
    for col in columns:
        if col in row:
            return col
    raise RealFormatError(f"{where}: missing column {' / '.join(repr(c) for c in columns)} "
                          f"({purpose}); available: {sorted(row)}")


# ------------------------------------------------------------------ per-benchmark fields

Extra = Callable[[dict, dict, str], dict]  # (row, partial record, where) -> meta fields


def _category(columns: tuple[str, ...], key: str) -> Extra:
    def extra(row: dict, rec: dict, where: str) -> dict:
        return {key: str(row[_need(row, columns, where, f"the scorer's {key!r}")]).strip()}
    return extra


def _pope(row: dict, rec: dict, where: str) -> dict:
    for col in ("split", "category"):
        if str(row.get(col, "")).strip().lower() in POPE_SPLITS:
            return {"split": str(row[col]).strip().lower()}
    raise RealFormatError(f"{where}: missing column 'split' / 'category' holding one of "
                          f"{POPE_SPLITS} (the scorer's 'split'); available: {sorted(row)}")


def _textvqa(row: dict, rec: dict, where: str) -> dict:
    answers = [str(a) for a in _as_list(row[_need(row, ("answers",), where, "ten references")])]
    rec["answer"] = Counter(answers).most_common(1)[0][0]
    return {"answers": answers}


def _ocrbench(row: dict, rec: dict, where: str) -> dict:
    col = _need(row, ("question_type", "category"), where, "the scorer's 'category'")
    answers = [str(a) for a in _as_list(rec["answer"])]
    rec["answer"] = answers[0]
    return {"category": str(row[col]).strip(), "answers": answers}


def _mme(row: dict, rec: dict, where: str) -> dict:
    col = next((c for c in ("question_id", "image_path", "image_id") if c in row), None)
    image_id = str(row[col]) if col else rec.pop("_owner")
    if image_id is None:
        raise RealFormatError(f"{where}: missing column 'question_id' / 'image_path' / "
                              f"'image_id' / 'index' (pairs the two questions of an image)")
    rec["answer"] = str(rec["answer"]).strip().capitalize()
    return {**_category(("category",), "category")(row, rec, where), "image_id": image_id}


def _mmmu(row: dict, rec: dict, where: str) -> dict:
    kind = row.get("question_type")
    kind = str(kind).strip() if not _blank(kind) else \
        ("multiple-choice" if rec["options"] else "open")
    if kind == "multiple-choice":
        rec["answer"] = _letter(rec["answer"], rec["options"], where)
    return {"question_type": kind}


def _mmbench(row: dict, rec: dict, where: str) -> dict:
    col = _need(row, ("index",), where, "circular groups: index mod 1e6")
    return {"index": int(float(row[col])), "category": str(row.get("category", "")),
            "l2-category": str(row.get("l2-category", row.get("l2_category", "")))}


EXTRAS: dict[str, Extra] = {
    "vstar": _category(("category", "task", "question_type"), "task"),
    "hrbench4k": _category(("cycle_category", "category"), "cycle_category"),
    "gqa": lambda row, rec, where: {},
    "mmmu": _mmmu,
    "mmbench": _mmbench,
    "mme": _mme,
    "pope": _pope,
    "textvqa": _textvqa,
    "ocrbench": _ocrbench,
    "muirbench": _category(("task", "category"), "task"),
    "mvbench": _category(("task", "category", "question_type"), "task"),
}


def _question(row: dict, where: str) -> str:
    text = str(row[_need(row, ("question", "prompt"), where, "the question text")])
    hint = row.get("hint")
    return f"Hint: {hint}\nQuestion: {text}" if not _blank(hint) else text


def _rotate_missing(records: list[dict]) -> list[dict]:
    """MMBench without circular copies (no index >= 1e6): add every rotation of each question."""
    from .mmbench import rotations

    if any(json.loads(r["meta"])["index"] >= GROUP_MODULUS for r in records):
        return records
    out = []
    for rec in records:
        meta = json.loads(rec["meta"])
        slot = ord(rec["answer"]) - ord("A")
        for j, (options, answer) in enumerate(rotations(rec["options"], slot)):
            index = meta["index"] + j * GROUP_MODULUS
            out.append({**rec, "id": f"mmbench-{index}", "options": options, "answer": answer,
                        "meta": json.dumps({**meta, "index": index, "rotation": j})})
    return out


def load_real(name: str, path: str | Path) -> list[dict]:
    """Records of benchmark ``name`` read from ``path`` (see the module docstring)."""
    if name not in EXTRAS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(EXTRAS))}")
    rows = read_rows(path)
    if not rows:
        raise RealFormatError(f"{path}: holds no rows (an empty split); point the profile's "
                              f"evaluation.benchmarks.{name}.path at the split with the questions")
    if "video" in rows[0] and not any(c in rows[0] for c in IMAGE_COLUMNS):
        raise RealFormatError(f"{path}: videos are not decoded; give the frames as an image "
                              f"list in an 'images' / 'frames' column")
    images = _Images(rows, str(path))
    records = []
    for i, row in enumerate(rows):
        where = f"{path} (row {i})"
        options = _options(row)
        key = row.get("index", row.get("id", row.get("question_id", i)))
        rec = {"id": f"{name}-{key}", "source": name, "images": images.of(row, where),
               "question": _question(row, where), "options": options,
               "answer": _answer(row, name, where) if name != "textvqa" else "", "task": "",
               "_owner": images.owner(row)}
        if name in LETTER_BENCHMARKS:
            rec["answer"] = _letter(rec["answer"], options, where)
        elif name == "pope":
            rec["answer"] = str(rec["answer"]).strip().lower()
        fields = EXTRAS[name](row, rec, where)
        rec.pop("_owner", None)
        rec["answer"] = str(rec["answer"])
        rec["response"] = rec["answer"]
        category = fields.get("task") or fields.get("category") or fields.get("cycle_category") \
            or fields.get("split") or fields.get("question_type") or str(row.get("category", ""))
        rec["task"] = str(category or name)
        rec["meta"] = json.dumps({"benchmark": name, "template": f"{name}/{rec['task']}",
                                  "source_index": i, **fields}, sort_keys=True)
        records.append(rec)
    first: dict[str, int] = {}
    for i, rec in enumerate(records):
        if rec["id"] in first:
            col = next((c for c in ("index", "id", "question_id") if c in rows[i]), "index")
            raise RealFormatError(f"{path} (row {i}), field '{col}': duplicate question id "
                                  f"{rec['id'].removeprefix(name + '-')!r} (first in row {first[rec['id']]}); "
                                  "each question needs its own id")
        first[rec["id"]] = i
    return _rotate_missing(records) if name == "mmbench" else records
