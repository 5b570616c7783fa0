"""evalkit's built-in model families (registered into ``evalkit.engines.family.FAMILIES``).

Each entry pins its reference frame settings to a named source: the model card or the
authors' evaluation code, or, where neither says more, the video processor the authors
ship with the checkpoint (its defaults in transformers 5.19). ``tested`` says what evalkit's
own tests run of the family; "not tested here" means listed from its sources only.
"""

from __future__ import annotations

from typing import Any

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

# qwen-vl-utils' video defaults with its per-video budget (VIDEO_TOTAL_PIXELS, MODEL_SEQ_LEN
# 128000 x 28 x 28 x 0.9), as the loaders that copy it keep them (qwen-omni-utils 0.0.9,
# keye-vl-utils 1.0.0)
_QWEN_LOADER: dict[str, Any] = {
    "fps": 2.0,
    "max_frames": 768,
    "min_pixels": 128 * 28 * 28,
    "max_pixels": 768 * 28 * 28,
    "total_pixels": int(128_000 * 28 * 28 * 0.9),
    "resize": "torchvision",
}
# vLLM 0.32's Ernie4_5_VLMoeForConditionalGeneration is written for Baidu's remote-code
# checkpoints (model_type ernie4_5_moe_vl): it reads spatial_conv_size, pixel_hidden_size,
# im_patch_id from a flat config and calls their processor with '<|video@placeholder|>';
# transformers 5's format (nested text/vision configs, Ernie4_5_VLMoeProcessor) fails there.
_ERNIE_VLLM = (
    "vLLM 0.32 serves ERNIE-4.5-VL only as Baidu's remote-code checkpoints (model_type "
    "ernie4_5_moe_vl, --trust-remote-code): a checkpoint in transformers 5's format "
    "(ernie4_5_vl_moe) fails there (its config has no spatial_conv_size; vLLM's processor "
    "cannot call Ernie4_5_VLMoeProcessor); run it with --engine hf"
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
        tested="tiny checkpoint (thinker): evalkit run and sweep on vLLM CPU; vLLM and "
        "transformers "
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
    **_QWEN_LOADER,
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
            "frames per clip'); max_pixels: evalkit's storage cap, not the authors'",
            nframes=32,
            sampling="linspace",
            # evalkit's storage cap, not the authors': the cache keeps a clip's own frames
            # up to 672x672 (4x the 336x336 crop); a larger frame is scaled into it first,
            # the one place the tower's pixels can differ from the reference path's
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
        tested="tiny checkpoint: evalkit run and sweep on vLLM CPU; vLLM and transformers give "
        "the same "
        "tokens; frame parity 0 (frames above 672x672 px: capped by evalkit)",
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
        tested="tiny checkpoint: evalkit run and sweep on vLLM CPU; vLLM and transformers give "
        "the same "
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
        tested="tiny checkpoint: evalkit run and sweep on vLLM CPU; vLLM and transformers give "
        "the same "
        "tokens; frame parity",
        image_pad="<|image|>",
        video_pad="<|video|>",
    )
)
# Gemma 4's video processor as Google ships it (google/gemma-4-*-it processor_config.json:
# num_frames 32, max_soft_tokens 70, patch 16, pooling 3) with transformers 5.19's
# sampling for it (Gemma4VideoProcessor keeps BaseVideoProcessor.sample_frames:
# video_utils.default_sample_indices_fn, arange(32) * total // 32); vLLM 0.32 encodes
# video frames at the same 70 soft tokens, 32 frames at most (gemma4_mm.py).
register_family(
    FamilySpec(
        name="gemma4",
        title="Gemma 4",
        model_types=("gemma4",),
        architectures=("Gemma4ForConditionalGeneration",),
        reference=FrameReference(
            source="google/gemma-4-*-it processor_config.json video_processor (num_frames 32, "
            "max_soft_tokens 70, patch_size 16, pooling_kernel_size 3: aspect kept, sides "
            "multiples of 48, <= 630 patches); frames: transformers 5.19 "
            "Gemma4VideoProcessor.sample_frames = video_utils.default_sample_indices_fn "
            "(np.arange(32) * total // 32)",
            nframes=32,
            sampling="arange",
            max_pixels=70 * 9 * 16 * 16,
        ),
        prompt="chat template: one <|video|> per video in the user turn; the processor writes "
        "each frame as 'mm:ss <|image>', its soft tokens (<= 70) as <|video|>, '<image|>'",
        grid="processor",  # aspect-kept resize to multiples of 48 under 630 patches
        patch_size=16,
        temporal_patch=1,
        image_pad="<|image|>",
        video_pad="<|video|>",
        tiny=True,
        tested="tiny checkpoint: evalkit run and sweep on vLLM CPU; vLLM and transformers give "
        "the same "
        "tokens; frame parity measured",
    )
)
register_family(
    FamilySpec(
        name="ernie4_5_vl_moe",
        title="ERNIE-4.5-VL",
        model_types=("ernie4_5_vl_moe",),
        architectures=("Ernie4_5_VLMoeForConditionalGeneration",),
        reference=FrameReference(
            source="Baidu FastDeploy fastdeploy/input/ernie4_5_vl_processor (process.py "
            "DataProcessor: video_fps 2, video_min_frames 16, video_max_frames 180, "
            "video_frames_sample 'leading', video_min/max_pixels 299/1196 x 28x28, each "
            "frame's timestamp drawn into it; process_video.py get_frame_indices); "
            "transformers 5.19 Ernie4_5_VLMoeVideoProcessor has the same frame and pixel "
            "bounds",
            fps=2.0,
            min_frames=16,
            max_frames=180,
            sampling="leading",
            min_pixels=299 * 28 * 28,
            max_pixels=1196 * 28 * 28,
        ),
        prompt="chat template: 'Video 1:<|VIDEO_START|><|VIDEO_PLACEHOLDER|><|VIDEO_END|>' "
        "where the video goes, expanded by the processor, which draws each frame's "
        "timestamp into it",
        grid="processor",
        image_pad="<|IMAGE_PLACEHOLDER|>",
        video_pad="<|VIDEO_PLACEHOLDER|>",
        vllm_refusal=_ERNIE_VLLM,
        tiny=True,
        tested="tiny checkpoint (MoE, text and vision experts): evalkit run on the HF "
        "engine; frame parity 0 (timestamps drawn); vLLM 0.32 refuses the transformers-5 format",
    )
)
register_family(
    FamilySpec(
        name="minicpmv4_6",
        title="MiniCPM-V 4.6",
        model_types=("minicpmv4_6",),
        architectures=("MiniCPMV4_6ForConditionalGeneration",),
        reference=FrameReference(
            source="OpenBMB/MiniCPM-V README (0dbb566), MiniCPM-V 4.6 'Video Inference' "
            "(max_num_frames=128, stack_frames=1, max_slice_nums=1, use_image_id=False); "
            "transformers 5.19 "
            "MiniCPMV4_6VideoProcessor.sample_frames (a frame per second; a 0.1 s grid thinned "
            "to 128 past 128 s) and scale_resolution 448 (no slices: each frame resized to "
            "about 448x448 on a 56-px grid, aspect kept)",
            fps=1.0,
            max_frames=128,
            sampling="seconds",
            # frames above 448x448 would be sliced where a checkpoint's video processor keeps
            # max_slice_nums > 1 (its default, 9): the cap keeps slices off in vLLM, which
            # reads max_slice_nums from the checkpoint only; no floor: the processor scales
            # every frame to about 448x448 itself
            min_pixels=56 * 56,
            max_pixels=448 * 448,
        ),
        prompt="chat template: <|video_pad|> where the video goes; the processor writes "
        "<image_id>i</image_id> (vLLM 0.32 always; the authors leave it out for video) and "
        "<image>...</image> per frame",
        grid="processor",
        temporal_patch=1,
        # vLLM 0.32 runs the image processor on each frame with the request's
        # mm_processor_kwargs, which refuses do_sample_frames; it never samples frames
        vllm_kwargs={},
        tiny=True,
        tested="tiny checkpoint: evalkit run on vLLM CPU (bfloat16: its CPU kernel for the "
        "Qwen3.5 delta-net layers) and sweep; vLLM and transformers give the same tokens; "
        "frame parity 0 (above 448x448: scaled down first, max 44 levels on 1280x720)",
    )
)
# Families whose checkpoints ship their own code (config.json auto_map): recognised and run
# with --trust-remote-code only; no tiny checkpoint (their classes are not in transformers
# 5.19), so none is run here. Each reference is pinned from its authors' card or code; what
# FrameReference cannot express is said in its source.
_REMOTE = "not tested here (remote code)"


