"""The route table keeps its rules: every route has an access level and is declared once, no
route hides behind an earlier one, where two paths overlap the one with a literal segment
comes first, only pops wait, and docs/api.md lists exactly the table's routes, in its order."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from queen_trio.broker import Broker
from queen_trio.settings import AuthSettings
from queen_trio.web.auth import ADMIN, PUBLIC, PUSH, READ, WRITE, Authenticator
from queen_trio.web.http import Response, json_response
from queen_trio.web.request import Request
from queen_trio.web.router import Route, Router, Waits
from queen_trio.web.routes import NOT_IN_THIS_BROKER, ROUTES
from queen_trio.web.routes.not_implemented import not_implemented

API_PAGE = Path(__file__).parents[2] / "docs" / "api.md"
LEVELS = {PUBLIC, PUSH, READ, WRITE, ADMIN}
# docs/api.md's words for each level. whoami is public in the table (its handler checks the
# token itself), "any valid token" on the page.
LEVEL_OF_WORDS = {"write-only": PUSH, "read-only": READ, "read-write": WRITE, "admin": ADMIN,
                  "public": PUBLIC, "any valid token": PUBLIC}


def name(route: Route) -> str:
    return f"{route.method} {route.path}"


# -- paths as segments -----------------------------------------------------------------------

def segments(path: str) -> list[str]:
    """The segments a path (or a route's path) is matched on; a trailing slash is an empty
    last segment, as the router reads it ("/dashboard/" is not "/dashboard")."""
    parts = path.strip("/").split("/")
    return [*parts, ""] if path.endswith("/") and path != "/" else parts


def is_parameter(segment: str) -> bool:
    return segment.startswith((":", "*"))


def own_paths(route: Route) -> list[str]:
    """Paths of the route whose parameters hold values no literal segment has: an earlier
    route that matches them all matches every path of this one. The rest of a path (`*`)
    gets one segment and two."""
    def path(rest: str) -> str:
        filled = [rest if s.startswith("*") else f"p{i}" if s.startswith(":") else s
                  for i, s in enumerate(segments(route.path))]
        return "/" + "/".join(filled)

    return [path("r0"), path("r0/r1")] if "*" in route.path else [path("")]


def shared_path(a: Route, b: Route) -> str | None:
    """A path both routes match, if there is one: each segment the literal either route has
    there (a parameter takes it), else a value."""
    sa, sb = segments(a.path), segments(b.path)
    merged: list[str] = []
    for i in range(max(len(sa), len(sb))):
        x, y = (sa[i] if i < len(sa) else None), (sb[i] if i < len(sb) else None)
        if x is not None and x.startswith("*") or y is not None and y.startswith("*"):
            rest = sb[i:] if x is not None and x.startswith("*") else sa[i:]
            merged += [s if not is_parameter(s) else "v" for s in rest] or ["v"]
            break
        if x is None or y is None:
            return None
        merged.append(x if not is_parameter(x) else y if not is_parameter(y) else "v")
    candidate = "/" + "/".join(merged)
    both = a.pattern.match(candidate) and b.pattern.match(candidate)
    return candidate if both else None


# -- the rules, as lists of what breaks them -------------------------------------------------

def unreachable(routes: Sequence[Route]) -> list[str]:
    """Routes that no path of their own reaches: an earlier route of the method takes it."""
    router = Router(routes)
    return [name(r) for r in routes
            if not any(router.resolve(r.method, p)[0] is r for p in own_paths(r))]


def literal_after_parameter(routes: Sequence[Route]) -> list[str]:
    """Pairs of overlapping routes of one method where the later one has a literal segment
    at the first place where one has a literal and the other a parameter."""
    wrong = []
    for i, earlier in enumerate(routes):
        for later in routes[i + 1:]:
            if later.method != earlier.method or shared_path(earlier, later) is None:
                continue
            for x, y in zip(segments(earlier.path), segments(later.path), strict=False):
                if is_parameter(x) != is_parameter(y):
                    if is_parameter(x):
                        wrong.append(f"{name(later)} must come before {name(earlier)}")
                    break
    return wrong


async def answer(broker: Broker, request: Request) -> Response:
    return json_response(200, {})


def test_every_route_has_an_access_level():
    assert [name(r) for r in ROUTES if r.access not in LEVELS] == []


def test_no_route_is_declared_twice():
    counts = Counter((r.method, r.path) for r in ROUTES)
    assert [key for key, n in counts.items() if n > 1] == []


def test_no_route_is_unreachable():
    assert unreachable(ROUTES) == []


def test_of_two_overlapping_paths_the_one_with_a_literal_comes_first():
    assert literal_after_parameter(ROUTES) == []
    # The table has such pairs: the rule is not checked on nothing.
    pairs = [(a.path, b.path) for i, a in enumerate(ROUTES) for b in ROUTES[i + 1:]
             if a.method == b.method and shared_path(a, b) is not None]
    assert ("/api/v1/consumer-groups/lagging", "/api/v1/consumer-groups/:group") in pairs
    assert ("/api/v1/traces/by-name/:traceName",
            "/api/v1/traces/:partitionId/:transactionId") in pairs


def test_the_checks_see_a_hidden_route_and_a_literal_after_a_parameter():
    table = [Route("GET", "/a/:x", READ, answer), Route("GET", "/a/b", READ, answer),
             Route("GET", "/c/:x/d", READ, answer), Route("GET", "/c/e/:y", READ, answer),
             Route("GET", "/f/*rest", READ, answer), Route("GET", "/f/g/h", READ, answer),
             Route("POST", "/a/b", READ, answer)]
    assert unreachable(table) == ["GET /a/b", "GET /f/g/h"]
    assert literal_after_parameter(table) == ["GET /a/b must come before GET /a/:x",
                                              "GET /c/e/:y must come before GET /c/:x/d",
                                              "GET /f/g/h must come before GET /f/*rest"]
    # A trailing slash, and the rest of a path that needs at least one character.
    apart = [Route("GET", "/d", READ, answer), Route("GET", "/d/", READ, answer),
             Route("GET", "/d/*rest", READ, answer)]
    assert unreachable(apart) == [] and literal_after_parameter(apart) == []


def test_only_pops_wait_and_only_when_asked():
    waiting = {r.path for r in ROUTES if r.waits is not Waits.NEVER}
    assert waiting == {"/api/v1/pop", "/api/v1/pop/queue/:queue",
                       "/api/v1/pop/queue/:queue/partition/:partition",
                       "/api/v1/ephemeral/pop"}
    assert {r.waits for r in ROUTES if r.path in waiting} == {Waits.WHEN_ASKED}

    def request(query: dict[str, str]) -> Request:
        return Request("GET", "/api/v1/pop", {}, query, {}, b"", "/api/v1/pop",
                       Authenticator(AuthSettings()))

    assert Waits.WHEN_ASKED.watched(request({"wait": "true"}))
    assert not Waits.WHEN_ASKED.watched(request({"wait": "false"}))
    assert not Waits.WHEN_ASKED.watched(request({}))
    assert not Waits.NEVER.watched(request({"wait": "true"}))


# -- docs/api.md -------------------------------------------------------------------------------

def table_rows(heading: str) -> list[list[str]]:
    """The cells of the first table under `heading` (its header and rule left out)."""
    page = API_PAGE.read_text()
    start = page.index(f"\n{heading}\n")
    end = page.find("\n## ", start + 1)
    lines = page[start:end].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def path_of(cell: str) -> str:
    """The route's path: the cell's first code span (what follows explains it)."""
    found = re.match(r"`([^`]+)`", cell)
    assert found, f"a path cell starts with the path in backticks: {cell!r}"
    return found.group(1)


def test_the_api_page_lists_every_route_of_the_table_in_its_order():
    documented = [(method, path_of(path), LEVEL_OF_WORDS.get(level, level))
                  for method, path, level in table_rows("## Routes")]
    built = [(r.method, r.path, r.access) for r in ROUTES if r.handler is not not_implemented]
    assert documented == built


def test_no_route_is_left_not_implemented_and_the_api_page_says_so():
    # Every route of the 2.6 client is built; a row answering not_implemented would be listed
    # in a table under this heading, which now says there is none.
    assert NOT_IN_THIS_BROKER == ()
    assert not any(r.handler is not_implemented for r in ROUTES)
    page = API_PAGE.read_text()
    section = page[page.index("\n## Routes of the 2.6 client this broker does not have (404)\n"):]
    section = section[:section.index("\n## ", 1)]
    assert "no row of `queen_trio/web/routes/table.py`" in section and "\n|" not in section


@pytest.mark.parametrize("route", ROUTES, ids=name)
def test_a_route_path_is_absolute_and_a_rest_parameter_ends_it(route):
    parts = segments(route.path)
    assert route.path.startswith("/")
    assert all(not s.startswith("*") for s in parts[:-1])
    assert all(re.fullmatch(r"[:*]\w+", s) for s in parts if is_parameter(s))
