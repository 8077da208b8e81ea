"""Prompt formats of open fast-apply models, output extraction and stop tokens.

Two formats are in use:

* ``kortix`` (Kortix FastApply): a system turn, then ``<code>``/``<update>`` in the user
  turn; the model answers ``<updated-code>FILE</updated-code>``.
* ``morph`` (Morph / Relace apply): ``<instruction>``/``<code>``/``<update>`` in the user
  turn; the model answers with the raw file (some fine-tunes wrap it in a code fence).

Both go through the tokenizer's own chat template. ``expected_output`` is the text a
model emits for a given merged file: the speculative drafter tokenises it so that drafts
include the tags. ``extract`` turns raw model text back into the file, and
``StreamExtractor`` does the same incrementally, holding back only what could still turn
out to be a tag or a fence, so the deltas it emits concatenate exactly to ``extract``.

>>> KORTIX.extract("<updated-code>x = 1\\n</updated-code>")
'x = 1\\n'
>>> MORPH.extract("```python\\nx = 1\\n```")
'x = 1\\n'
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapply.decoding.speculate import GenerationRequest
    from fastapply.decoding.witness import Reading

KORTIX_SYSTEM = (
    "You are a coding assistant that helps merge code updates, ensuring every "
    "modification is fully integrated."
)
KORTIX_USER = (
    "Merge all changes from the <update> snippet into the <code> below.\n"
    "- Preserve the code's structure, order, comments, and indentation exactly.\n"
    "- Output only the updated code, enclosed within <updated-code> and </updated-code> tags.\n"
    "- Do not include any additional text, explanations, placeholders, ellipses, or code "
    "fences.\n\n"
    "<code>{original}</code>\n\n<update>{snippet}</update>\n\n"
    "Provide the complete updated code."
)
MORPH_USER = (
    "<instruction>{instruction}</instruction>\n<code>{original}</code>\n"
    "<update>{snippet}</update>"
)
MORPH_DEFAULT_INSTRUCTION = "Apply the update to the code."

#: End-of-turn / end-of-text tokens of the model families we serve (Qwen2, Llama 3, ...).
KNOWN_STOP_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>")


@dataclass(frozen=True)
class PromptFormat:
    """How one model family is prompted and how its answer wraps the file."""

    #: Name used in configuration (``kortix`` or ``morph``).
    name: str
    #: Text the model writes before the file ("" for raw output).
    open_tag: str
    #: Text the model writes after the file ("" for raw output).
    close_tag: str

    def messages(self, original: str, snippet: str,
                 instruction: str | None = None) -> list[dict[str, str]]:
        """Chat messages for one merge request."""
        if self.name == "kortix":
            user = KORTIX_USER.format(original=original, snippet=snippet)
            if instruction:
                user = f"{instruction}\n\n{user}"
            return [{"role": "system", "content": KORTIX_SYSTEM},
                    {"role": "user", "content": user}]
        user = MORPH_USER.format(instruction=instruction or MORPH_DEFAULT_INSTRUCTION,
                                 original=original, snippet=snippet)
        return [{"role": "user", "content": user}]

    def expected_output(self, merged: str) -> str:
        """The text a well-behaved model emits for ``merged`` (the drafts' source, the
        training answer). :meth:`extract` drops one newline right after the opening tag
        (models often write one), so a file that starts with a blank line gets a newline
        of its own after the tag: ``extract(expected_output(f)) == f`` for every file.

        >>> KORTIX.expected_output("a\\n"), KORTIX.expected_output("\\na\\n")
        ('<updated-code>a\\n</updated-code>', '<updated-code>\\n\\na\\n</updated-code>')
        >>> all(f == F.extract(F.expected_output(f)) for F in (KORTIX, MORPH)
        ...     for f in ("", "a", "\\n", "\\n\\nb\\n", "  x\\n"))
        True
        """
        lead = "\n" if self.open_tag and merged.startswith("\n") else ""
        return f"{self.open_tag}{lead}{merged}{self.close_tag}"

    def extract(self, text: str) -> str:
        """The file inside a complete model answer (tags and a wrapping fence removed)."""
        return _extract(self, text, final=True)


KORTIX = PromptFormat("kortix", "<updated-code>", "</updated-code>")
MORPH = PromptFormat("morph", "", "")
FORMATS: dict[str, PromptFormat] = {f.name: f for f in (KORTIX, MORPH)}


def get_format(name: str) -> PromptFormat:
    """Look up a format by name; the error lists the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown prompt format {name!r}; use one of: "
                         f"{', '.join(sorted(FORMATS))}") from None


