"""The :class:`~rope_lessons.rope.Rope` spec that a model config's ``rope_*`` fields describe.

One place reads the loose fields (``rope_base``, ``rope_layout``, ``rope_p``,
``rope_theta``) into a spec, for the model and the chapter modules that
analyse it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from rope_lessons.rope import Rope

if TYPE_CHECKING:
    from rope_lessons.model import ModelConfig


@lru_cache(maxsize=64)
def config_rope(config: ModelConfig) -> Rope:
    """The spec of ``config``'s rotary fields, for its head dimension (built once per config)."""
    rotary = config.rotary_arguments()
    if rotary.theta is None:
        return Rope(config.head_dim, rotary.base, rotary.layout, rotary.p)
    return Rope.from_theta(rotary.theta, rotary.layout)
