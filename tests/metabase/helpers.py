"""What the metabase's tests share besides the `World` of steps.py: bucket lifecycle
rules, put and read back in one line each."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ripple.metabase import BucketLocation, Status, put_bucket_lifecycle
from tests.metabase.steps import World

DAY = timedelta(days=1)


def rule(rule_id: str = "r1", **members: Any) -> dict[str, Any]:
    return {"ID": rule_id, "Status": "Enabled", "Filter": {}, **members}


def configure(world: World, bucket: BucketLocation, *rules: dict[str, Any]) -> None:
    put_bucket_lifecycle(world.db, bucket, {"Rules": list(rules)})


def statuses(world: World) -> list[tuple[str, Status]]:
    return [(r.object_key, r.status) for r in world.rows()]
