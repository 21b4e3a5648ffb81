"""JSON responses via orjson: numpy arrays pass straight through, NaN and ±Infinity become null."""

from __future__ import annotations

from typing import Any

import orjson
from starlette import responses

OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def dumps(content: Any) -> bytes:
    return orjson.dumps(content, option=OPTIONS)


class JSONResponse(responses.JSONResponse):
    """The API's JSON response class (a Starlette JSONResponse, so FastAPI's OpenAPI
    schema knows its body as JSON)."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
