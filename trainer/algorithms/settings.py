"""The algorithm settings the estimators and losses read, as the shape they need.

``trainer.config.AlgorithmConfig`` has this shape (mypy checks it where the trainer calls
``from_config(cfg.algorithm)``); declaring it here keeps the algorithms
below the config module, which validates its names against their registries.
"""

from __future__ import annotations

from typing import Literal, Protocol


class KLSettings(Protocol):
    """KL regularisation knobs (``trainer.config.KLConfig``)."""

    @property
    def estimator(self) -> str: ...
    @property
    def coef(self) -> float: ...
    @property
    def in_reward(self) -> bool: ...


class AlgorithmSettings(Protocol):
    """What ``AdvantageOptions.from_config`` and ``LossOptions.from_config`` read."""

    @property
    def adv_eps(self) -> float: ...
    @property
    def norm_by_std(self) -> bool: ...
    @property
    def gamma(self) -> float: ...
    @property
    def kl(self) -> KLSettings: ...
    @property
    def singleton_groups(self) -> Literal["verl", "zero"]: ...
    @property
    def gdpo_whiten(self) -> Literal["tokens", "sequences", "off"]: ...
    @property
    def gdpo_reward_keys(self) -> list[str] | None: ...
    @property
    def gdpo_key_weights(self) -> dict[str, float]: ...
    @property
    def clip_eps_low(self) -> float: ...
    @property
    def clip_eps_high(self) -> float: ...
    @property
    def dual_clip_c(self) -> float | None: ...
