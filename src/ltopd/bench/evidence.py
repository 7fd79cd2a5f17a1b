"""Evidence-first answers for the miniature's instruction items: "<evidence>, so <answer>".

The tiny twins' language models are trained from scratch, and they do not learn to compare a
word of the question with the image in one step (docs/pretraining.md: existence and option
letters stay at the question-only prior). They do learn to name what the image shows, and,
after a text-only stage, to compare two words of their context. Answering "yellow, so no" or
"cyan, so B" splits the question into those two steps, as a real model's short reasoning does.

Where a twin's plain question is word for word another's (POPE's existence questions are GQA's
and the world's `exists` task's), the style is asked for in the question (:data:`INSTRUCTIONS`):
with two formats for one prompt the plain one wins (docs/pretraining.md).

A pretraining stage's `evidence` and `text_only` keys apply the style to its items
(ltopd.twins.job.stage_source; release code, hashed in the manifests); a backbone entry's
`evidence` has evaluation and the release gates ask those twins with their instruction.
:func:`text_only` also makes the blind twin (ltopd.pipeline.evaluate, the release gates).

Only benchmarks whose official parser reads the answer out of such a reply get the style: the
catalog's benchmarks with an ``evidence`` kind (:data:`EVIDENCE_KINDS`; each one's test scores its
replies with that parser):

* POPE: "no" anywhere in the first sentence reads as no, else yes (RUCAIBox/POPE).
* HR-Bench, MMBench, MuirBench: VLMEvalKit's ``can_infer``, exactly one option letter among the
  words.
* MMMU: the official ``parse_multi_choice_response`` finds " B " in the padded reply.

* V*Bench: lmms-eval's letter extraction reads a reply that starts with A-D as that letter
  ("cyan, so B" would read C), so its reply opens with "it is" (:data:`REPLIES`) and the lone
  letter at its end is read. Its questions are HR-Bench's word for word, so it is asked with an
  instruction too.

Not the others: MME's parser reads yes/no in the first four characters, GQA, TextVQA and
OCRBench match the whole answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ltopd.bench.scoring.common import meta_of
from ltopd.catalog import BENCHMARKS

NONE = "none"  # the evidence when nothing of the asked kind is present


def option_evidence(record: dict) -> str | None:
    """A choice item's evidence: the text of its correct option (None for open questions)."""
    options, answer = record.get("options") or [], str(record["answer"]).strip()
    if not options or len(answer) != 1:
        return None
    index = ord(answer.upper()) - ord("A")
    return str(options[index]) if 0 <= index < len(options) else None


def _asked_shape(record: dict) -> str:
    """A POPE item's asked shape ('yellow cross' -> 'cross')."""
    return str(meta_of(record)["object"]).split()[-1]


def pope_evidence(record: dict) -> str:
    """'Is there a yellow cross?': the colours of the crosses in the image, or 'none'."""
    shape = _asked_shape(record)
    colors = sorted({o["color"] for o in meta_of(record)["scene"]["objects"] if o["shape"] == shape})
    return " ".join(colors) or NONE


# What an evidence-first answer names, by the catalog's Benchmark.evidence.
EVIDENCE_KINDS: dict[str, Callable[[dict], str | None]] = {"option": option_evidence, "pope": pope_evidence}

# The benchmarks with the style: those the catalog gives an evidence kind (catalog.evidence_benchmarks).
def _kind(name: str, kind: str) -> Callable[[dict], str | None]:
    if kind not in EVIDENCE_KINDS:
        raise ValueError(f"ltopd.catalog: benchmark {name!r} has evidence {kind!r}; allowed values: "
                         f"{sorted(EVIDENCE_KINDS)}")
    return EVIDENCE_KINDS[kind]


# The benchmarks with the style: those the catalog gives an evidence kind (catalog.evidence_benchmarks).
EVIDENCE: dict[str, Callable[[dict], str | None]] = {
    b.name: _kind(b.name, b.evidence) for b in BENCHMARKS.values() if b.evidence is not None}

# A twin's reply where "<evidence>, so <answer>" would not parse (default: that form).
REPLIES: dict[str, str] = {"vstar": "it is {evidence}, so {answer}"}


def _pope_instruction(record: dict) -> str:
    return f"First name the colour of each {_asked_shape(record)}, then answer yes or no."


def _vstar_instruction(record: dict) -> str:
    return "First name what you see, then answer with the option's letter."


# The instruction appended to the question of a twin whose plain question another twin shares.
INSTRUCTIONS: dict[str, Callable[[dict], str]] = {"pope": _pope_instruction, "vstar": _vstar_instruction}


def instructed(record: dict, benchmark: str) -> dict:
    """The record as the evidence-first style asks it: its question with the twin's instruction
    (unchanged for a twin that needs none). For evaluation items as for training items."""
    make = INSTRUCTIONS.get(benchmark)
    return record if make is None else {**record, "question": f"{record['question']} {make(record)}"}


def with_evidence(record: dict, benchmark: str) -> dict:
    """The record asked (:func:`instructed`) and answered evidence-first; the record itself where
    the item has no evidence (open MMMU questions). A benchmark without the style is an error."""
    if benchmark not in EVIDENCE:
        raise ValueError(f"no evidence-first style for {benchmark!r}; allowed values: {sorted(EVIDENCE)}")
    evidence = EVIDENCE[benchmark](record)
    if evidence is None:
        return record
    answer = REPLIES.get(benchmark, "{evidence}, so {answer}").format(
        evidence=evidence, answer=str(record["answer"]).strip())
    return {**instructed(record, benchmark), "answer": answer, "response": answer}


def text_only(record: dict) -> dict:
    """The record without its images: a language stage (the answer's evidence is then not
    predictable, the step from evidence to answer is)."""
    return {**record, "images": []}


def restyle(items: Iterable[dict], evidence: Iterable[str] = (), drop_images: bool = False) -> Iterator[dict]:
    """Apply a stage's answer style and image policy to its instruction items. An item's
    benchmark is its ``source`` field."""
    evidence = set(evidence)
    for record in items:
        if record.get("source") in evidence:
            record = with_evidence(record, record["source"])
        yield text_only(record) if drop_images else record
