"""RL post-training (GRPO family) downstream of evalkit: reuses its cache, prompts and scorers.

Map (each module one thing; variants chosen by name from registries):

- ``config``: the typed trainer config (YAML + ``a.b=value`` overrides); ``configs/`` shipped
  configs, found by name (``--config NAME``; ``python -m evalkit.trainer configs``).
- ``inputs``: a run's missing model / data built on demand (announced) or refused up front.
- ``algorithms``: advantage estimators, policy losses, loss aggregation, KL estimators and
  the KL coefficient's controller, DAPO dynamic sampling, rollout correction
  (engine-vs-trainer mismatch, TIS weights, rejection sampling); verl's names.
- ``rewards``: evalkit scorers as rewards (w_acc * accuracy + w_fmt * format) + overlong penalty.
- ``batch``: rollout groups as token-id lists and their padded training tensors.
- ``mix_policy``: the offline trajectory in the last slot of a group (append or replace_last).
- ``step``: micro-batched policy updates, mini-batches x PPO epochs (loss, KL, clipping, AdamW).
- ``checkpoint``: atomic save / exact resume (model, optimizer, RNG, step, data position).
- ``data``: unified-schema rows as evalkit Samples, frame-cache paths, a resumable order.
- ``actor``: the HF Qwen-VL policy (dummy visual input, strict placeholder check, FSDP).
- ``shared_vision``: old/ref log-prob forwards encode each prompt's video once per group.
- ``rollout``: n responses per prompt through an evalkit Engine; weight sync.
- ``vllm_memory``: vLLM's memory on CPU (the trainer's default, the preflight).
- ``recipe``: setup / run / cleanup of one training run (``python -m evalkit.trainer train``).
- ``distributed``: the actor update on a Ray group of FSDP2 workers (token-balanced rows,
  per-block sharding, the modality guard across ranks); ``distributed.workers`` in config.
- ``metrics``: ``metrics.jsonl`` (+ TensorBoard if installed) and the progress line.
- ``eval_hook``: the evalkit pipeline on a weight snapshot every N steps, in the background.
- ``filter``: pass-rate filtering (``python -m evalkit.trainer filter``).
- recipe pieces: ``lr_schedule`` (warmup + constant/cosine), ``model_parts`` (frozen vision
  tower), ``entropy``, ``greedy`` (ReMax baselines, validation answers), ``prompt_filter``
  (overlong prompts), ``validation``, ``reward_loader`` (``file.py:fn``), ``loggers`` (wandb;
  a listed logger's missing package is a start-up error), ``recipe_setup``,
  ``export`` (a checkpoint as a HF model: ``python -m evalkit.trainer export``).

``evalkit`` never imports ``trainer``.
"""

if __name__ != "evalkit.trainer":
    # a checkout's root on sys.path makes the folder importable as `trainer` too: a second
    # copy of every module, and a name that does not exist once installed
    raise ImportError(
        f"import evalkit.trainer, not {__name__} (trainer/ installs under evalkit; "
        "run python -m evalkit.trainer)"
    )
