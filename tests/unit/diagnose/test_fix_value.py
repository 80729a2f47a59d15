"""A fix whose value the user picks is typed (``FixValue.CHOOSE``), never a string a real value could equal."""

from __future__ import annotations

import json

from oomguard.diagnose.events import CHOOSE_VALUE, Fix, FixValue
from oomguard.diagnose.render import fix_text


def test_the_choose_sentinel_is_its_own_type():
    assert isinstance(CHOOSE_VALUE, FixValue) and CHOOSE_VALUE != CHOOSE_VALUE.value
    chosen = Fix("--data-parallel-size", CHOOSE_VALUE, "the error names this setting").to_dict()
    assert chosen["choose"] is True and chosen["value"] == CHOOSE_VALUE.value
    assert json.loads(json.dumps(chosen)) == chosen  # JSON-safe: the text, and the mark
    assert fix_text(chosen) == "change --data-parallel-size (to a value the message allows)"


def test_a_real_value_with_the_sentinels_text_is_a_value():
    """A string equal to the sentinel's text (a launch or a message could hold anything) is written as given."""
    real = Fix("--served-model-name", CHOOSE_VALUE.value, "as the launch wrote it").to_dict()
    assert "choose" not in real
    assert fix_text(real) == f"--served-model-name '{CHOOSE_VALUE.value}'"
