"""Greedy generation with the proxy: the one decoding loop of the package.

Generation is a capability of the loaded proxy, like its attention: HyDE reranking
(:mod:`ragattn.rerank.hyde`) writes its hypothetical answer with it, and the pipeline's
:class:`~ragattn.generate.LocalGenerator` its answers. A method spec says whether a method uses it
(``MethodSpec.generates``), apart from whether it reads attention (``reads_attention``).

Greedy decoding (no sampling, one beam) makes a completion a function of the prompt alone, so a
cached completion equals a fresh one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ragattn.errors import InputTooLargeError
from ragattn.proxy import Proxy


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A greedy completion and what it cost.

    Attributes:
        text: the decoded new tokens, special tokens skipped, whitespace-stripped.
        prompt_tokens: tokens of the prompt, in the proxy's tokenizer.
        completion_tokens: generated tokens, without a final end-of-sequence token.
        seconds: wall-clock seconds of the ``generate`` call.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def greedy_complete(proxy: Proxy, prompt: str, *, max_new_tokens: int) -> Completion:
    """Continue ``prompt`` (already in the model's chat template, if any) greedily.

    The prompt is tokenized without special tokens (the template carries them).

    Args:
        proxy: the loaded proxy.
        prompt: the text to continue.
        max_new_tokens: most tokens generated.

    Returns:
        The :class:`Completion`.

    Raises:
        InputTooLargeError: the prompt plus ``max_new_tokens`` exceeds the model's positions.
    """
    import torch

    tok = proxy.tokenizer
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    ids = ids.to(proxy.device)
    n_prompt = int(ids.shape[1])
    if n_prompt + max_new_tokens > proxy.max_positions:
        raise InputTooLargeError(
            f"the prompt has {n_prompt} tokens; with max_new_tokens={max_new_tokens} it "
            f"exceeds the {proxy.max_positions} positions of {proxy.name}"
        )
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    started = time.perf_counter()
    with torch.inference_mode():
        out = proxy.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad,
        )
    seconds = time.perf_counter() - started
    new = out[0, n_prompt:]
    completion = int(new.shape[0])
    eos = tok.eos_token_id
    if completion and eos is not None and int(new[-1]) == eos:
        completion -= 1  # the end-of-turn token is not part of the answer
    text: str = tok.decode(new, skip_special_tokens=True)
    return Completion(
        text=text.strip(), prompt_tokens=n_prompt, completion_tokens=completion, seconds=seconds
    )


__all__ = ["Completion", "greedy_complete"]
