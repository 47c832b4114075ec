"""One archive value as JSON, the way ClickHouse's own JSON formats write it: the one
conversion behind ``semsched sql --format json|csv`` and the worker's ``POST /sql``.

Python's ``json`` writes ``NaN`` and ``Infinity``, which are not JSON (``avg`` over no rows is
NaN), and refuses ``Decimal``; the HTTP client's UUIDs and IP addresses need words too."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any


def json_cell(v: Any) -> Any:
    """``v`` as a JSON-native value: NaN and ±inf → null (as ClickHouse's JSON does), an exact
    Decimal → a number (else its digits as a string), times → ISO 8601, bytes → UTF-8 text
    (invalid bytes replaced), tuples → lists, map keys → strings, anything else → ``str``."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Decimal):
        if not v.is_finite():
            return None
        as_float = float(v)
        return as_float if Decimal(repr(as_float)) == v else str(v)
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list | tuple):
        return [json_cell(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_cell(x) for k, x in v.items()}
    return str(v)


def wire_cell(v: Any) -> Any:
    """``v`` as the worker's ``/sql`` sends it to the CLI: :func:`json_cell`, but a float as it is (``NaN`` and
    ``Infinity`` as Python's ``json`` writes and reads them), so the CLI prints what it would print reading the
    archive itself: ``nan`` in CSV and tables, null in JSON (found by review: through a worker they came back as
    NULL)."""
    return v if isinstance(v, float) else json_cell(v)


def text_cell(v: Any) -> Any:
    """``v`` for a text cell (a CSV field, a table cell): a float stays a float (``nan`` and
    ``inf`` keep their names, as in ClickHouse's CSV, unlike NULL); arrays, tuples and maps
    become their JSON; everything else as :func:`json_cell`."""
    if isinstance(v, float):
        return v
    if isinstance(v, list | tuple | dict):
        return json.dumps(json_cell(v))
    return json_cell(v)
