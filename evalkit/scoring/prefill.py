"""What the rules see of a reply that continued a pre-filled assistant turn.

Some official evaluations write the start of the model's turn themselves (MLVU's
``Best Option: (``) and let the model continue; an engine returns the continuation
alone, and that is the run record's ``prediction``. The official rules are given that
continuation, the model's own words, as every official code scored the newly generated
text (a rule that puts part of the prefix back, as MVBench's notebook puts back its
``(``, does so itself). evalkit's robust rule reads the assistant's whole turn, prefix +
continuation, so ``Best Option: (`` + ``B) a dog`` reads B. The run's scorer records
the prefix on the scored sample (:func:`with_prefix`); the router hands the robust rule
:func:`assistant_turn`.
"""

from __future__ import annotations

from evalkit.sample import Sample

PREFIX_FIELD = "assistant_prefix"
"""The sample field that carries the pre-filled text while a reply is scored."""


def with_prefix(sample: Sample, prefix: str | None) -> Sample:
    """``sample`` with the pre-filled start of the model's turn recorded (a copy), if any."""
    if not prefix:
        return sample
    return sample.model_copy(update={"fields": {**sample.fields, PREFIX_FIELD: prefix}})


def assistant_turn(reply: str, sample: Sample) -> str:
    """The model's whole turn: the prefix recorded on ``sample`` (if any) + ``reply``."""
    prefix = sample.fields.get(PREFIX_FIELD)
    return prefix + reply if isinstance(prefix, str) else reply
