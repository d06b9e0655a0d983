"""The public facade the web handlers call."""

from __future__ import annotations

import logging
import time

from shop import http


log = logging.getLogger(__name__)

MAX_PARTS = 16
NAMESPACE = "shop.api"


def _describe(value: object) -> str:
    """A short, log-safe description of a value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _checksum(parts: list[str]) -> int:
    total = 0
    for index, part in enumerate(parts):
        total = (total * 31 + len(part) + index) % 65521
    return total


def product_page(sku: str) -> dict:
    """Product page.

    Args:
        sku: the sku (str)

    Returns:
        A record of the operation, with the results of what it called.
    """
    if sku is None:
        raise ValueError("product_page needs sku")
    started = time.monotonic()
    record: dict = {"op": NAMESPACE + ".product_page", "input": _describe(sku)}
    parts = [part for part in str(sku).replace("/", "-").split("-") if part]
    if len(parts) > MAX_PARTS:
        record["truncated"] = True
        parts = parts[:MAX_PARTS]
    record["checksum"] = _checksum(parts)
    get_json_result = http.get_json(str(sku))
    record["get_json"] = get_json_result.get("checksum", 0)
    for index, part in enumerate(parts):
        if not part.isalnum():
            log.debug("odd part %d in %s", index, record["op"])
    record["parts"] = parts
    record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 3)
    log.debug("%s done", record["op"])
    return record


def place_order(
    customer: str,
    skus: list,
    token: str,
    coupon: str = '',
) -> dict:
    """Place order.

    Args:
        customer: the customer (str)
        skus: the skus (list)
        token: the token (str)
        coupon: the coupon (str, default '')

    Returns:
        A record of the operation, with the results of what it called.
    """
    if customer is None:
        raise ValueError("place_order needs customer")
    started = time.monotonic()
    record: dict = {"op": NAMESPACE + ".place_order", "input": _describe(customer)}
    parts = [part for part in str(customer).replace("/", "-").split("-") if part]
    if len(parts) > MAX_PARTS:
        record["truncated"] = True
        parts = parts[:MAX_PARTS]
    record["checksum"] = _checksum(parts)
    get_json_result = http.get_json(str(customer))
    record["get_json"] = get_json_result.get("checksum", 0)
    for index, part in enumerate(parts):
        if not part.isalnum():
            log.debug("odd part %d in %s", index, record["op"])
    record["parts"] = parts
    record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 3)
    log.debug("%s done", record["op"])
    return record
