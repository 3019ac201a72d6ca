"""Carry out an export (inside ``python -m engine export``): write, card, zip, rename into place, push.

Everything is written into a hidden partial directory beside the target and renamed into place only when it
is complete, so a failed, cancelled or killed export leaves nothing half-written behind (the job removes the
partial output; engine.runs.jobs removes it for a job that died). A merge loads the base un-quantized at the chosen
dtype, even for a QLoRA run, and folds the adapter into it with peft's ``merge_and_unload``.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

from engine.export.exports import ExportError, ExportPlan, check_repo_id
from engine.export.model_card import model_card
from engine.runs.jobs import PARTIAL_MARK, Progress

# Trainer state in a checkpoint directory: needed to resume, not to use the weights.
TRAINING_ONLY = {"README.md", "training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json"}
STORED_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")  # already dense: compressing them only costs time


def _partial_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}{PARTIAL_MARK}{os.urandom(3).hex()}")


def copy_adapter(source: Path, destination: Path) -> None:
    """The adapter and tokenizer files of a result or checkpoint directory, without the trainer state."""
    for item in sorted(source.iterdir()):
        if item.is_file() and item.name not in TRAINING_ONLY and not item.name.startswith("rng_state"):
            shutil.copy2(item, destination / item.name)


def merge_into_base(plan: ExportPlan, destination: Path, progress: Progress) -> None:
    """Save base + adapter as one model (or a full fine-tune, cast), in ``plan.dtype`` safetensors."""
    from transformers import AutoTokenizer

    from engine.store.paths import resolve_model_source
    from engine.training.builders import torch_dtype
    from engine.training.methods.base import IMAGE_TEXT_TO_TEXT
    from engine.training.modality import model_kind
    from engine.training.vision import load_processor

    config, dtype = plan.run.config, torch_dtype(plan.dtype)
    kind = model_kind(config)
    auto_class = kind.load_class()
    if plan.weights.is_adapter:
        from peft import PeftModel

        progress.update(f"loading the base model ({plan.dtype}, un-quantized)")
        # Never quantized here: merging into 4-/8-bit weights would round the update away.
        base = auto_class.from_pretrained(
            resolve_model_source(config.model.name_or_path),
            **dict(kind.head_kwargs),
            dtype=dtype,
            revision=config.model.revision,
            trust_remote_code=config.model.trust_remote_code,
        )
        progress.update(f"merging the {plan.weights.label} into the base")
        model = PeftModel.from_pretrained(base, str(plan.weights.path)).merge_and_unload()
    else:
        progress.update(f"loading the fine-tuned model ({plan.dtype})")
        model = auto_class.from_pretrained(str(plan.weights.path), dtype=dtype)
    # The tokenizer saved with the weights carries the chat template the model was trained with (a vision-language
    # model's processor carries its image processor too; load_processor loads one without torchvision).
    if kind == IMAGE_TEXT_TO_TEXT:
        tokenizer = load_processor(str(plan.weights.path), None, config.model.trust_remote_code)
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(plan.weights.path))
    if not kind.generates:  # a score head reads the last token that is not padding: the model must name the pad
        model.config.pad_token_id = tokenizer.pad_token_id
    progress.update("saving the merged model")
    model.save_pretrained(str(destination))
    tokenizer.save_pretrained(str(destination))


def write_zip(folder: Path, zip_path: Path, arc_root: str, progress: Progress) -> Path:
    """Zip ``folder`` under ``arc_root/`` into a partial file beside ``zip_path``; returns that file.

    The caller renames it into place once the export directory itself is in place.
    """
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    partial = _partial_beside(zip_path)
    progress.add_partial(partial)
    progress.update("writing the zip", done=0, total=len(files))
    with zipfile.ZipFile(partial, "w") as archive:
        for number, path in enumerate(files, start=1):
            method = zipfile.ZIP_STORED if path.suffix in STORED_SUFFIXES else zipfile.ZIP_DEFLATED
            archive.write(path, f"{arc_root}/{path.relative_to(folder).as_posix()}", compress_type=method)
            progress.update(done=number)
    return partial


def push_to_hub(folder: Path, repo_id: str, private: bool, progress: Progress) -> str:
    """Upload the export to a hub model repo (created if missing); returns its URL.

    The token is HF_TOKEN from the environment (or a stored login); it is never printed: error messages are
    stripped of it before they are shown or recorded.
    """
    from huggingface_hub import HfApi, get_token

    token = get_token()
    if not token:
        raise ExportError("no hub token: set HF_TOKEN in the environment or type a token in the studio")
    api = HfApi(token=token)
    try:
        progress.update(f"creating the hub repo {repo_id}")
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        progress.update(f"uploading to {repo_id}")
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, commit_message="Upload from Tuning Studio")
    except Exception as exc:  # hub, network and offline errors all mean "not pushed": say which, without the token
        first_line = (str(exc).strip() or type(exc).__name__).splitlines()[0].replace(token, "***")
        raise ExportError(f"pushing to {repo_id} failed: {first_line}") from None
    return str(url)


def export(
    plan: ExportPlan, progress: Progress, push_to: str | None = None, private: bool = False, make_zip: bool = False
) -> dict[str, Any]:
    """Write the export described by ``plan`` (and its zip), then push it when asked; returns the result."""
    repo_id = check_repo_id(push_to) if push_to else None
    plan.target.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial_beside(plan.target)
    partial.mkdir()
    progress.add_partial(partial)
    gguf: dict[str, Any] = {}
    if plan.kind == "adapter":
        progress.update(f"copying the {plan.weights.label}")
        copy_adapter(plan.weights.path, partial)
    elif plan.kind.startswith("gguf"):
        from engine.export.gguf.writer import export_gguf

        gguf = export_gguf(plan, partial, progress, merge=merge_into_base)
    else:
        merge_into_base(plan, partial, progress)
    progress.update("writing the model card")
    (partial / "README.md").write_text(model_card(plan), encoding="utf-8")
    zip_partial = write_zip(partial, plan.zip_path, plan.target.name, progress) if make_zip else None
    progress.update("moving the export into place")
    try:
        os.rename(partial, plan.target)  # replaces only a missing or empty directory
    except OSError as exc:
        raise ExportError(f"cannot move the export to {plan.target}: {exc.strerror}") from None
    progress.drop_partial(partial)
    if zip_partial is not None:
        os.replace(zip_partial, plan.zip_path)
        progress.drop_partial(zip_partial)
    result: dict[str, Any] = {
        "path": str(plan.target),
        "kind": plan.kind,
        "dtype": plan.dtype if plan.kind == "merged" else None,
        "weights": plan.weights.label,
        "files": sorted(p.name for p in plan.target.iterdir()),
        "zip": str(plan.zip_path) if make_zip else None,
        **gguf,
    }
    progress.update(result=result)  # a push that fails or is cancelled still leaves this complete export
    if repo_id:
        try:
            result["repo_url"] = push_to_hub(plan.target, repo_id, private, progress)
        except ExportError as exc:
            raise ExportError(f"the export is saved at {plan.target}, but {exc}", result) from None
    return result
