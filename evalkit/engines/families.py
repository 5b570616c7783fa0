"""evalkit's built-in model families (registered into ``evalkit.engines.family.FAMILIES``).

Each entry pins its reference frame settings to a named source: the model card or the
authors' evaluation code, or, where neither says more, the video processor the authors
ship with the checkpoint (its defaults in transformers 5.19). ``tested`` says what evalkit's
own tests run of the family; "not tested here" means listed from its sources only.
"""

from __future__ import annotations

from evalkit.engines.family import FamilySpec, FrameReference, register_family

# qwen-vl-utils 0.0.14 vision_process.py: FPS 2, FPS_MIN_FRAMES 4, FPS_MAX_FRAMES 768,
# VIDEO_MIN_PIXELS 128 x 28 x 28, VIDEO_MAX_PIXELS 768 x 28 x 28: the terms every pinned
# benchmark spec is written in.
_QWEN_REF = FrameReference(
    source="qwen-vl-utils 0.0.14 vision_process.py (fetch_video: FPS, FPS_MAX_FRAMES, "
    "VIDEO_MIN/MAX_PIXELS); each benchmark spec pins its own in these terms",
    fps=2.0,
    max_frames=768,
    min_pixels=128 * 28 * 28,
    max_pixels=768 * 28 * 28,
    resize="torchvision",
)
_QWEN_PROMPT = (
    "chat template: <|vision_start|><|video_pad|><|vision_end|> where the video goes, "
    "expanded by the processor"
)
_QWEN_TESTED = "tiny checkpoint: vLLM CPU and transformers give the same tokens; evalkit run"

for _name, _title, _types, _arch, _patch, _prompt in [
    ("qwen2_vl", "Qwen2-VL", ("qwen2_vl",), "Qwen2VLForConditionalGeneration", 14, ""),
    (
        "qwen2_5_vl",
        "Qwen2.5-VL",
        ("qwen2_5_vl",),
        "Qwen2_5_VLForConditionalGeneration",
        14,
        "; the frames' timing goes into M-RoPE positions",
    ),
    (
        "qwen3_vl",
        "Qwen3-VL",
        ("qwen3_vl", "qwen3_vl_moe"),
        "Qwen3VLForConditionalGeneration",
        16,
        "; the processor writes '<t seconds>' before each temporal patch",
    ),
    (
        "qwen3_5",
        "Qwen3.5",
        ("qwen3_5", "qwen3_5_moe"),
        "Qwen3_5ForConditionalGeneration",
        16,
        "; the processor writes '<t seconds>' before each temporal patch",
    ),
]:
    register_family(
        FamilySpec(
            name=_name,
            title=_title,
            model_types=_types,
            architectures=(_arch,),
            reference=_QWEN_REF,
            prompt=_QWEN_PROMPT + _prompt,
            patch_size=_patch,
            qwen_terms=True,
            trainable=True,
            tiny=True,
            tested=_QWEN_TESTED,
        )
    )

_OMNI_AUDIO = "off: the audio track is neither decoded nor sent (use_audio_in_video=False)"
register_family(
    FamilySpec(
        name="qwen2_5_omni",
        title="Qwen2.5-Omni (thinker, video only)",
        model_types=("qwen2_5_omni",),
        architectures=("Qwen2_5OmniForConditionalGeneration",),
        reference=_QWEN_REF,
        prompt="chat template: <|vision_bos|><|VIDEO|><|vision_eos|>, expanded by the processor",
        qwen_terms=True,
        audio=_OMNI_AUDIO,
        image_pad="<|IMAGE|>",
        video_pad="<|VIDEO|>",
        hf_model="Qwen2_5OmniThinkerForConditionalGeneration",
        tiny=True,
        tested="tiny checkpoint (thinker): evalkit run on vLLM CPU; vLLM and transformers "
        "(its thinker class) give the same tokens",
    )
)
# Qwen3-Omni's README ("Setting for Evaluation": every video at fps=2, no system prompt,
# the text after the media) and its loader, qwen-omni-utils 0.0.9 v2_5/vision_process.py:
# FPS 2, FPS_MAX_FRAMES 768, VIDEO_MIN/MAX_TOKEN_NUM 128/768 tokens of (image_patch_size x
# 2)^2 pixels, total_pixels MODEL_SEQ_LEN 128000 x that x 0.9; the README's process_mm_info
# calls leave image_patch_size at 14, so frames come out on the 28 grid, and its processor
# calls leave do_resize on: Qwen3OmniMoeProcessor resizes them again onto the tower's 32
# grid under its own video defaults (128-768 x 32^2 px, transformers
# processing_qwen3_omni_moe.py). Values as qwen-vl-utils', applied twice.
_QWEN3_OMNI_REF = FrameReference(
    source="Qwen3-Omni README (Setting for Evaluation: fps=2); qwen-omni-utils 0.0.9 "
    "v2_5/vision_process.py (fetch_video at its default image_patch_size 14: FPS, "
    "FPS_MAX_FRAMES, VIDEO_MIN/MAX_TOKEN_NUM, MODEL_SEQ_LEN), then the processor's own "
    "resize onto the 32-pixel grid (Qwen3OmniMoeProcessor video defaults: 128-768 x 32² px)",
    fps=2.0,
    max_frames=768,
    min_pixels=128 * 28 * 28,
    max_pixels=768 * 28 * 28,
    total_pixels=int(128_000 * 28 * 28 * 0.9),
    resize="torchvision",
)
register_family(
    FamilySpec(
        name="qwen3_omni_moe",
        title="Qwen3-Omni (thinker, video only)",
        model_types=("qwen3_omni_moe",),
        architectures=("Qwen3OmniMoeForConditionalGeneration",),
        reference=_QWEN3_OMNI_REF,
        prompt="chat template: <|vision_start|><|video_pad|><|vision_end|>, expanded by the "
        "processor",
        grid="processor",  # the loader's 28 grid in the cache; the processor's 32 grid after
        patch_size=16,
        qwen_terms=True,
        loader_patch=14,
        audio=_OMNI_AUDIO,
        hf_model="Qwen3OmniMoeThinkerForConditionalGeneration",
        tiny=True,
        tested="tiny checkpoint (thinker, MoE): evalkit run on vLLM CPU; vLLM and transformers "
        "(its thinker class) give the same tokens",
    )
)

