"""The chat template: checks conversations and turns them into token ids and a loss mask.

A turn is `role ids + content ids + end ids`. Only assistant content and its end
ids are trained on, so the model learns to answer and to stop, never to imitate the
user or the system prompt.
"""

from __future__ import annotations

from typing import Any

from runwatch.jobs.failures import RefusedInput
from runwatch.recipes.tokenizer import ChatTokenizer

TEMPLATE_NAME = "runwatch-chat-v1"
ROLES = ("system", "user", "assistant")

Message = dict[str, str]


class RecipeError(RefusedInput):
    """Base of the errors a recipe raises about its inputs (refusals: a failed run's
    reason is the message itself).

    RecipeError
    ├── RowRefusal   a dataset row the recipe will not train on (names the row)
    └── SetupError   a model, checkpoint or optional package the config names is unusable
    """


class SetupError(RecipeError):
    """What the config points at cannot be used; the message says what to change."""


class RowRefusal(RecipeError):
    """A row that cannot be trained on; the message names the row and the fix."""

    def __init__(self, row: int, problem: str, fix: str) -> None:
        self.row = row
        super().__init__(f"row {row} {problem}; {fix}")


def validate_messages(row: int, messages: Any, *, needs_reply: bool = True) -> list[Message]:
    """Return `messages` as a clean list, or raise RowRefusal naming `row`.

    `needs_reply=False` checks a prompt that must end with a user turn (DPO pairs).
    """
    if not isinstance(messages, list) or not messages:
        raise RowRefusal(
            row, "is malformed: 'messages' is not a non-empty list",
            "give each row a 'messages' list of {role, content} objects",
        )
    clean: list[Message] = []
    for i, msg in enumerate(messages, start=1):
        if not isinstance(msg, dict):
            raise RowRefusal(row, f"is malformed: message {i} is not an object",
                             "write each message as {\"role\": ..., \"content\": ...}")
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            raise RowRefusal(row, f"is malformed: message {i} has role {role!r}",
                             "use one of the roles system, user or assistant")
        if not isinstance(content, str):
            raise RowRefusal(row, f"is malformed: message {i} has no 'content' string",
                             "give every message its text as a string")
        clean.append({"role": role, "content": content})
    if not needs_reply:
        if clean[-1]["role"] != "user":
            raise RowRefusal(row, "has a prompt that does not end with a user message",
                             "end each prompt with the user turn the responses answer")
        return clean
    if not any(m["role"] == "assistant" for m in clean):
        raise RowRefusal(row, "has no assistant message, so there is nothing to train on",
                         "add the assistant's reply or remove the row")
    if clean[-1]["role"] == "user":
        raise RowRefusal(
            row, "ends with a user message",
            "end the conversation with the assistant's reply or drop the last user turn",
        )
    return clean


def render_conversation(tok: ChatTokenizer, messages: list[Message]) -> tuple[list[int], list[int]]:
    """Token ids of a whole conversation and its loss mask (1 = trained token)."""
    ids: list[int] = []
    mask: list[int] = []
    for msg in messages:
        head = tok.role_ids(msg["role"])
        body = tok.encode(msg["content"]) + tok.end_ids()
        trained = 1 if msg["role"] == "assistant" else 0
        ids += head + body
        mask += [0] * len(head) + [trained] * len(body)
    return ids, mask


def render_prompt(tok: ChatTokenizer, messages: list[Message]) -> list[int]:
    """Token ids of `messages` followed by an open assistant turn, ready to generate."""
    ids, _ = render_conversation(tok, messages)
    return ids + tok.role_ids("assistant")


def render_response(tok: ChatTokenizer, text: str) -> list[int]:
    """Token ids of an assistant reply as the template closes it."""
    return tok.encode(text) + tok.end_ids()


def split_reply(messages: list[Message]) -> tuple[list[Message], str]:
    """The prompt (everything before the last assistant turn) and that turn's text."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[:last], messages[last]["content"]
