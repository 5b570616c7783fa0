"""RL post-training (GRPO family) downstream of evalkit: reuses its cache, prompts and scorers.

Map (each module one thing; variants chosen by name from registries):

- ``config``: the typed trainer config (YAML + ``a.b=value`` overrides); ``configs/`` examples.
- ``algorithms``: advantage estimators, policy losses, loss aggregation, KL estimators,
  DAPO dynamic sampling.
- ``rewards``: evalkit scorers as rewards (w_acc * accuracy + w_fmt * format) + overlong penalty.
- ``batch``: rollout groups as token-id lists and their padded training tensors.
- ``mix_policy``: n-1 online responses + the offline trajectory in one group.
- ``step``: one micro-batched policy update (loss, KL, clipping, AdamW step).
- ``checkpoint``: atomic save / exact resume (model, optimizer, RNG, step, data position).
- ``toy``: a tiny MLP policy and task that exercise the whole loop in tests.

``evalkit`` never imports ``trainer``.
"""
