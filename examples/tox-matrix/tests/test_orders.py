"""The app against a real broker: the `queen_url` fixture of queen-trio's pytest plugin
gives each test an empty one."""

from __future__ import annotations

import httpx
import pytest

from orders import QUEUE, place_order, ship_orders


@pytest.fixture
def client(queen_url: str):
    with httpx.Client(base_url=queen_url) as client:
        yield client


def test_an_order_is_shipped_once(client: httpx.Client) -> None:
    place_order(client, 1, ["tea"])
    shipped: list[dict] = []
    assert ship_orders(client, shipped.append) == 1
    assert ship_orders(client, shipped.append) == 0
    assert shipped == [{"order": 1, "items": ["tea"]}]


def test_each_test_starts_with_no_orders(client: httpx.Client) -> None:
    assert ship_orders(client, lambda order: None) == 0


def test_placing_an_order_twice_ships_it_once(client: httpx.Client) -> None:
    assert place_order(client, 2, ["cake"]) == "queued"
    assert place_order(client, 2, ["cake"]) == "duplicate"
    shipped: list[dict] = []
    ship_orders(client, shipped.append)
    assert [o["order"] for o in shipped] == [2]


def test_an_order_whose_shipping_fails_is_shipped_later(client: httpx.Client) -> None:
    place_order(client, 3, ["vase"])

    def broken(order: dict) -> None:
        raise RuntimeError("the van broke down")

    assert ship_orders(client, broken) == 0
    shipped: list[dict] = []
    assert ship_orders(client, shipped.append) == 1
    assert shipped[0]["order"] == 3


@pytest.mark.queen(encryption=True)
def test_orders_can_be_encrypted_at_rest(client: httpx.Client) -> None:
    r = client.post("/api/v1/configure",
                    json={"queue": QUEUE, "options": {"encryptionEnabled": True}})
    assert r.json()["options"]["encryptionEnabled"] is True
    place_order(client, 4, ["ring"])
    shipped: list[dict] = []
    assert ship_orders(client, shipped.append) == 1
    assert shipped[0]["items"] == ["ring"]


@pytest.mark.asyncio
async def test_the_official_client_sees_the_orders(queen_client, queen_url: str) -> None:
    # queen_client: the official Python client (queen-mq) on the same empty broker.
    with httpx.Client(base_url=queen_url) as client:
        place_order(client, 5, ["lamp"])
    messages = await queen_client.queue(QUEUE).batch(10).wait(False).pop()
    assert [m["data"]["order"] for m in messages] == [5]
