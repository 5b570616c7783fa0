"""The trainer's typed config: shipped YAMLs load, unknown keys fail, overrides are typed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from evalkit.errors import ConfigError
from evalkit.trainer.config import TrainerConfig, load_config
from evalkit.trainer.data import frame_spec, image_spec
from evalkit.trainer.distributed.recipe import distributed_plan

CONFIG_DIR = Path(__file__).resolve().parents[1] / "trainer" / "configs"
SHIPPED = sorted(CONFIG_DIR.glob("*.yaml"))


def test_the_three_example_configs_are_shipped():
    names = {p.name for p in SHIPPED}
    assert {"grpo_synthvideo.yaml", "dapo_synthvideo.yaml", "mix_policy_synthvideo.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert isinstance(cfg, TrainerConfig)


def test_dapo_config_uses_clip_higher_and_dynamic_sampling():
    cfg = load_config(CONFIG_DIR / "dapo_synthvideo.yaml")
    assert (cfg.algorithm.clip_eps_low, cfg.algorithm.clip_eps_high) == (0.2, 0.28)
    assert cfg.algorithm.dynamic_sampling.enable
    assert cfg.rewards.overlong.enable


@pytest.mark.parametrize("name", ["dapo_qwen25vl_7b.yaml", "dapo_qwen3vl_8b.yaml"])
def test_recipe_configs_match_easyvideor1_and_resolve_their_distributed_plan(name):
    cfg = load_config(CONFIG_DIR / name)
    algo, data, actor = cfg.algorithm, cfg.data, cfg.actor
    assert (algo.clip_eps_low, algo.clip_eps_high, algo.kl.estimator) == (0.2, 0.28, "off")
    assert (cfg.rollout.n, cfg.schedule.batch_size, cfg.rollout.max_response_tokens) == (
        8,
        256,
        4096,
    )
    assert (data.fps, data.video_max_frames, data.video_max_pixels) == (2.0, 128, 262144)
    assert (data.image_max_pixels, data.min_pixels) == (1048576, 3136)
    assert frame_spec(data).min_pixels == 3136 == image_spec(data).min_pixels
    assert not data.shuffle and not data.filter_overlong_prompts
    assert (actor.padding_free, actor.use_dynamic_bsz, actor.max_token_len_per_gpu) == (
        True,
        True,
        24096,
    )
    assert actor.gradient_checkpointing and cfg.distributed.init == "rank0"
    plan = distributed_plan(cfg)  # no Ray, no GPU: what the run would start
    assert (plan.group.world_size, plan.group.gpus_per_worker, plan.backend) == (8, 1, "nccl")
    assert plan.rollout is not None and plan.rollout.hosts == tuple(range(8))
    args = plan.engine_args
    assert (args["gpu_memory_utilization"], args["max_num_batched_tokens"]) == (0.8, 25000)
    assert not args["enable_chunked_prefill"] and not args["enforce_eager"]
    assert args["limit_mm_per_prompt"] == {"image": 5, "video": 1}
    assert args["max_model_len"] == data.max_prompt_tokens + cfg.rollout.max_response_tokens


def test_the_8b_config_trains_easyvideor1s_model():
    cfg = load_config(CONFIG_DIR / "dapo_qwen3vl_8b.yaml")
    assert cfg.model.endswith("Qwen3-VL-8B-Instruct") and cfg.data.max_prompt_tokens == 20000


def test_mix_policy_config_enables_mixing():
    assert load_config(CONFIG_DIR / "mix_policy_synthvideo.yaml").mix_policy.enable_mix_policy


def test_unknown_yaml_key_is_an_error_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithm:\n  clip_eps_hi: 0.3\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*algorithm\.clip_eps_hi"):
        load_config(bad)


def test_overrides_are_parsed_to_the_field_type():
    cfg = load_config(
        None,
        [
            "algorithm.clip_eps_high=0.28",
            "rollout.n=4",
            "mix_policy.enable_mix_policy=true",
            "schedule.eval_benchmarks=[SynthVideo, LVBench]",
            "rollout.engine=123",
            "algorithm.dual_clip_c=3",
            "optimizer.lr=1e-4",
        ],
    )
    assert cfg.algorithm.clip_eps_high == 0.28
    assert cfg.rollout.n == 4
    assert cfg.mix_policy.enable_mix_policy is True
    assert cfg.schedule.eval_benchmarks == ["SynthVideo", "LVBench"]
    assert cfg.rollout.engine == "123"  # a str field keeps the text
    assert cfg.algorithm.dual_clip_c == 3.0
    assert cfg.optimizer.lr == 1e-4


def test_override_can_reset_an_optional_field_to_none():
    cfg = load_config(None, ["algorithm.dual_clip_c=3", "algorithm.dual_clip_c=null"])
    assert cfg.algorithm.dual_clip_c is None
    assert load_config(None, ["data.val_path=null"]).data.val_path is None


def test_override_of_unknown_key_names_it_with_a_hint():
    with pytest.raises(ConfigError, match=r"clip_eps_hihg.*did you mean 'clip_eps_high'"):
        load_config(None, ["algorithm.clip_eps_hihg=0.3"])


def test_override_with_bad_value_names_the_key():
    with pytest.raises(ConfigError, match=r"rollout\.n"):
        load_config(None, ["rollout.n=many"])


def test_override_without_equals_sign_is_an_error():
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["rollout.n"])


def test_override_into_a_scalar_is_an_error():
    with pytest.raises(ConfigError, match="seed is a value"):
        load_config(None, ["seed.x=1"])


def test_unknown_algorithm_name_gets_did_you_mean():
    with pytest.raises(ConfigError, match=r"advantage estimator 'grpoo'.*did you mean"):
        load_config(None, ["algorithm.advantage=grpoo"])
    with pytest.raises(ConfigError, match=r"policy loss 'gpso'"):
        load_config(None, ["algorithm.policy_loss=gpso"])


def test_dual_clip_must_exceed_one_and_belongs_to_ppo_clip():
    with pytest.raises(ConfigError, match="dual_clip_c must be > 1"):
        load_config(None, ["algorithm.dual_clip_c=0.5"])
    with pytest.raises(ConfigError, match="ppo_clip only"):
        load_config(None, ["algorithm.policy_loss=gspo", "algorithm.dual_clip_c=3"])


def test_mix_policy_needs_groups_of_two_or_more():
    with pytest.raises(ConfigError, match=r"rollout\.n >= 2"):
        load_config(None, ["mix_policy.enable_mix_policy=true", "rollout.n=1"])


def _sections(model: type[BaseModel]):
    yield model
    for info in model.model_fields.values():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _sections(ann)


def test_every_field_has_a_docstring():
    missing = [
        f"{m.__name__}.{name}"
        for m in _sections(TrainerConfig)
        for name, info in m.model_fields.items()
        if not info.description
    ]
    assert missing == []


def test_defaults_follow_the_issue():
    cfg = TrainerConfig()
    assert (cfg.rewards.w_acc, cfg.rewards.w_fmt) == (0.9, 0.1)
    assert cfg.mix_policy.enable_mix_policy is False
    assert cfg.agg_max_len == cfg.rollout.max_response_tokens


def test_kl_in_reward_is_refused_only_for_gdpo():
    # verl applies the in-reward KL for any estimator; GDPO's per-key scores never see it
    with pytest.raises(ConfigError, match=r"kl\.in_reward does not reach gdpo"):
        load_config(
            None,
            [
                "algorithm.advantage=gdpo",
                "algorithm.kl.estimator=k1",
                "algorithm.kl.in_reward=true",
            ],
        )
    grpo = load_config(None, ["algorithm.kl.estimator=k1", "algorithm.kl.in_reward=true"])
    assert grpo.algorithm.kl.in_reward
    cfg = load_config(
        None,
        [
            "algorithm.advantage=reinforce_pp",
            "algorithm.kl.estimator=k1",
            "algorithm.kl.in_reward=true",
            "algorithm.kl.coef=0.01",
        ],
    )
    from evalkit.trainer.algorithms.advantages import AdvantageOptions

    assert AdvantageOptions.from_config(cfg.algorithm).kl_coef == 0.01


def test_override_fills_an_empty_yaml_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algorithm:\n  kl:\n")
    cfg = load_config(path, ["algorithm.kl.estimator=k3"])
    assert cfg.algorithm.kl.estimator == "k3"


def test_a_yaml_that_is_not_a_mapping_is_rejected(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=r"list\.yaml.*mapping"):
        load_config(path)


def test_an_overlong_buffer_past_the_response_budget_fails_at_load():
    with pytest.raises(ConfigError, match=r"rewards\.overlong\.buffer=64 exceeds"):
        load_config(CONFIG_DIR / "dapo_synthvideo.yaml", ["rollout.max_response_tokens=8"])
