"""What every tiny checkpoint shares: the training text, the tokenizer trainer, the save.

A tiny checkpoint is a real Hugging Face model directory (config.json, safetensors weights,
tokenizer, chat template, processor configs) that transformers and vLLM both load; its
weights are random and deterministic from the seed, its tokenizer a byte-level BPE trained
here on a few KB of made-up text, with the family's special tokens.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

_WORDS_TEXT = (
    "the a an of to in on at for with from by about what which who when where why how is are "
    "was were be been do does did can could will would should may might must not no yes and "
    "or but if then than this that these those there here it its he she they we you i me my "
    "your video image frame clip scene person people man woman child dog cat car ball table "
    "door room kitchen street park water tree sky red blue green yellow black white left "
    "right up down before after first last next during while begins ends start end time "
    "second minute hour count number how many times does appear happen action event object "
    "color shape size question answer option options choose select correct best letter "
    "following given describe explain reason think step final above below between near far "
    "inside outside open close walk run jump sit stand hold pick put throw catch look watch "
    "play eat drink cook read write talk speak move turn stop wait"
)
_WORDS = tuple(_WORDS_TEXT.split())
_PUNCT = [".", ",", "?", "!", ":", ";", "(", ")", "'", '"', "-"]


_SYLLABLES_TEXT = (
    "ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge go ha he hi ho ka ke ki "
    "ko la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po ra re ri ro ru sa se si so "
    "ta te ti to tu va ve vi vo wa we wi ya yo za ze zi zo ing ed er est ly tion ment ness"
)
_SYLLABLES = tuple(_SYLLABLES_TEXT.split())


def corpus(n_sentences: int = 1500) -> str:
    """Some KB of deterministic pseudo-English with digits, letters and option markup."""
    rng = random.Random(1234)  # fixed: the tokenizer must not depend on the weight seed
    # Made-up words widen the merge statistics so the BPE reaches ~2k entries.
    made_up = ["".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4))) for _ in range(1500)]
    lines = []
    for i in range(n_sentences):
        words = [rng.choice(_WORDS if rng.random() < 0.6 else made_up) for _ in range(8)]
        if i % 5 == 0:
            words.append(str(rng.randint(0, 2026)))
        if i % 7 == 0:
            words = [f"{'ABCDEFGHIJ'[rng.randint(0, 9)]}.", *words]
        sentence = " ".join(words).capitalize() + rng.choice(_PUNCT)
        lines.append(sentence)
    lines.append("Answer with the option's letter from the given choices directly.")
    lines.append("0 1 2 3 4 5 6 7 8 9 A B C D E F G H I J <think> </think> <answer> </answer>")
    return "\n".join(lines)


def chatml_tokenizer(
    special_tokens: list[str], chat_template: str, named: dict[str, str] | None = None
) -> Any:
    """:func:`train_tokenizer` for a ChatML family (the Qwen ones, InternVL, MiniCPM-V):
    turns end at ``<|im_end|>``, padding is ``<|endoftext|>``."""
    return train_tokenizer(
        special_tokens,
        eos="<|im_end|>",
        pad="<|endoftext|>",
        chat_template=chat_template,
        named=named,
    )


def train_tokenizer(
    special_tokens: list[str],
    *,
    eos: str,
    pad: str,
    chat_template: str,
    named: dict[str, str] | None = None,
) -> Any:
    """A ~2k byte-level BPE over :func:`corpus` with ``special_tokens`` (ids in that order
    from 0), wrapped as a ``PreTrainedTokenizerFast`` with ``chat_template``; ``named``:
    special tokens a processor reads as tokenizer attributes (``start_image_token``...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus().splitlines(), trainer=trainer)
    extra = {"extra_special_tokens": named} if named else {}
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos,
        pad_token=pad,
        unk_token=None,
        additional_special_tokens=[t for t in special_tokens if t != pad],
        model_max_length=32768,
        **extra,
    )
    fast.chat_template = chat_template
    return fast


