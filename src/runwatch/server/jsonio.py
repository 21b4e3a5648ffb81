"""JSON responses via orjson: numpy arrays pass straight through, NaN and ±Infinity become null."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def dumps(content: Any) -> bytes:
    return orjson.dumps(content, option=OPTIONS)


class JSONResponse(Response):
    """The API's JSON response class."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)