register_family(
    FamilySpec(
        name="llava_onevision",
        title="LLaVA-OneVision",
        model_types=("llava_onevision",),
        architectures=("LlavaOnevisionForConditionalGeneration",),
        reference=FrameReference(
            source="lmms-eval lmms_eval/models/llava_onevision.py (max_frames_num=32; "
            "load_video: np.linspace(0, total - 1, 32, dtype=int)); 384x384: "
            "llava-hf/llava-onevision-qwen2-7b-ov-hf video processor",
            nframes=32,
            sampling="linspace",
            size=384,
        ),
        prompt="chat template (ChatML) with one <video> token; the processor expands it to "
        "T x pooled patch tokens and one newline",
        grid="fixed",
        temporal_patch=1,
        # transformers 5 writes the SigLIP tower as vision_tower.*; vLLM 0.32 loads
        # vision_tower.vision_model.* (seen with a tiny checkpoint saved by 5.19)
        weight_renames=(("vision_tower.", "vision_tower.vision_model."),),
        # vLLM 0.32's _process_video_pixels returns (1, N, D) tensors for videos of unequal
        # frame counts encoded in one step, and the engine dies ("Expected multimodal
        # embeddings to be a sequence of 2D tensors"): seen in a sweep over two counts
        one_frame_count_per_step=True,
        tiny=True,
        tested="tiny checkpoint: evalkit run and sweep on vLLM CPU; vLLM and transformers give "
        "the same tokens; frame parity",
    )
)
register_family(
    FamilySpec(
        name="llava_next_video",
        title="LLaVA-NeXT-Video",
        model_types=("llava_next_video",),
        architectures=("LlavaNextVideoForConditionalGeneration",),
        reference=FrameReference(
            source="llava-hf/LLaVA-NeXT-Video-7B-hf model card ('sampled uniformly to be 32 "
            "frames per clip')",
            nframes=32,
            sampling="linspace",
            max_pixels=336 * 336 * 4,
        ),
        prompt="chat template (USER: ... ASSISTANT:) with one <video> token, expanded by the "
        "processor",
        grid="processor",  # shortest edge then a centre crop: left to its processor
        temporal_patch=1,
        # transformers 5 writes the CLIP tower as vision_tower.*; vLLM 0.32 loads
        # vision_tower.vision_model.* (seen with a tiny checkpoint saved by 5.19)
        weight_renames=(("vision_tower.", "vision_tower.vision_model."),),
        tiny=True,
        tested="tiny checkpoint: evalkit run on vLLM CPU; vLLM and transformers give the same "
        "tokens; frame parity measured (same frames, resized twice: mean abs difference "
        "<= 1.7 levels)",
    )
)
register_family(
    FamilySpec(
        name="internvl",
        title="InternVL 2.5/3/3.5 (HF format)",
        model_types=("internvl",),
        architectures=("InternVLForConditionalGeneration",),
        reference=FrameReference(
            source="OpenGVLab InternVL3 / InternVL3.5 model cards, video example: "
            "load_video(num_segments=32, max_num=1, input_size=448), get_index = segment "
            "middles, 'Frame{i}: <image>' per frame (lmms-eval internvl2.py alike)",
            nframes=32,
            sampling="segments",
            size=448,
        ),
        prompt="chat template with one <video> token; the processor writes "
        "'Frame{i}: <img>...</img>' per frame, one 448 tile each",
        grid="fixed",
        temporal_patch=1,
        tiny=True,
        tested="tiny checkpoint: evalkit run on vLLM CPU; vLLM and transformers give the same "
        "tokens; frame parity",
    )
)
register_family(
    FamilySpec(
        name="internvl_chat",
        title="InternVL 2.5/3/3.5 (chat format, remote code)",
        model_types=("internvl_chat",),
        architectures=("InternVLChatModel",),
        reference=FrameReference(
            source="OpenGVLab InternVL3 model card, video example (as internvl)",
            nframes=32,
            sampling="segments",
            size=448,
        ),
        prompt="the checkpoint's template; vLLM's processor writes 'Frame{i}: <image>' per frame",
        grid="fixed",
        temporal_patch=1,
        trust_remote_code=True,
        tested="not tested here (remote code; no tiny checkpoint)",
    )
)
register_family(
    FamilySpec(
        name="glm4v",
        title="GLM-4.1V / GLM-4.5V",
        model_types=("glm4v", "glm4v_moe"),
        architectures=("Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration"),
        reference=FrameReference(
            source="zai-org/GLM-4.1V-9B-Thinking video processor (Glm4vVideoProcessor: fps 2, "
            "max_duration 300 s; 28-px grid, 28x28x2x30000 px per video; no per-frame cap "
            "beyond evalkit's 768-token one)",
            fps=2.0,
            max_frames=600,
            sampling="stride",
            min_pixels=112 * 112,
            max_pixels=768 * 28 * 28,
            total_pixels=28 * 28 * 30000,
        ),
        prompt="chat template: <|begin_of_video|><|video|><|end_of_video|>; the processor "
        "writes each temporal patch as <|begin_of_image|>...<|end_of_image|> and its second",
        video_metadata={"do_sample_frames": False},
        tiny=True,
        tested="tiny checkpoint: evalkit run on vLLM CPU; vLLM and transformers give the same "
        "tokens; frame parity",
        image_pad="<|image|>",
        video_pad="<|video|>",
    )
)
register_family(
    FamilySpec(
        name="gemma4",
        title="Gemma 4",
        model_types=("gemma4",),
        architectures=("Gemma4ForConditionalGeneration",),
        reference=FrameReference(
            source="transformers 5.19 Gemma4VideoProcessor defaults (num_frames 32, "
            "patch 16, max_soft_tokens 70, pooling 3: aspect kept, sides multiples of 48)",
            nframes=32,
            max_pixels=70 * 9 * 16 * 16,
        ),
        prompt="chat template; the processor expands each frame with its timestamp",
        grid="processor",
        patch_size=16,
        temporal_patch=1,
    )
)
register_family(
    FamilySpec(
        name="ernie4_5_vl_moe",
        title="ERNIE-4.5-VL",
        model_types=("ernie4_5_vl_moe",),
        architectures=("Ernie4_5_VLMoeForConditionalGeneration",),
        reference=FrameReference(
            source="transformers 5.19 Ernie4_5_VLMoeVideoProcessor defaults (16-180 frames, "
            "299-1196 x 28x28 px per frame)",
            fps=2.0,
            max_frames=180,
            min_pixels=299 * 28 * 28,
            max_pixels=1196 * 28 * 28,
        ),
        prompt="chat template; the processor draws each frame's timestamp into it",
        grid="processor",
    )
)
register_family(
    FamilySpec(
        name="minicpmv4_6",
        title="MiniCPM-V 4.6",
        model_types=("minicpmv4_6",),
        architectures=("MiniCPMV4_6ForConditionalGeneration",),
        reference=FrameReference(
            source="transformers 5.19 MiniCPMV4_6VideoProcessor defaults (sample_frames: one "
            "frame per second of the clip, <= max_num_frames 128; scale_resolution 448)",
            fps=1.0,
            max_frames=128,
            max_pixels=448 * 448,
        ),
        prompt="chat template; the processor places each frame",
        grid="processor",
        temporal_patch=1,
    )
)
for _name, _title, _arch in [
    ("keye", "Keye-VL", "KeyeForConditionalGeneration"),
    ("keye_vl1_5", "Keye-VL 1.5", "KeyeVL1_5ForConditionalGeneration"),
]:
    register_family(
        FamilySpec(
            name=_name,
            title=f"{_title} (remote code)",
            model_types=(_name,),
            architectures=(_arch,),
            reference=FrameReference(
                source="none pinned: the checkpoint's own processor decides (remote code; "
                "its slow-fast scheme is not reproduced; evalkit caps frames at qwen-vl-utils' "
                "2 fps and pixel budget and leaves the rest to it)",
                fps=2.0,
                max_frames=768,
                max_pixels=768 * 28 * 28,
            ),
            prompt="the checkpoint's chat template and processor",
            grid="processor",
            trust_remote_code=True,
            tested="not tested here (remote code)",
        )
    )