def padded_vocab(tokenizer: Any) -> int:
    """The embedding rows of a tokenizer's vocabulary, padded to 64 as real checkpoints are."""
    return (len(tokenizer) + 63) // 64 * 64


def save_checkpoint(
    out: Path,
    model_cls: Any,
    config: Any,
    processor: Any,
    tokenizer: Any,
    *,
    seed: int,
    family: str,
    stop: list[str],
) -> Path:
    """Initialise ``model_cls(config)`` from ``seed`` and write it (bfloat16, as real
    checkpoints are: vLLM's dtype "auto" loads them without a cast, float32 widens them
    exactly), its processor, tokenizer and an ``evalkit_tiny.json`` naming the family;
    greedy generation stops at the tokens ``stop``."""
    import torch
    import transformers as tf

    out.mkdir(parents=True, exist_ok=True)
    with _seeded(torch, seed):
        model: Any = model_cls(config)
    model = model.to(torch.bfloat16).eval()
    model.generation_config.do_sample = False
    model.generation_config.eos_token_id = [tokenizer.convert_tokens_to_ids(t) for t in stop]
    bars = tf.utils.logging.is_progress_bar_enabled()
    tf.utils.logging.disable_progress_bar()  # "Writing model shards" for one 4 MB file
    try:
        model.save_pretrained(out, safe_serialization=True)
    finally:
        if bars:
            tf.utils.logging.enable_progress_bar()
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "evalkit_tiny.json").write_text(
        json.dumps({"family": family, "seed": seed}, indent=2) + "\n", encoding="utf-8"
    )
    return out


class _seeded:
    """Seed torch's CPU generator for the duration of a block, then restore it."""

    def __init__(self, torch_mod: Any, seed: int) -> None:
        self.torch, self.seed = torch_mod, seed

    def __enter__(self) -> None:
        self.state = self.torch.random.get_rng_state()
        self.torch.manual_seed(self.seed)

    def __exit__(self, *exc: object) -> None:
        self.torch.random.set_rng_state(self.state)


CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
"""ChatML's specials (Qwen2 language models: LLaVA-OneVision, InternVL), ids 0-2."""


def chatml_template(
    image: str,
    video: str,
    *,
    loose: bool = False,
    system: str | None = "You are a helpful assistant.",
) -> str:
    """A ChatML chat template putting ``image``/``video`` where each content item is: the
    family's placeholder, which its processor expands. ``loose``: an item with an
    ``image``/``image_url``/``video`` key counts too, whatever its type. ``system``: the
    system turn written when the messages have none (None: no such turn)."""
    is_image = "item['type'] == 'image'"
    is_video = "item['type'] == 'video'"
    if loose:
        is_image += " or 'image' in item or 'image_url' in item"
        is_video += " or 'video' in item"
    default_system = (
        "{% if loop.first and message['role'] != 'system' %}"
        f"<|im_start|>system\n{system}<|im_end|>\n"
        "{% endif %}"
        if system is not None
        else ""
    )
    return (
        "{% for message in messages %}"
        f"{default_system}"
        "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for item in message['content'] %}"
        f"{{% if {is_image} %}}{image}"
        f"{{% elif {is_video} %}}{video}"
        "{% elif 'text' in item %}{{ item['text'] }}"
        "{% endif %}{% endfor %}{% endif %}"
        "<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


TEXT_SIZES = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,  # vLLM's CPU attention takes 32, 64, 80, ...
    "max_position_embeddings": 4096,  # vLLM max_model_len default: small CPU profiling
    "initializer_range": 0.05,
}
"""The tiny language models' sizes (the ones CPU_STACK.md names), every family alike."""


def qwen2_text(tokenizer: Any) -> dict[str, Any]:
    """A ~0.5 M-parameter Qwen2 language model config."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in CHATML_SPECIALS}
    return {
        "model_type": "qwen2",
        "vocab_size": padded_vocab(tokenizer),
        **TEXT_SIZES,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": False,
    }


TINY_FRAME = 56
"""Frame side of the fixed-size families' tiny processors (4 x 4 patches of 14 pixels)."""