def _remote(name: str, title: str, arch: str, **fields: Any) -> FamilySpec:
    """A family whose checkpoints ship their own code (model type ``name``, one vLLM
    architecture): runs only with ``--trust-remote-code``, not run here, its frames left to
    its processor unless ``fields`` say otherwise."""
    spec = FamilySpec(
        name=name,
        title=f"{title} (remote code)",
        model_types=(name,),
        architectures=(arch,),
        trust_remote_code=True,
        tested=_REMOTE,
        **{"grid": "processor", **fields},
    )
    return register_family(spec)


_MINICPMV_1FPS = FrameReference(
    source="OpenBMB/MiniCPM-V docs/minicpm_v2dot6_en.md 'Video understanding' (MiniCPM-V 2.6) and "
    "README 'Chat with Video' for MiniCPM-V 4.0 / MiniCPM-o 2.6 (e2559a5, 53c0174): encode_video, "
    "MAX_NUM_FRAMES=64, one frame every round(avg_fps) frames from frame 0, past 64 "
    "uniform_sample (segment middles) of those; use_image_id=False, max_slice_nums=2. evalkit: "
    "1 fps by its stride rule (index ceil(i x source fps); past 64, 64 spread over the clip). "
    "Not reproduced: max_slice_nums=2 (vLLM 0.32 encodes each video frame as one 448-px slice, "
    "MiniCPMVProcessingInfo.get_video_max_slice_num = 1)",
    fps=1.0,
    max_frames=64,
    sampling="stride",
    max_pixels=448 * 448,
)
_MINICPMV_45 = FrameReference(
    source="OpenBMB/MiniCPM-V README at 06e220c ('add minicpm-v-4.5') 'Chat with Video': "
    "encode_video(choose_fps=5), MAX_NUM_FRAMES=180, MAX_NUM_PACKING=3, uniform_sample (segment "
    "middles) over every frame; use_image_id=False, max_slice_nums=1, temporal_ids. Not "
    "reproduced: the 3D-resampler packing (past 180 frames up to 3 frames share 64 tokens, grouped "
    "by temporal_ids at TIME_SCALE 0.1 s): vLLM 0.32 passes no temporal_ids and encodes each frame "
    "as its own 64 tokens, so evalkit caps at 180 frames",
    fps=5.0,
    max_frames=180,
    sampling="segments",
    max_pixels=448 * 448,
)
_MINICPM_PROMPT = (
    "chat template with (<video>./</video>); vLLM's processor expands it to one 448-px "
    "<image>...</image> slice per frame, no image ids"
)
for _name, _title, _arch, _extra in [
    ("minicpmv", "MiniCPM-V 2.6 / 4.0 / 4.5", "MiniCPMV", "; video from version 2.6 on"),
    (
        "minicpmo",
        "MiniCPM-o 2.6 (vision only)",
        "MiniCPMO",
        "; the audio track is not sent. MiniCPM-o 4.5 (also minicpmo, version 4.5) reads video "
        "with minicpmo.utils get_video_frame_audio_segments, not read here: it gets the 2.6 "
        "setting",
    ),
]:
    _remote(
        _name,
        _title,
        _arch,
        reference=_MINICPMV_1FPS,
        version_references=(("4.5", _MINICPMV_45),) if _name == "minicpmv" else (),
        prompt=_MINICPM_PROMPT + _extra,
        temporal_patch=1,
    )
