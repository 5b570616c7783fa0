"""From a Request to the model's chat prompt, with the visual placeholders in order.

Every backend goes through here, so vLLM, transformers and a remote server see the same
prompt for the same request. Where the media go: a request's text may mark them with
``<video>`` and ``<image>`` (the i-th ``<video>`` is ``request.videos[i]``); without markers
all videos, then all images, come before the text, as Qwen's own examples do.

A model family fed frames as images (``FamilySpec.feed == "images"``) gets each video as
its frames, one image item each after the family's per-frame marker ("Frame1: "...), and
the engines send those frames as images, in that order, before the request's own images.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from evalkit.engines.base import Request
from evalkit.errors import EvalkitError

if TYPE_CHECKING:
    from evalkit.engines.family import ModelFamily

VIDEO_MARK = "<video>"
IMAGE_MARK = "<image>"
_MARKS = re.compile(r"(<video>|<image>)")


def content_items(request: Request, family: ModelFamily | None = None) -> list[dict[str, Any]]:
    """The user turn as chat content items (``{"type": "video"|"image"|"text", ...}``);
    with a family fed frames as images, each video as its frames (see the module)."""
    items = _items(request)
    if family is None or family.family.feed != "images":
        return items
    marker, videos = family.family.frame_marker, iter(request.videos)
    out: list[dict[str, Any]] = []
    for item in items:
        if item["type"] != "video":
            out.append(item)
            continue
        for i in range(len(next(videos).array)):
            out += [{"type": "text", "text": marker.format(i=i + 1)}, {"type": "image"}]
    return out


def media_images(request: Request, family: ModelFamily | None = None) -> list[np.ndarray]:
    """The images a request sends, in prompt order: a family fed frames as images sends
    its videos' frames (each video where its marker is), then the request's images."""
    if family is None or family.family.feed != "images":
        return list(request.images)
    images, videos, stills = [], iter(request.videos), iter(request.images)
    for item in _items(request):
        if item["type"] == "video":
            images += list(next(videos).array)
        elif item["type"] == "image":
            images.append(next(stills))
    return images


def _items(request: Request) -> list[dict[str, Any]]:
    parts = _MARKS.split(request.text)
    n_video, n_image = parts.count(VIDEO_MARK), parts.count(IMAGE_MARK)
    if n_video == 0 and n_image == 0:
        items: list[dict[str, Any]] = [{"type": "video"} for _ in request.videos]
        items += [{"type": "image"} for _ in request.images]
        if request.text:
            items.append({"type": "text", "text": request.text})
        return items
    if n_video != len(request.videos) or n_image != len(request.images):
        raise EvalkitError(
            f"request {request.id}: text marks {n_video} <video> and {n_image} <image> but "
            f"the request carries {len(request.videos)} videos and {len(request.images)} images"
        )
    items = []
    for part in parts:
        if part == VIDEO_MARK:
            items.append({"type": "video"})
        elif part == IMAGE_MARK:
            items.append({"type": "image"})
        elif part:
            items.append({"type": "text", "text": part})
    return items


def chat_messages(request: Request, family: ModelFamily | None = None) -> list[dict[str, Any]]:
    """System (if any) + one user turn, in the HF chat-template message format."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": content_items(request, family)})
    return messages


def render_prompt(tokenizer: Any, request: Request, family: ModelFamily | None = None) -> str:
    """The prompt text through the checkpoint's chat template (generation prompt added),
    followed by the request's assistant prefix, which the model then continues.

    The prefix goes after the generation prompt as it is, the way the official codes do
    it (LiveCC: ``apply_chat_template(..., add_generation_prompt=True) + answer_prefix``);
    a server given it as a final assistant message with ``continue_final_message``
    renders the same text for templates that keep an assistant message as written.
    """
    text = tokenizer.apply_chat_template(
        chat_messages(request, family), tokenize=False, add_generation_prompt=True
    )
    if not isinstance(text, str):
        raise EvalkitError(f"request {request.id}: chat template did not render to text")
    return text + (request.assistant_prefix or "")


def processor_inputs(
    processor: Any, family: ModelFamily, request: Request, **overrides: Any
) -> Any:
    """HF processor output for ``request``: the chat prompt plus the pre-sampled frames as-is
    (``overrides``: more processor kwargs, e.g. normalisation off for a parity check)."""
    from transformers.video_utils import VideoMetadata

    family.check_frames(request)
    as_images = family.family.feed == "images"
    kwargs: dict[str, Any] = {"text": [render_prompt(processor.tokenizer, request, family)]}
    if request.videos and not as_images:
        kwargs["videos"] = [family.family.processor_frames(v.array) for v in request.videos]
        kwargs["video_metadata"] = [VideoMetadata(**v.meta.to_vllm()) for v in request.videos]
    images = media_images(request, family)
    if images:
        kwargs["images"] = images
    if request.videos or images:
        kwargs.update(family.family.processor_kwargs)
    return processor(**kwargs, **overrides, return_tensors="pt")
