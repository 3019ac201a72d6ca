"""Padding-free batches train exactly what padded ones do: for rows of different lengths, the per-row losses and
the LoRA gradients of TRL's padding-free batch equal those of the padded batch (fp32), for every attention kernel
the engine may load the model with, on the CPU and, where there is one, on a CUDA GPU (with sdpa's kernels as the
engine picks them there: no cuDNN; FlexAttention's document mask too, which has no backward on a CPU)."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from engine.training import attention as attention_module
from engine.training.attention import SEGMENTS, register_segment_attention

PAD = 0
LENGTHS = (7, 19, 3, 12)  # different lengths, the longest not first
# fp32 throughout; a GPU's kernels sum in other orders than the CPU's (and than each other, padded or not).
TOLERANCE = {"cpu": 1e-5, "cuda": 1e-4}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]
FLEX = "flex_attention"


def _rows() -> list[dict[str, list[int]]]:
    """Rows with a prompt that carries no loss (-100) and an answer that does."""
    generator = torch.Generator().manual_seed(0)
    rows = []
    for length in LENGTHS:
        ids = torch.randint(3, 97, (length,), generator=generator).tolist()
        prompt = length // 3
        rows.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    return rows


@pytest.fixture
def engine_sdpa_backends():
    """sdpa's kernels as the engine sets them on a GPU (engine.training.attention.apply_sdpa_backends: no cuDNN),
    restored afterwards."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(False)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def _on(batch: dict, device: str) -> dict:
    """The batch's tensors on ``device`` (the boundaries too: the kernels read them where the model runs)."""
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


def _model(attention: str, device: str = "cpu") -> torch.nn.Module:
    """A tiny LLaMA with LoRA on every linear layer; the adapter starts random so both of its matrices get
    gradients (peft's default starts B at zero, which leaves A without any)."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, as most current models have
        max_position_embeddings=64,
        pad_token_id=PAD,
    )
    if attention == SEGMENTS:
        register_segment_attention()
    model = LlamaForCausalLM(config).to(torch.float32)
    model.set_attn_implementation(attention)
    lora = LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    return get_peft_model(model, lora).to(device).train()


def _per_row_losses(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each position's next-token loss (0 where no loss) and its label mask, as the causal-LM loss shifts them."""
    shifted = labels[..., 1:]
    losses = torch.nn.functional.cross_entropy(
        logits[..., :-1, :].transpose(1, 2), shifted, ignore_index=-100, reduction="none"
    )
    return losses, shifted != -100


def _train_step(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[list[torch.Tensor], dict]:
    """Per-row summed losses and the LoRA gradients of the mean token loss over the batch."""
    model.zero_grad()
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    logits = model(**inputs, use_cache=False).logits
    losses, mask = _per_row_losses(logits, batch["labels"])
    (losses.sum() / mask.sum()).backward()
    if "attention_mask" in batch:  # padded: one row per batch entry
        per_row = [row.sum() for row in losses]
    else:  # padding-free: one sequence, cut where the positions restart
        edges = batch["cu_seq_lens_q"].tolist()
        per_row = [losses[0, start : end - 1].sum() for start, end in zip(edges[:-1], edges[1:], strict=True)]
    grads = {name: param.grad.clone() for name, param in model.named_parameters() if param.requires_grad}
    return per_row, grads


# sdpa_segments' two ways: a call per row (no overhead counted), and one call on the rows padded to the longest
# (an overhead no batch here outweighs).
SEGMENT_PATHS = {"per-row": 0, "padded": 10_000}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("attention", "path"),
    [("sdpa", None), ("eager", None), (SEGMENTS, "per-row"), (SEGMENTS, "padded"), (FLEX, None)],
)
def test_padding_free_batch_gives_the_padded_batch_losses_and_gradients(
    attention: str, path: str | None, device: str, monkeypatch: pytest.MonkeyPatch, engine_sdpa_backends: None
) -> None:
    if attention == FLEX and device == "cpu":
        pytest.skip("FlexAttention has no backward on a CPU (torch 2.13)")
    if path:
        monkeypatch.setattr(attention_module, "ROW_CALL_TOKENS", SEGMENT_PATHS[path])
    rows = _rows()
    padded = _on(DataCollatorForLanguageModeling(pad_token_id=PAD)(rows), device)
    flat = _on(DataCollatorForLanguageModeling(pad_token_id=PAD, padding_free=True)(rows), device)
    assert flat["input_ids"].shape == (1, sum(LENGTHS)) and "attention_mask" not in flat
    model = _model(attention, device)
    padded_rows, padded_grads = _train_step(model, padded)
    flat_rows, flat_grads = _train_step(model, flat)
    for padded_loss, flat_loss in zip(padded_rows, flat_rows, strict=True):
        assert flat_loss.item() == pytest.approx(padded_loss.item(), abs=TOLERANCE[device])
    assert padded_grads.keys() == flat_grads.keys() and len(padded_grads) > 0
    for name, grad in padded_grads.items():
        assert grad.abs().max() > 0, name
        assert torch.allclose(flat_grads[name], grad, atol=TOLERANCE[device], rtol=0), name


@pytest.mark.parametrize("path", sorted(SEGMENT_PATHS))
def test_rows_of_a_padding_free_batch_do_not_see_each_other(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the first row leaves the logits of the others as they were (no attention across rows)."""
    monkeypatch.setattr(attention_module, "ROW_CALL_TOKENS", SEGMENT_PATHS[path])
    rows = _rows()
    model = _model(SEGMENTS).eval()
    changed = [{**rows[0], "input_ids": [5] * LENGTHS[0]}, *rows[1:]]
    collate = DataCollatorForLanguageModeling(pad_token_id=PAD, padding_free=True)
    with torch.no_grad():
        before, after = (model(**{**collate(r), "labels": None}, use_cache=False).logits for r in (rows, changed))
    first = LENGTHS[0]
    assert not torch.allclose(before[0, :first], after[0, :first])
    assert torch.allclose(before[0, first:], after[0, first:], atol=TOLERANCE["cpu"], rtol=0)
