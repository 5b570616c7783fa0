"""``evalkit models``: every model family evalkit feeds, as the registry says (no torch)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.engines.family import FamilySpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``[NAME]`` (one family or a model type) and ``--json``."""
    parser.add_argument(
        "name", nargs="?", help="one family (or a config.json model_type): all it says"
    )
    parser.add_argument("--json", action="store_true", help="the families as JSON")


def run(args: argparse.Namespace) -> int:
    """Print the families: vLLM architectures, how video is fed, reference settings."""
    from evalkit.engines.family import FAMILIES

    names = [FAMILIES.canonical(args.name)] if args.name else FAMILIES.names()
    rows = [_row(FAMILIES.get(n)) for n in names]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console

    from evalkit.textwidth import table, terminal_width, wrap

    width = terminal_width()
    if not args.name:  # a row each; NAME gives the prompt, the source and the rest
        body = [
            [
                row["family"],
                ", ".join(a.removesuffix("ForConditionalGeneration") for a in row["vllm"]),
                row["feed"],
                row["reference"],
                "no" if row["tested"].startswith("not tested") else "yes",
            ]
            for row in rows
        ]
        headers = ["family", "vLLM architecture", "fed as", "reference frames", "tested here"]
        Console(width=width).print(table(headers, body, width, whole=["family"]))
        print("(evalkit models NAME: the prompt, the cache, the source, what is tested)")
        return 0
    for row in rows:
        print(f"{row['family']}  {row['title']}")
        for key in ("model_types", "vllm", "video", "cache", "prompt", "reference", "source",
                    "needs", "tested"):  # fmt: skip
            value = row[key]
            text = ", ".join(value) if isinstance(value, list) else str(value)
            label = f"  {key + ':':<12} "
            print("\n".join(wrap(text, width, label, " " * len(label))))
    return 0


def _row(fam: FamilySpec) -> dict[str, Any]:
    needs = [n for n in ("--trust-remote-code" if fam.trust_remote_code else "",) if n]
    if fam.audio:
        needs.append(f"audio {fam.audio}")
    if fam.trainable:
        needs.append("trainable by evalkit's trainer")
    if fam.tiny:
        needs.append(f"`evalkit model tiny --family {fam.name}` builds one")
    if fam.vllm_refusal:
        needs.append("--engine hf (vLLM refuses its transformers 5 checkpoints)")
    video = (
        "a video, through vLLM's processor for the family"
        if fam.feed == "video"
        else f"its frames as images, each after {fam.frame_marker!r}"
    )
    if fam.vllm_refusal:
        video = f"a video, through its transformers processor (HF engine): {fam.vllm_refusal}"
    return {
        "family": fam.name,
        "title": fam.title,
        "model_types": list(fam.model_types),
        "vllm": list(fam.architectures),
        "video": video,
        "feed": fam.feed,
        "cache": fam.pixels,
        "prompt": fam.prompt,
        "reference": "; ".join(
            [fam.reference.describe()]
            + [f"config version {v}: {r.describe()}" for v, r in fam.version_references]
        ),
        "source": "; ".join(
            [fam.reference.source]
            + [f"config version {v}: {r.source}" for v, r in fam.version_references]
        ),
        "needs": "; ".join(needs) or "-",
        "tested": fam.tested,
    }
