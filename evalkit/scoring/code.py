"""Code answers: Python run against tests, SVG rendered and compared, HTML compared by structure.

Targets (assumed shapes): ``code_python`` — a test snippet (asserts) or a list of them, or
``{"tests": [...]}``; ``code_svg`` — the reference SVG source; ``code_html`` — the
reference HTML source. Python and SVG run only inside ``evalkit.scoring.sandbox``;
HTML is parsed in-process with the standard library's tokenizer (parsing runs no code).
"""

from __future__ import annotations

import difflib
from html.parser import HTMLParser
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import code_block, final_span
from evalkit.scoring.router import scorer
from evalkit.scoring.sandbox import Limits, run_job
from evalkit.scoring.types import Score

MAX_CODE_CHARS = 100_000


def _code(prediction: str, languages: tuple[str, ...]) -> tuple[str, dict[str, Any], str]:
    span = final_span(prediction)
    body, how = code_block(span.text if span.text else prediction, languages)
    body = body[:MAX_CODE_CHARS]
    fmt = 0.0 if not body.strip() else (1.0 if how.startswith("fence") or span.marked else 0.5)
    return body, {"format": fmt, "extraction": f"{span.method}/{how}"}, how


def _tests(target: Any, sample: Sample) -> list[str]:
    if isinstance(target, dict):
        target = target.get("tests", [])
    if target is None:
        target = sample.fields.get("tests", [])
    tests = [target] if isinstance(target, str) else list(target)
    return [str(t) for t in tests if str(t).strip()]


# Rule: functional correctness — the fraction of the sample's tests that pass
# (HumanEval / MBPP pass@1 with one sample, Chen et al. 2021).
@scorer("code_python", "python", "code", "code_generation")
def code_python(prediction: str, target: Any, sample: Sample) -> Score:
    """Fraction of the sample's tests passing when run with the answer's code (sandboxed)."""
    code, meta, _ = _code(prediction, ("python", "py", "python3"))
    tests = _tests(target, sample)
    if not code.strip():
        return Score(0.0, None, "no code found", meta)
    if not tests:
        return Score(0.0, None, "sample has no tests", meta)
    run = run_job({"kind": "python", "code": code, "tests": tests}, Limits())
    meta.update(timed_out=run.timed_out, returncode=run.returncode, wall_s=run.wall_s)
    if run.result is None:
        why = "timed out" if run.timed_out else "crashed or exited before the tests ran"
        return Score(0.0, None, f"code {why}", meta)
    passed = [bool(p) for p in run.result.get("passed", [])]
    meta.update(passed=passed, error=run.result.get("error"))
    value = sum(passed) / len(tests)
    why = f"{sum(passed)}/{len(tests)} tests passed in the sandbox (code via {meta['extraction']})"
    return Score(value, f"{sum(passed)}/{len(tests)} tests", why, meta)


# Rule: rendering similarity, in the spirit of StarVector / VGBench SVG evaluation
# (compare the candidate's rendering with the reference's pixel by pixel): here
# 1 - MAE / MAE(blank canvas, reference), so a blank or broken drawing scores 0.
@scorer("code_svg", "svg")
def code_svg(prediction: str, target: Any, sample: Sample) -> Score:
    """Pixel similarity of the rendered answer SVG with the rendered reference SVG."""
    code, meta, _ = _code(prediction, ("svg", "xml", "html"))
    start, end = code.find("<svg"), code.rfind("</svg>")
    if start == -1 or end == -1:
        meta["format"] = 0.0
        return Score(0.0, None, "no <svg> element found", meta)
    svg = code[start : end + 6]
    job = {"kind": "svg", "candidate": svg, "reference": str(target), "size": 128}
    run = run_job(job, Limits(cpu_s=10, wall_s=20, memory_mb=2048))
    meta.update(timed_out=run.timed_out, wall_s=run.wall_s)
    if run.result is None:
        return Score(0.0, None, f"rendering failed: {run.stderr[-300:]}", meta)
    value = float(run.result.get("similarity", 0.0))
    meta.update(mae=run.result.get("mae"), error=run.result.get("error"))
    why = f"pixel similarity {value:.3f} (svg via {meta['extraction']})"
    return Score(min(1.0, max(0.0, value)), "svg", why, meta)


class _Structure(HTMLParser):
    # The element skeleton: "open:tag.class" / "close:tag" tokens plus text words.
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[str] = []
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = sorted(a for a, _ in attrs if a not in ("style",))
        self.tokens.append(f"<{tag} {' '.join(names)}>")

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.words.extend(data.split())


def html_structure(html: str) -> tuple[list[str], list[str]]:
    """(tag tokens, text words) of an HTML document; tolerant of broken markup."""
    parser = _Structure()
    try:
        parser.feed(html[:MAX_CODE_CHARS])
        parser.close()
    except Exception:  # the tokenizer is lenient; this is for truly odd input
        pass
    return parser.tokens[:2000], parser.words[:4000]


# Rule: structural similarity of the DOM skeleton (tag + attribute-name sequence),
# as in Design2Code's block/structure matching (Si et al. 2024), weighted 0.8, plus
# 0.2 for the visible text — a sequence-matching ratio for each.
@scorer("code_html", "html", "webpage")
def code_html(prediction: str, target: Any, sample: Sample) -> Score:
    """0.8 · tag-structure similarity + 0.2 · text similarity to the reference HTML."""
    code, meta, _ = _code(prediction, ("html", "htm"))
    tags, words = html_structure(code)
    if not tags:
        meta["format"] = 0.0
        return Score(0.0, None, "no HTML elements found", meta)
    ref_tags, ref_words = html_structure(str(target))
    structure = difflib.SequenceMatcher(None, tags, ref_tags, autojunk=False).ratio()
    text = difflib.SequenceMatcher(None, words, ref_words, autojunk=False).ratio()
    if not words and not ref_words:
        text = 1.0
    value = 0.8 * structure + 0.2 * text
    meta.update(structure=structure, text=text)
    why = f"structure {structure:.3f}, text {text:.3f} (html via {meta['extraction']})"
    return Score(min(1.0, value), f"{len(tags)} tags", why, meta)
