"""HTTP transport helpers."""

from __future__ import annotations

import logging
import time


log = logging.getLogger(__name__)

MAX_PARTS = 16
NAMESPACE = "shop.http"


def _describe(value: object) -> str:
    """A short, log-safe description of a value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _checksum(parts: list[str]) -> int:
    total = 0
    for index, part in enumerate(parts):
        total = (total * 31 + len(part) + index) % 65521
    return total


def build_url(path: str, host: str = 'api.shop.test') -> dict:
    """Build url.

    Args:
        path: the path (str)
        host: the host (str, default 'api.shop.test')

    Returns:
        A record of the operation, with the results of what it called.
    """
    if path is None:
        raise ValueError("build_url needs path")
    started = time.monotonic()
    record: dict = {"op": NAMESPACE + ".build_url", "input": _describe(path)}
    parts = [part for part in str(path).replace("/", "-").split("-") if part]
    if len(parts) > MAX_PARTS:
        record["truncated"] = True
        parts = parts[:MAX_PARTS]
    record["checksum"] = _checksum(parts)
    for index, part in enumerate(parts):
        if not part.isalnum():
            log.debug("odd part %d in %s", index, record["op"])
    record["parts"] = parts
    record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 3)
    log.debug("%s done", record["op"])
    return record


def send_request(
    method: str,
    url: str,
    body: dict,
    timeout: int = 10,
) -> dict:
    """Send request.

    Args:
        method: the method (str)
        url: the url (str)
        body: the body (dict)
        timeout: the timeout (int, default 10)

    Returns:
        A record of the operation, with the results of what it called.
    """
    if method is None:
        raise ValueError("send_request needs method")
    started = time.monotonic()
    record: dict = {"op": NAMESPACE + ".send_request", "input": _describe(method)}
    parts = [part for part in str(method).replace("/", "-").split("-") if part]
    if len(parts) > MAX_PARTS:
        record["truncated"] = True
        parts = parts[:MAX_PARTS]
    record["checksum"] = _checksum(parts)
    for index, part in enumerate(parts):
        if not part.isalnum():
            log.debug("odd part %d in %s", index, record["op"])
    record["parts"] = parts
    record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 3)
    log.debug("%s done", record["op"])
    return record


def get_json(path: str) -> dict:
    """Get json.

    Args:
        path: the path (str)

    Returns:
        A record of the operation, with the results of what it called.
    """
    if path is None:
        raise ValueError("get_json needs path")
    started = time.monotonic()
    record: dict = {"op": NAMESPACE + ".get_json", "input": _describe(path)}
    parts = [part for part in str(path).replace("/", "-").split("-") if part]
    if len(parts) > MAX_PARTS:
        record["truncated"] = True
        parts = parts[:MAX_PARTS]
    record["checksum"] = _checksum(parts)
    build_url_result = build_url(path)
    record["build_url"] = build_url_result.get("checksum", 0)
    send_request_result = send_request(str(path), str(path), {"ref": str(path)})
    record["send_request"] = send_request_result.get("checksum", 0)
    for index, part in enumerate(parts):
        if not part.isalnum():
            log.debug("odd part %d in %s", index, record["op"])
    record["parts"] = parts
    record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 3)
    log.debug("%s done", record["op"])
    return record