def _is_proper_prefix_of(text: str, whole: str) -> bool:
    return len(text) < len(whole) and whole.startswith(text)


def _held_back(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def _extract(fmt: PromptFormat, text: str, final: bool) -> str:
    """The file text contained in ``text``; with ``final=False`` only what is certain.

    For every prefix p of a text t, ``_extract(fmt, p, False)`` is a prefix of
    ``_extract(fmt, t, True)``: that is what makes streamed deltas add up.
    """
    body = text
    stripped = body.lstrip()
    if fmt.open_tag:
        if stripped.startswith(fmt.open_tag):
            body = stripped[len(fmt.open_tag):]
            if not body and not final:
                return ""  # the newline that often follows the tag may still come
            if body.startswith("\n"):
                body = body[1:]
        elif not final and _is_proper_prefix_of(stripped, fmt.open_tag):
            return ""  # could still become the opening tag
        end = body.find(fmt.close_tag)
        if end >= 0:
            return body[:end]
        if final:
            return body
        return body[: len(body) - _held_back(body, fmt.close_tag)]
    # Raw output, maybe wrapped in a code fence.
    if stripped.startswith("```") or (not final and _is_proper_prefix_of(stripped, "```")):
        newline = stripped.find("\n")
        if newline < 0:
            return ""  # the fence line is not complete yet
        body = stripped[newline + 1:]
        end = body.find("\n```")
        if end >= 0:
            return body[: end + 1]
        if body.startswith("```"):
            return ""
        if final:
            return body
        return body[: len(body) - _held_back(body, "\n```")]
    return body


class StreamExtractor:
    """Turns growing raw model text into file-text deltas.

    >>> s = StreamExtractor(KORTIX)
    >>> [s.feed(t) for t in ["<updated-", "<updated-code>\\nab", "<updated-code>\\nab</upd"]]
    ['', 'ab', '']
    >>> s.finish("<updated-code>\\nab</updated-code>")
    ''
    """

    def __init__(self, fmt: PromptFormat) -> None:
        self.fmt = fmt
        #: Number of characters of extracted text already handed out.
        self.emitted = 0

    def feed(self, raw_text: str) -> str:
        """Return the new certain part of the file, given all raw text so far."""
        certain = _extract(self.fmt, raw_text, final=False)
        delta = certain[self.emitted:]
        self.emitted = max(self.emitted, len(certain))
        return delta

    def finish(self, raw_text: str) -> str:
        """Return what remains once the answer is complete."""
        final = _extract(self.fmt, raw_text, final=True)
        delta = final[self.emitted:]
        self.emitted = len(final)
        return delta


def render_prompt(tokenizer: Any, fmt: PromptFormat, original: str, snippet: str,
                  instruction: str | None = None) -> str:
    """The prompt text (chat template applied, generation prompt added)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("the tokenizer has no chat template; fast-apply models need one "
                         "(set chat_template in tokenizer_config.json)")
    text = tokenizer.apply_chat_template(
        fmt.messages(original, snippet, instruction), tokenize=False,
        add_generation_prompt=True)
    return str(text)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` with no special tokens added."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def build_prompt_ids(tokenizer: Any, fmt: PromptFormat, original: str, snippet: str,
                     instruction: str | None = None) -> list[int]:
    """Token ids of the prompt for one merge request."""
    return encode(tokenizer, render_prompt(tokenizer, fmt, original, snippet, instruction))


def draft_texts(original: str, snippet: str, reading: Reading | None = None) -> list[str]:
    """The drafter's sources as text, best first: candidate merge, original, snippet.
    ``reading`` is the deterministic merge when the caller already has it.

    >>> draft_texts("a = 1\\n", "<<<<<<< SEARCH\\na = 1\\n=======\\na = 2\\n>>>>>>> REPLACE\\n")[0]
    'a = 2\\n'
    """
    from fastapply.decoding.witness import deterministic_reading

    reading = reading or deterministic_reading(original, snippet)
    # an unparsable snippet still leaves two sources
    return ([] if reading.text is None else [reading.text]) + [original, snippet]


#: Characters per piece when a long input is counted piece by piece (see count_past).
PIECE_CHARS = 65_536


def count_past(tokenizer: Any, texts: Iterable[str], limit: int) -> int | None:
    """A token count of ``texts`` that clearly exceeds ``limit``, or None.

    Long texts are tokenized in pieces that end at a newline, stopping as soon as the
    count passes ``limit`` by more than 4 tokens a piece (what a cut between pieces can
    add), so refusing a 4 MB file for an 8k context tokenizes about 8k tokens of it,
    not all of it (4.6 s on the dev machine). Texts whose UTF-8 bytes cannot reach
    ``limit`` (a token holds at least one byte) are not counted at all.

    >>> class Chars:  # a tokenizer of one token per character
    ...     def encode(self, text, add_special_tokens=False): return list(text)
    >>> count_past(Chars(), ["ab\\n" * 40_000], 1_000) > 1_000
    True
    >>> count_past(Chars(), ["ab\\n"], 1_000) is None
    True
    """
    texts = tuple(texts)
    if sum(len(t) for t in texts) * 4 <= limit:  # at most 4 UTF-8 bytes a character
        return None
    total = pieces = 0
    for text in texts:
        start = 0
        while start < len(text):
            end = text.find("\n", start + PIECE_CHARS)
            end = len(text) if end < 0 else end + 1
            total += len(encode(tokenizer, text[start:end]))
            pieces += 1
            start = end
            if total > limit + 4 * pieces:
                return total
    return None


def refuse_far_over(tokenizer: Any, texts: Iterable[str], context_limit: int) -> None:
    """ContextLimitError when ``texts`` clearly pass ``context_limit`` tokens, counted only
    as far as the limit (:func:`count_past`); free for texts that cannot reach it."""
    from fastapply.decoding.speculate import ContextLimitError

    over = count_past(tokenizer, texts, context_limit)
    if over is not None:
        raise ContextLimitError(
            f"the prompt is more than {over} tokens (counted until it passed the "
            f"limit) but the context limit is {context_limit} tokens (and the merged "
            f"file needs room too); send a smaller file or serve a model with a longer "
            f"context")


def build_request(tokenizer: Any, fmt: PromptFormat, original: str, snippet: str,
                  instruction: str | None = None, *, stop_ids: Collection[int],
                  max_new_tokens: int, max_draft_len: int,
                  context_limit: int | None = None,
                  reading: Reading | None = None) -> GenerationRequest:
    """The one place a merge becomes a generation request: prompt ids, the drafter's
    sources (each as the model would emit it, tags included), stop ids and budget.

    With ``context_limit``, a prompt that does not fit raises ContextLimitError before
    the sources are merged and tokenized (twice the prompt's work: a 3.9 MB file took
    16 s to refuse, 5 s of it for the prompt); one clearly over it is refused after
    counting only as much of it as the limit (:func:`count_past`)."""
    from fastapply.decoding.speculate import GenerationRequest, check_context

    if context_limit is not None:
        refuse_far_over(tokenizer, (original, snippet, instruction or ""), context_limit)
    prompt_ids = build_prompt_ids(tokenizer, fmt, original, snippet, instruction)
    if context_limit is not None:
        check_context(len(prompt_ids), context_limit)
    sources = [encode(tokenizer, fmt.expected_output(text))
               for text in draft_texts(original, snippet, reading)]
    return GenerationRequest(prompt_ids, sources, frozenset(stop_ids), max_new_tokens,
                             max_draft_len)


def stop_token_ids(tokenizer: Any, eos_token_id: int | Iterable[int] | None = None) -> set[int]:
    """Every token id that ends an answer: the model's EOS ids plus known end tokens.

    ``eos_token_id`` is what the model's ``generation_config`` says (an int or a list).
    """
    ids: set[int] = set()
    if isinstance(eos_token_id, int):
        ids.add(eos_token_id)
    elif eos_token_id is not None:
        ids.update(int(i) for i in eos_token_id)
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in KNOWN_STOP_TOKENS if t in vocab)
    return ids
