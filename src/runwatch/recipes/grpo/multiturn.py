"""A multi-turn environment: guess a secret number from higher/lower hints.

Each turn the model writes a number; a parse step reads it (and can fail), and the
environment answers "higher", "lower" or ends the episode. An episode's tokens are one
sequence (prompt, guesses, hints), so the trainer scores every guess of an episode
with that episode's advantage.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

from runwatch.recipes.chat import render_prompt
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.rollout import Group, Sample
from runwatch.recipes.inference import generate
from runwatch.recipes.tokenizer import ChatTokenizer

SYSTEM_PROMPT = "guess"


def parse_guess(text: str, guess_max: int) -> int | None:
    """The guessed number, or None when the reply is not a number in 1..guess_max."""
    text = text.strip()
    if not text.isdigit():
        return None
    value = int(text)
    return value if 1 <= value <= guess_max else None


def hint(guess: int, secret: int) -> str:
    return "higher" if guess < secret else "lower"


@dataclass
class _Episode:
    secret: int
    ids: list[int]
    gen_mask: list[int]
    gen_logprobs: list[float]
    prompt_tokens: int
    transcript: list[dict[str, str]]
    turns: int = 0
    generated: int = 0
    drift: int = 0
    done: bool = False
    terminated: bool = False
    parse_failure: bool = False
    context_overflow: bool = False
    turn_limit: bool = False


class GuessNumberEnv:
    """Episodes of up to `max_turns` guesses; reward 1 when the secret is found."""

    kind = "episodes"

    def __init__(self, tok: ChatTokenizer, cfg: GRPOConfig) -> None:
        self.tok, self.cfg = tok, cfg

    def secrets(self, n: int, seed: int) -> list[str]:
        rng = random.Random(seed)
        return [str(rng.randint(1, self.cfg.guess_max)) for _ in range(n)]

    def rollout(self, model: nn.Module, questions: list[str], group_size: int,
                temperature: float, gen: torch.Generator | None,
                trace: list[int] | None = None, version: int = 0) -> list[Group]:
        """Play one episode per (secret, group member); all live episodes step together."""
        cfg, tok = self.cfg, self.tok
        opening = f"1-{cfg.guess_max}"
        first = render_prompt(tok, [{"role": "system", "content": SYSTEM_PROMPT},
                                    {"role": "user", "content": opening}])
        episodes = [
            _Episode(secret=int(q), ids=list(first), gen_mask=[0] * len(first),
                     gen_logprobs=[0.0] * len(first), prompt_tokens=len(first), transcript=[])
            for q in questions for _ in range(group_size)
        ]
        while True:
            live = [e for e in episodes if not e.done]
            for e in live:
                # A turn needs room for a reply; without it the episode overflows context.
                if len(e.ids) + cfg.max_sample_tokens > cfg.max_model_length:
                    e.done = e.context_overflow = True
            live = [e for e in live if not e.done]
            if not live:
                break
            if trace is not None:
                trace.clear()
            outs = generate(model, [e.ids for e in live], cfg.max_sample_tokens, temperature,
                            tok.end_id, tok.pad_id, generator=gen)
            versions = list(trace) if trace is not None else []
            for e, g in zip(live, outs, strict=True):
                self._step(e, g.tokens, g.logprobs, g.finished)
                e.drift += sum(1 for v in versions[: len(g.tokens)] if v != version)
        groups = []
        for qi in range(len(questions)):
            members = episodes[qi * group_size: (qi + 1) * group_size]
            groups.append(Group(samples=[self._sample(e) for e in members],
                                version=version, index=qi))
        return groups

    def _step(self, e: _Episode, tokens: list[int], logprobs: list[float],
              finished: bool) -> None:
        cfg, tok = self.cfg, self.tok
        e.ids += tokens
        e.gen_mask += [1] * len(tokens)
        e.gen_logprobs += logprobs
        e.turns += 1
        e.generated += len(tokens)
        text = tok.decode(tokens)
        guess = parse_guess(text, cfg.guess_max) if finished else None
        if guess is None:
            e.transcript.append({"guess": text, "feedback": "(unparsable)"})
            e.done = e.parse_failure = True
            return
        if guess == e.secret:
            e.transcript.append({"guess": text, "feedback": "correct"})
            e.done = e.terminated = True
            return
        feedback = hint(guess, e.secret)
        e.transcript.append({"guess": text, "feedback": feedback})
        if e.turns >= cfg.max_turns:
            e.done = e.turn_limit = True
            return
        # The hint closes the assistant turn the model already ended with <end>, so the
        # sequence stays exactly what the chat template would render.
        reply = tok.role_ids("user") + tok.encode(feedback) + tok.end_ids() + \
            tok.role_ids("assistant")
        e.ids += reply
        e.gen_mask += [0] * len(reply)
        e.gen_logprobs += [0.0] * len(reply)

    def _sample(self, e: _Episode) -> Sample:
        s = Sample(
            prompt=f"secret {e.secret} in 1-{self.cfg.guess_max}",
            completion=" | ".join(f"{t['guess']} -> {t['feedback']}" for t in e.transcript),
            ids=e.ids, gen_mask=e.gen_mask, gen_logprobs=e.gen_logprobs,
            prompt_tokens=e.prompt_tokens, completion_tokens=e.generated,
            budget=self.cfg.max_sample_tokens, truncated=not e.terminated,
            drift_tokens=e.drift,
        )
        s.raw_reward = 1.0 if e.terminated else 0.0
        s.correct = s.raw_reward
        s.extra.update(num_turns=e.turns, terminated=e.terminated,
                       parse_failure=e.parse_failure, context_overflow=e.context_overflow,
                       turns=e.transcript)
        return s
