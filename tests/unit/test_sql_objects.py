"""The schema's functions, views and triggers: one file each, listed once in objects.txt,
each defining the object its file is named after; the set's pinned digest matches its files
(so nobody changes one without raising the generation)."""

from __future__ import annotations

import re
from importlib import resources

from queen_trio.storage.sql import OBJECT_KINDS, ObjectSet, SqlObject, parse_manifest, sql_objects

CREATE = re.compile(r"^CREATE OR REPLACE (FUNCTION|VIEW|TRIGGER) (?:queen\.)?(\w+)", re.M)


def test_every_file_is_listed_once_and_every_listed_file_exists():
    folder = resources.files("queen_trio.storage.sql")
    on_disk = sorted(f"{kind}/{f.name.removesuffix('.sql')}" for kind in OBJECT_KINDS
                     for f in (folder / kind).iterdir() if f.name.endswith(".sql"))
    listed = [obj.name for obj in sql_objects().objects]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == on_disk


def test_each_file_creates_the_one_object_it_is_named_after():
    for obj in sql_objects().objects:
        found = CREATE.findall(obj.text)
        assert found == [(obj.kind.upper(), obj.object_name)], obj.name


def test_triggers_come_after_their_functions_and_views_after_what_they_read():
    objects = sql_objects().objects
    position = {obj.object_name: n for n, obj in enumerate(objects)}
    for n, obj in enumerate(objects):
        for called in re.findall(r"queen\.(\w+)", obj.text):
            if called in position and called != obj.object_name and obj.kind != "function":
                assert position[called] < n, f"{obj.name} uses {called}, listed after it"


def test_the_pinned_digest_is_the_files_digest():
    objects = sql_objects()
    assert objects.pinned_digest == objects.digest[:16], (
        "storage/sql/functions|views|triggers changed: raise `generation` in "
        f"storage/sql/objects.txt to {objects.generation + 1} and set `digest` to "
        f"{objects.digest[:16]}")


def test_the_set_digest_covers_order_and_text():
    a, b = SqlObject("functions/a", "x"), SqlObject("functions/b", "y")
    assert ObjectSet(1, (a, b)).digest != ObjectSet(1, (b, a)).digest
    assert ObjectSet(1, (a,)).digest != ObjectSet(1, (SqlObject("functions/a", "x "),)).digest


def test_the_manifest_reads_generation_digest_and_names():
    texts = {"functions/f": "CREATE OR REPLACE FUNCTION queen.f()"}
    parsed = parse_manifest("# a comment\ngeneration 7\ndigest abc\n\nfunctions/f  # why\n"
                            "retired functions/g  # now part of f\n", texts.__getitem__)
    assert (parsed.generation, parsed.pinned_digest) == (7, "abc")
    assert [o.name for o in parsed.objects] == ["functions/f"]
    assert parsed.retired == ("functions/g",)
    assert parsed.digest != ObjectSet(7, parsed.objects).digest
