"""``kind_mask`` (read/events.py), the table lookup that replaced ``np.isin`` on node kinds in
the load's stages, answers as ``np.isin`` does for every byte value and set of kinds."""
from __future__ import annotations

import numpy as np

from tracetui.read.events import GPU_KINDS, HOST_KINDS, K, kind_mask


def test_every_byte_and_kind_set_as_isin():
    rng = np.random.default_rng(7)
    every = np.arange(-128, 128, dtype=np.int8)
    column = np.concatenate([every, rng.integers(-128, 128, 10_000).astype(np.int8)])
    sets = [HOST_KINDS, GPU_KINDS, [K["op"], K["annotation"]], [], [0], [-1, 127, -128], list(range(-128, 128))]
    for kinds in sets:
        want = np.isin(column, list(kinds))
        assert np.array_equal(kind_mask(column, kinds), want), kinds
        assert np.array_equal(kind_mask(column[::3], kinds), want[::3]), kinds  # a strided view
        assert np.array_equal(kind_mask(column.astype(np.uint8), [k & 0xFF for k in kinds]),
                              np.isin(column.astype(np.uint8), [k & 0xFF for k in kinds])), kinds


def test_wider_columns_fall_back_to_isin():
    column = np.array([0, 5, 300, -2, 7], dtype=np.int64)
    assert np.array_equal(kind_mask(column, [5, 300, -2]), np.isin(column, [5, 300, -2]))


def test_kinds_a_byte_column_cannot_hold_match_nothing_there():
    """258 is not 2, -1 is not 255 in a uint8 column, 2.5 is not 2: as np.isin answers."""
    column = np.arange(-128, 128, dtype=np.int8)
    for kinds in ([258], [2.5], [300, 2]):
        assert np.array_equal(kind_mask(column, kinds), np.isin(column, kinds)), kinds
    u = np.arange(256, dtype=np.uint8)
    assert np.array_equal(kind_mask(u, [-1, 3]), np.isin(u, [-1, 3]))
