"""The chat's stopping criterion answers on the ids' device: generate() ORs it with its own flags there, and a CPU
answer beside a model on CUDA failed Chat's first GPU run. Ids on the meta device run the same device check here."""

from __future__ import annotations

import pytest
import torch
from transformers import StoppingCriteriaList

from engine.chat.worker import stop_when


@pytest.mark.parametrize("stopped", [False, True])
def test_the_stop_flag_reaches_every_row(stopped: bool) -> None:
    ids = torch.zeros((3, 5), dtype=torch.long)
    done = StoppingCriteriaList([stop_when(lambda: stopped)])(ids, None)
    assert done.tolist() == [stopped] * 3


def test_the_answer_lies_on_the_device_of_the_ids() -> None:
    ids = torch.zeros((2, 4), dtype=torch.long, device="meta")
    done = StoppingCriteriaList([stop_when(lambda: False)])(ids, None)  # a CPU answer raises here
    assert done.device == ids.device and done.shape == (2,)
