"""Sortable ids (engine.store.ids): made one after another, they sort in that order, also within one second, and one
process never makes the same id twice."""

from __future__ import annotations

from engine.store.ids import time_id


def test_ids_made_one_after_another_sort_in_that_order_and_never_repeat():
    ids = [time_id() for _ in range(5000)]  # thousands within one second
    assert sorted(ids) == ids and len(set(ids)) == len(ids)
