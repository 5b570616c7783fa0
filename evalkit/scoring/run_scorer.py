"""The scorer a run's pipeline uses: headline rule + every other rule, judge awaited.

Extraction rules are cheap and synchronous: the pipeline calls the scorer on its sink
thread. A sample that asks an LLM judge (``awaits``) is instead scored by ``ascore`` on
the pipeline's event loop, many at once under the judge's guard, so it never holds up the
samples behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalkit import tasks
from evalkit.engines.base import Completion
from evalkit.sample import Sample
from evalkit.scoring.context import NO_CONTEXT, ScoringContext
from evalkit.scoring.prefill import with_prefix
from evalkit.scoring.verdicts import Verdicts, score_all

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec
    from evalkit.prompts import PromptPlan


class RunScorer:
    """Each sample under its benchmark's headline rule (``spec``; None = evalkit's rule)
    and, for the extraction-sensitivity report, every other rule of its task type."""

    def __init__(
        self,
        spec: BenchmarkSpec | None = None,
        ctx: ScoringContext = NO_CONTEXT,
        prompt: PromptPlan | None = None,
        rule: str | None = None,
    ) -> None:
        self.spec = spec
        self.ctx = ctx  # the benchmark's judge (with its judge prompt), if any
        self.prompt = prompt  # the PromptPlan: which samples had the assistant turn pre-filled
        self.choice = rule  # "official+judge" (or another headline choice); None: the spec's
        self._headline: dict[str, str] = {}  # task type as written -> rule

    def _prefilled(self, sample: Sample) -> Sample:
        """The sample with its pre-filled assistant text recorded (``scoring.prefill``)."""
        prefix = self.prompt.assistant_prefix(sample.task_type) if self.prompt else None
        return with_prefix(sample, prefix)

    def rule(self, sample: Sample) -> str:
        """The headline rule of the sample's task type (looked up once per type)."""
        rule = self._headline.get(sample.task_type)
        if rule is None:
            kind = tasks.canonical(sample.task_type)
            rule = self.spec.headline_rule(kind, self.choice) if self.spec else "evalkit"
            self._headline[sample.task_type] = rule
        return rule

    def __call__(self, sample: Sample, completion: Completion) -> Verdicts:
        """The sample's verdicts, synchronously (the pipeline's sink thread)."""
        return score_all(self._prefilled(sample), completion.text, self.ctx, rule=self.rule(sample))

    def awaits(self, sample: Sample) -> bool:
        """Whether the sample's score waits on the judge (then ``ascore`` it on the loop)."""
        from evalkit.scoring import needs_judge
        from evalkit.scoring.judge_fallback import fallback_of

        if self.ctx.judge is None:
            return False
        return needs_judge(sample) or fallback_of(self.rule(sample), sample.task_type) is not None

    async def ascore(self, sample: Sample, completion: Completion) -> Verdicts:
        """The sample's verdicts with the judge awaited on the running loop."""
        from evalkit.scoring import ascore_all

        scored = self._prefilled(sample)
        return await ascore_all(scored, completion.text, self.ctx, rule=self.rule(sample))