_remote(
    "ovis2_5",
    "Ovis2.5",
    "Ovis2_5",
    reference=FrameReference(
        source="AIDC-AI/Ovis ovis/serve/infer_basic_demo.py run_video_example (num_frames=8, "
        "indices int(i * total_frames / num_frames), min_pixels=448*448, "
        "max_pixels=896*896). evalkit takes the 8 segment middles: the demo takes the "
        "segment starts (each index half a segment earlier)",
        nframes=8,
        sampling="segments",
        min_pixels=448 * 448,
        max_pixels=896 * 896,
    ),
    prompt="the checkpoint's chat template with <video>; vLLM's processor expands it",
)
_remote(
    "llava_onevision2",
    "LLaVA-OneVision-2",
    "LlavaOnevision2ForConditionalGeneration",
    reference=FrameReference(
        source="lmms-eval lmms_eval/models/chat/llava_onevision2.py, the authors' wrapper "
        "(qwen_vl_utils.fetch_video: fps=1.0, max_num_frames=32, min_pixels=256*28*28, "
        "max_pixels=1605632). Not reproduced: the wrapper sends the frames as images, each "
        "after '<t seconds>'; evalkit sends one video through vLLM's OV2 processor; its "
        "codec backend (use_codec) is not used",
        fps=1.0,
        max_frames=32,
        min_pixels=256 * 28 * 28,
        max_pixels=1605632,
        resize="torchvision",
    ),
    prompt="the checkpoint's chat template: <|vision_start|><|video_pad|><|vision_end|>, "
    "expanded by vLLM's OV2 processor",
)
_remote(
    "molmo2",
    "Molmo2",
    "Molmo2ForConditionalGeneration",
    reference=FrameReference(
        source="allenai/Molmo2-8B video_preprocessor_config.json (Molmo2VideoProcessor: "
        "frame_sample_mode uniform_last_frame, max_fps 2, num_frames 384, 378x378), the rule "
        "as vLLM 0.32 molmo2.py _sample_frames applies it: a frame every 1/2 s plus the last "
        "one while the clip is at most 383/2 s long, else np.linspace(0, total - 1, "
        "384).astype(int). evalkit: 2 fps, <= 384 frames, np.linspace rounded down; the short "
        "clips' appended last frame and rounded steps are not reproduced",
        fps=2.0,
        max_frames=384,
        sampling="linspace",
        max_pixels=378 * 378,
    ),
    prompt="the checkpoint's chat template with <|video|>; vLLM's processor writes each "
    "frame with its timestamp (from the frames' indices)",
    temporal_patch=1,
)
_remote(
    "interns1",
    "Intern-S1",
    "InternS1ForConditionalGeneration",
    reference=FrameReference(
        source="no Intern-S1 frame setting found (its InternS1VideoProcessor is transformers' "
        "InternVLVideoProcessor, which samples nothing by default); taken from its vision "
        "tower's lineage, the InternVL3 model card's video example: "
        "load_video(num_segments=32, input_size=448), segment middles",
        nframes=32,
        sampling="segments",
        size=448,
    ),
    prompt="the checkpoint's chat template; the processor writes 'Frame{i}: <img>...</img>' "
    "per frame, one 448 tile each",
    grid="fixed",
    temporal_patch=1,
)
_remote(
    "keye",
    "Keye-VL",
    "KeyeForConditionalGeneration",
    reference=FrameReference(
        source="Kwai-Keye/Keye keye-vl-utils 1.0.0 vision_process.py (a copy of qwen-vl-utils: "
        "FPS 2, FPS_MIN/MAX_FRAMES 4/768, VIDEO_MIN/MAX_PIXELS 128/768 x 28x28, "
        "VIDEO_TOTAL_PIXELS 128000 x 28x28 x 0.9, round(linspace), torchvision bicubic); "
        "README: process_vision_info with 'fps': 2.0",
        **_QWEN_LOADER,
    ),
    prompt="the checkpoint's chat template: <|vision_start|><|video_pad|><|vision_end|>, "
    "expanded by the processor",
)
_remote(
    "keye_vl1_5",
    "Keye-VL 1.5",
    "KeyeVL1_5ForConditionalGeneration",
    reference=FrameReference(
        source="keye-vl-utils 1.5.2 vision_process.py (FPS 2, at most the source rate; "
        "frame cap VIDEO_TOTAL_PIXELS / VIDEO_MIN_PIXELS = 2048; round(linspace), count "
        "not rounded to 2; VIDEO_MIN/MAX_TOKENS 48/768 x 28x28 per frame, "
        "VIDEO_TOTAL_PIXELS 65536 x 28x28). Not reproduced: its slow-fast scheme (a frame "
        "within 0.9 HSV patch similarity of the last key frame is a fast frame at 0.3x the "
        "tokens, sent as frame_types) and per-frame timestamps: evalkit sends vLLM 0.32 "
        "neither, so every frame is a slow one; its per-video token search is approximated "
        "by total_pixels",
        fps=2.0,
        max_frames=2048,
        min_pixels=48 * 28 * 28,
        max_pixels=768 * 28 * 28,
        total_pixels=65536 * 28 * 28,
    ),
    prompt="the checkpoint's chat template: <|vision_start|><|video_pad|><|vision_end|>; "
    "vLLM's processor writes a frame token before each frame",
)
register_family(
    FamilySpec(
        name="minicpmv4_7",
        title="MiniCPM-V 4.7",
        model_types=("minicpmv4_7",),
        architectures=("MiniCPMV4_7ForConditionalGeneration",),
        reference=FrameReference(
            source="transformers 5.19 MiniCPMV4_6VideoProcessor defaults, the video processor it "
            "maps minicpmv4_7 to (one frame per second of the clip, <= max_num_frames 128; "
            "scale_resolution 448)",
            fps=1.0,
            max_frames=128,
            max_pixels=448 * 448,
        ),
        prompt="chat template; the processor places each frame",
        grid="processor",
        temporal_patch=1,
    )
)
