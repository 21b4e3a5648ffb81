"""Synthetic tasks with a known right answer, generated in code and deterministic by seed.

Each task writes questions, their right answers and plausible wrong answers (for
preference pairs). Train and validation questions never overlap, so validation
accuracy measures what the model learned rather than what it memorised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

from runwatch.recipes.chat import Message


class Task(Protocol):
    name: str
    system_prompt: str

    def question(self, rng: random.Random) -> str: ...

    def distinct_questions(self) -> int:
        """How many different questions the task can ask."""
        ...

    def answer(self, question: str) -> str: ...

    def wrong_answer(self, question: str, rng: random.Random) -> str:
        """A plausible answer that is not the right one."""
        ...


def _perturb_digits(text: str, rng: random.Random) -> str:
    """Change one character to another digit: close to right, but wrong."""
    i = rng.randrange(len(text))
    choices = [d for d in "0123456789" if d != text[i]]
    return text[:i] + rng.choice(choices) + text[i + 1 :]


@dataclass
class Addition:
    """'a+b' with `digits`-digit operands; the answer is the sum.

    Operands and sum are zero-padded to a fixed width (`07+45` -> `052`): every digit
    keeps its column, which a small model learns far faster than ragged numbers.
    """

    digits: int = 2
    name: str = "addition"
    system_prompt: str = "add"

    def question(self, rng: random.Random) -> str:
        hi = 10**self.digits - 1
        return f"{rng.randint(0, hi):0{self.digits}d}+{rng.randint(0, hi):0{self.digits}d}"

    def distinct_questions(self) -> int:
        return int(10 ** (2 * self.digits))

    def answer(self, question: str) -> str:
        a, b = question.split("+")
        return f"{int(a) + int(b):0{self.digits + 1}d}"

    def wrong_answer(self, question: str, rng: random.Random) -> str:
        """The classic slip: adding column by column and forgetting to carry.

        With no carry to forget, the last digit is off by one instead. A systematic
        mistake (rather than a random digit) is what preference data is made of.
        """
        a, b = (int(x) for x in question.split("+"))
        right = self.answer(question)
        no_carry = sum(((a // 10**i % 10 + b // 10**i % 10) % 10) * 10**i
                       for i in range(self.digits))
        wrong = f"{no_carry:0{self.digits + 1}d}"
        if wrong == right:
            last = (int(right[-1]) + rng.choice((1, 9))) % 10
            wrong = right[:-1] + str(last)
        return wrong


@dataclass
class Reverse:
    """Reverse a string of `digits` letters."""

    digits: int = 6
    name: str = "reverse"
    system_prompt: str = "reverse"

    def question(self, rng: random.Random) -> str:
        return "".join(rng.choice("abcdefghij") for _ in range(self.digits))

    def distinct_questions(self) -> int:
        return int(10**self.digits)

    def answer(self, question: str) -> str:
        return question[::-1]

    def wrong_answer(self, question: str, rng: random.Random) -> str:
        right = self.answer(question)
        if len(set(right)) == 1:
            return right[:-1] + ("a" if right[-1] != "a" else "b")
        while True:
            i, j = sorted(rng.sample(range(len(right)), 2))
            wrong = right[:i] + right[j] + right[i + 1 : j] + right[i] + right[j + 1 :]
            if wrong != right:
                return wrong


@dataclass
class SortDigits:
    """Sort a string of `digits` digits in ascending order."""

    digits: int = 6
    name: str = "sort"
    system_prompt: str = "sort"

    def question(self, rng: random.Random) -> str:
        return "".join(rng.choice("0123456789") for _ in range(self.digits))

    def distinct_questions(self) -> int:
        return int(10**self.digits)

    def answer(self, question: str) -> str:
        return "".join(sorted(question))

    def wrong_answer(self, question: str, rng: random.Random) -> str:
        right = self.answer(question)
        wrong = _perturb_digits(right, rng)
        return wrong if wrong != right else right[::-1]


TASKS: dict[str, type[Addition] | type[Reverse] | type[SortDigits]] = {
    "addition": Addition,
    "reverse": Reverse,
    "sort": SortDigits,
}


def make_task(name: str, digits: int) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name](digits=digits)


def _questions(task: Task, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(
                f"task {task.name} has fewer than {n} distinct questions; "
                "lower n_train/n_val or raise digits"
            )
        q = task.question(rng)
        if q not in seen:
            seen.add(q)
            out.append(q)
    return out


def conversation(task: Task, question: str, reply: str | None = None) -> list[Message]:
    msgs = [{"role": "system", "content": task.system_prompt},
            {"role": "user", "content": question}]
    if reply is not None:
        msgs.append({"role": "assistant", "content": reply})
    return msgs


def sft_rows(task: Task, n_train: int, n_val: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Train and validation rows `{"messages": [...]}` with disjoint questions."""
    qs = _questions(task, n_train + n_val, seed)
    rows = [{"messages": conversation(task, q, task.answer(q))} for q in qs]
    return rows[:n_train], rows[n_train:]


def dpo_rows(task: Task, n_train: int, n_val: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Preference rows `{"prompt": [...], "chosen": right, "rejected": wrong}`."""
    qs = _questions(task, n_train + n_val, seed)
    rng = random.Random(seed + 1)
    rows: list[dict[str, Any]] = [
        {
            "prompt": conversation(task, q),
            "chosen": task.answer(q),
            "rejected": task.wrong_answer(q, rng),
        }
        for q in qs
    ]
    return rows[:n_train], rows[n_train:]
