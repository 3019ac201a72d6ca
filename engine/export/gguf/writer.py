"""Write a GGUF export: a saved model folder to one ``.gguf`` file, and a run to a folder with its Modelfile.

``write_gguf`` converts a Hugging Face model folder (config.json, safetensors, tokenizer.json); ``export_gguf``
has a run's adapter merged into its base first (by the merged export's own code, passed in by the worker) in a
hidden folder inside the export's partial directory, converts it and removes it, so only ``<name>.gguf`` and
``Modelfile`` remain beside the model card.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.export.gguf.architectures import check_model_config, check_tokenizer_files
from engine.export.gguf.hparams import add_hparams
from engine.export.gguf.modelfile import modelfile_text, sampling_defaults
from engine.export.gguf.quant_types import GGUF_TYPES
from engine.export.gguf.tensors import add_tensors
from engine.export.gguf.tokenizer import TokenizerInfo, add_tokenizer

if TYPE_CHECKING:
    from engine.export.exports import ExportPlan
    from engine.runs.jobs import Progress


def write_gguf(model_dir: Path, out_path: Path, gguf_type: str, name: str, progress: Progress | None = None) -> dict:
    """Convert the model in ``model_dir`` to ``out_path``; returns what was written (tokenizer, tensor types)."""
    import gguf

    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    family = check_model_config(config)
    check_tokenizer_files(model_dir)
    writer = gguf.GGUFWriter(str(out_path), family.arch)
    writer.add_name(name)
    add_hparams(writer, config, family, gguf.LlamaFileType[GGUF_TYPES[gguf_type][1]])
    tokenizer = add_tokenizer(writer, model_dir, config["vocab_size"])

    def tensor_done(done: int, total: int) -> None:
        if progress is not None:
            progress.update(done=done, total=total)

    if progress is not None:
        progress.update(f"converting the weights to GGUF ({gguf_type})")
    counts = add_tensors(writer, model_dir, config, family, gguf_type, tensor_done)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"architecture": family.arch, "tokenizer": tokenizer, "tensor_types": counts}


def write_modelfile(folder: Path, gguf_name: str, model_dir: Path, tokenizer: TokenizerInfo) -> str:
    """Write ``folder/Modelfile`` for the GGUF file ``gguf_name``; returns its text."""
    tokens = {"bos_token": tokenizer.bos_token or "", "eos_token": tokenizer.eos_token or ""}
    text = modelfile_text(
        gguf_name,
        tokenizer.chat_template,
        tokens,
        tokenizer.add_bos,
        set(tokenizer.control_tokens),
        sampling_defaults(model_dir),
    )
    (Path(folder) / "Modelfile").write_text(text, encoding="utf-8")
    return text


def export_gguf(
    plan: ExportPlan, destination: Path, progress: Progress, merge: Callable[[ExportPlan, Path, Progress], None]
) -> dict[str, Any]:
    """Write ``<name>.gguf`` and ``Modelfile`` of ``plan``'s run into ``destination`` (the partial export); for
    the gguf-lora kind, ``<name>.gguf`` holds the adapter alone. ``merge`` saves the run's merged model into a
    folder (engine.export.worker.merge_into_base, the merged kind's own code)."""
    if plan.kind == "gguf-lora":
        return _export_lora(plan, destination, progress)
    merged = destination / ".merged"
    merged.mkdir()
    merge(plan, merged, progress)
    gguf_name = f"{plan.target.name}.gguf"
    progress.update(f"writing {gguf_name}")
    written = write_gguf(merged, destination / gguf_name, plan.gguf_type, plan.run.name, progress)
    modelfile = write_modelfile(destination, gguf_name, merged, written["tokenizer"])
    shutil.rmtree(merged)
    tokenizer: TokenizerInfo = written["tokenizer"]
    return {
        "gguf": gguf_name,
        "gguf_type": plan.gguf_type,
        "architecture": written["architecture"],
        "tensor_types": written["tensor_types"],
        "bytes": (destination / gguf_name).stat().st_size,
        "pre_tokenizer": tokenizer.pre + ("" if tokenizer.exact_pre else " (the nearest llama.cpp has)"),
        "template_translated": "could not be translated" not in modelfile,
    }


def _export_lora(plan: ExportPlan, destination: Path, progress: Progress) -> dict[str, Any]:
    from engine.export.gguf.architectures import base_config
    from engine.export.gguf.lora import write_lora_gguf

    model = plan.run.config.model
    base = base_config(model.name_or_path, model.revision)
    gguf_name = f"{plan.target.name}.gguf"
    progress.update(f"writing the adapter as {gguf_name}")
    family = check_model_config(base)
    adapted = write_lora_gguf(plan.weights.path, base, family, destination / gguf_name, plan.gguf_type)
    return {
        "gguf": gguf_name,
        "gguf_type": plan.gguf_type,
        "architecture": family.arch,
        "adapted_weights": adapted,
        "bytes": (destination / gguf_name).stat().st_size,
    }
