"""RL post-training (GRPO family) downstream of evalkit: reuses its cache, prompts and scorers."""
